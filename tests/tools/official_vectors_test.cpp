#include "tools/official_vectors.h"

#include <gtest/gtest.h>

namespace flashkv {
namespace {

const std::string kDir = std::string(FLASHKV_SOURCE_DIR) + "/tests/data/official-vectors";

TEST(OfficialVectorsTest, LoadsAllFiveCases) {
  auto cases = LoadVectorCases(kDir);
  ASSERT_TRUE(cases.ok()) << cases.status().ToString();
  ASSERT_EQ(cases->size(), 5u);
  EXPECT_EQ((*cases)[0].id, "short_italian_fact");
  EXPECT_EQ((*cases)[0].prompt_tokens, 21);
  ASSERT_EQ((*cases)[0].steps.size(), 4u);
  EXPECT_EQ((*cases)[0].steps[0].token.bytes, "Ada");
  EXPECT_EQ((*cases)[0].steps[0].top.size(), 20u);
  EXPECT_EQ((*cases)[3].id, "long_memory_archive");
  EXPECT_EQ((*cases)[4].prompt_tokens, 3844);
  EXPECT_EQ((*cases)[4].request["messages"][0]["role"], "user");
}

EngineStep StepFrom(const VectorStep& s, int drop_top = 0) {
  EngineStep e;
  e.chosen_bytes = s.token.bytes;
  e.logprob_of_official = -0.01;
  for (size_t i = drop_top; i < s.top.size(); ++i) e.top.push_back(s.top[i]);
  return e;
}

TEST(OfficialVectorsTest, MatchingContinuationPasses) {
  auto cases = LoadVectorCases(kDir);
  ASSERT_TRUE(cases.ok());
  const VectorCase& c = (*cases)[1];
  std::vector<EngineStep> ours;
  for (const auto& s : c.steps) ours.push_back(StepFrom(s));
  CaseVerdict v = CompareVectorCase(c, c.prompt_tokens, ours, true);
  EXPECT_TRUE(v.ok());
  ASSERT_EQ(v.steps.size(), c.steps.size());
  for (const auto& s : v.steps) {
    EXPECT_TRUE(s.chosen_match);
    EXPECT_EQ(s.top_overlap, s.official_top_count);  // the same list overlaps fully
  }
  EXPECT_NE(FormatVerdict(v).find("PASS"), std::string::npos);
}

TEST(OfficialVectorsTest, WrongContinuationFails) {
  auto cases = LoadVectorCases(kDir);
  ASSERT_TRUE(cases.ok());
  const VectorCase& c = (*cases)[0];
  std::vector<EngineStep> ours;
  for (const auto& s : c.steps) ours.push_back(StepFrom(s));
  ours[2].chosen_bytes = "Babbage";  // a deliberately wrong token at step 2
  CaseVerdict v = CompareVectorCase(c, c.prompt_tokens, ours, true);
  EXPECT_FALSE(v.ok());
  EXPECT_TRUE(v.steps[0].chosen_match);
  EXPECT_FALSE(v.steps[2].chosen_match);
  EXPECT_NE(FormatVerdict(v).find("MISMATCH"), std::string::npos);
}

TEST(OfficialVectorsTest, PromptCountMismatchAndMissingStepsFail) {
  auto cases = LoadVectorCases(kDir);
  ASSERT_TRUE(cases.ok());
  const VectorCase& c = (*cases)[0];
  EXPECT_FALSE(CompareVectorCase(c, c.prompt_tokens + 1, {}, false).ok());
  EXPECT_TRUE(CompareVectorCase(c, c.prompt_tokens, {}, false).ok());
  // Steps requested but none produced: every step is a mismatch.
  CaseVerdict v = CompareVectorCase(c, c.prompt_tokens, {}, true);
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(v.steps.size(), c.steps.size());
}

TEST(OfficialVectorsTest, TopOverlapCountsOnlyRealAlternatives) {
  VectorCase c;
  c.id = "synthetic";
  c.prompt_tokens = 3;
  VectorStep s;
  s.token = {"a", "a"};
  s.top = {{{"a", "a"}, 0.0}, {{"b", "b"}, -1.0}, {{"z", "z"}, -9999.0}};
  c.steps.push_back(s);
  EngineStep e;
  e.chosen_bytes = "a";
  e.top = {{{"a", "a"}, -0.1}, {{"z", "z"}, -2.0}, {{"q", "q"}, -3.0}};
  CaseVerdict v = CompareVectorCase(c, 3, {e}, true);
  ASSERT_EQ(v.steps.size(), 1u);
  EXPECT_EQ(v.steps[0].official_top_count, 2);
  EXPECT_EQ(v.steps[0].top_overlap, 1);  // "z" is official only as a rounded-to-zero entry
}

}  // namespace
}  // namespace flashkv
