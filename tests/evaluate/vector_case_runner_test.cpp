// An official vector case through the engine (evaluate/vector_case_runner.h) on ds4-tiny:
// the verdict equals the one built from a plain Model::Forward greedy loop over the same
// prompt — the rows each step was chosen from are the same bits — with and without a
// prefill chunk, and a null model checks only the prompt count.
#include "evaluate/vector_case_runner.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "engine/sampler.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "tools/vector_runner.h"

namespace flashkv {
namespace {

const std::string kVectors = std::string(FLASHKV_SOURCE_DIR) + "/tests/data/official-vectors";
const std::string kDs4Tiny = std::string(FLASHKV_FIXTURES_DIR) + "/ds4-tiny/ds4-tiny.gguf";

class VectorCaseRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = Model::Load(kDs4Tiny, be_);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(*m);
    auto gguf = GgufFile::Open(kDs4Tiny);
    ASSERT_TRUE(gguf.ok());
    auto tok = Tokenizer::FromGguf(*gguf);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    tok_ = std::make_unique<Tokenizer>(std::move(*tok));
    auto cases = LoadVectorCases(kVectors);
    ASSERT_TRUE(cases.ok()) << cases.status().ToString();
    // The short cases keep the test quick (the long one is thousands of tokens).
    for (VectorCase& c : *cases) {
      if (c.kind == "short") cases_.push_back(std::move(c));
    }
    ASSERT_FALSE(cases_.empty());
  }

  // The verdict of the loop check-vectors ran before the engine did: the prompt at once,
  // then each greedy id fed alone, the rows they were chosen from kept.
  CaseVerdict Reference(const VectorCase& c) {
    auto tokens = VectorPromptTokens(c, *tok_);
    EXPECT_TRUE(tokens.ok());
    const int n_vocab = model_->config().n_vocab;
    const size_t steps = c.steps.size();
    auto state = model_->NewState(int(tokens->size() + steps + 1));
    EXPECT_TRUE(state.ok());
    std::vector<float> rows(steps * size_t(n_vocab));
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    EXPECT_TRUE(model_->Forward(*tokens, *state, LogitsFor::kLast, logits.data()).ok());
    for (size_t s = 0; s < steps; ++s) {
      std::copy(logits.begin(), logits.end(), rows.begin() + ptrdiff_t(s * size_t(n_vocab)));
      const int32_t chosen = Sampler::Greedy(logits);
      if (s + 1 < steps) {
        EXPECT_TRUE(model_->Forward({&chosen, 1}, *state, LogitsFor::kLast, logits.data()).ok());
      }
    }
    return CompareVectorCase(c, int(tokens->size()), VectorSteps(c, *tok_, rows, n_vocab, 20),
                             /*check_steps=*/true);
  }

  CpuBackend be_{nullptr};
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
  std::vector<VectorCase> cases_;
};

TEST_F(VectorCaseRunnerTest, EngineVerdictEqualsTheForwardLoops) {
  for (const VectorCase& c : cases_) {
    SCOPED_TRACE(c.id);
    const CaseVerdict want = Reference(c);
    ASSERT_EQ(want.steps.size(), c.steps.size());
    for (int chunk : {0, 3}) {
      VectorRunOptions o;
      o.prefill_chunk = chunk;
      std::vector<int64_t> progress;
      o.on_prefill = [&](int64_t done, int64_t total) {
        EXPECT_EQ(total, want.our_prompt_tokens);
        progress.push_back(done);
      };
      auto got = RunVectorCase(c, *tok_, model_.get(), o);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(FormatVerdict(*got), FormatVerdict(want)) << "chunk " << chunk;
      ASSERT_EQ(got->steps.size(), want.steps.size());
      for (size_t s = 0; s < want.steps.size(); ++s) {
        EXPECT_EQ(got->steps[s].logprob_of_official, want.steps[s].logprob_of_official);
        EXPECT_EQ(got->steps[s].chosen_match, want.steps[s].chosen_match);
        EXPECT_EQ(got->steps[s].top_overlap, want.steps[s].top_overlap);
      }
      ASSERT_FALSE(progress.empty());
      EXPECT_EQ(progress.back(), want.our_prompt_tokens);
      if (chunk == 3) {
        EXPECT_EQ(progress.front(), 3);
      }
    }
  }
}

TEST_F(VectorCaseRunnerTest, WithoutAModelOnlyThePromptCountIsChecked) {
  auto v = RunVectorCase(cases_[0], *tok_, nullptr, {});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->steps.empty());
  auto tokens = VectorPromptTokens(cases_[0], *tok_);
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ(v->our_prompt_tokens, int(tokens->size()));
}

}  // namespace
}  // namespace flashkv
