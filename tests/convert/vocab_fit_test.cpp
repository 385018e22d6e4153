#include "convert/vocab_fit.h"

#include <gtest/gtest.h>

#include "mini_tokenizer.h"
#include "safetensors_builder.h"

namespace flashkv {
namespace {

Vocab LoadMini(int n) {
  testing::TempDir dir("vocab_fit");
  testing::WriteMiniTokenizer(dir.path() / "tokenizer.json", n);
  auto v = LoadVocabFromTokenizerJson((dir.path() / "tokenizer.json").string());
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return *v;
}

TEST(VocabFitTest, CutsALongVocabularyAndPutsMarkersLast) {
  Vocab v = LoadMini(600);
  ASSERT_EQ(v.size(), 600u);
  std::vector<std::string> notes;
  ASSERT_TRUE(FitVocabToModel(v, 512, &notes).ok());
  ASSERT_EQ(v.size(), 512u);
  // BOS/EOS are already present, so the five other markers take ids 507..511.
  EXPECT_EQ(v.tokens[506], "w506");
  EXPECT_EQ(v.tokens[507], "<｜User｜>");
  EXPECT_EQ(v.tokens[508], "<｜Assistant｜>");
  EXPECT_EQ(v.tokens[509], "<think>");
  EXPECT_EQ(v.tokens[510], "</think>");
  EXPECT_EQ(v.tokens[511], "｜DSML｜");
  for (int i = 507; i < 512; ++i) EXPECT_EQ(v.token_types[i], 3) << i;
  EXPECT_EQ(v.bos_id, 0);
  EXPECT_EQ(v.eos_id, 1);
  // "y z" -> "yz" (id 599) is gone; the merges whose parts and result survive stay in order.
  EXPECT_EQ(v.merges, (std::vector<std::string>{"a b", "ab c"}));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("cut from 600 to 507"), std::string::npos) << notes[0];
}

TEST(VocabFitTest, PadsAShortVocabulary) {
  Vocab v = LoadMini(100);
  std::vector<std::string> notes;
  ASSERT_TRUE(FitVocabToModel(v, 130, &notes).ok());
  ASSERT_EQ(v.size(), 130u);
  EXPECT_EQ(v.tokens[99], "yz");
  EXPECT_EQ(v.tokens[100], "<｜User｜>");
  EXPECT_EQ(v.tokens[104], "｜DSML｜");
  EXPECT_EQ(v.token_types[105], 5);  // unused padding
  EXPECT_EQ(v.merges.size(), 3u);
  ASSERT_EQ(notes.size(), 1u);
}

TEST(VocabFitTest, ExactFitWithMarkersIsUnchanged) {
  Vocab v = LoadMini(100);
  ASSERT_TRUE(FitVocabToModel(v, 105, nullptr).ok());
  Vocab again = v;
  std::vector<std::string> notes;
  ASSERT_TRUE(FitVocabToModel(again, 105, &notes).ok());
  EXPECT_EQ(again.tokens, v.tokens);
  EXPECT_TRUE(notes.empty());
}

TEST(VocabFitTest, MarkerInTheCutTailIsMovedIntoRange) {
  Vocab v = LoadMini(40);
  // A marker at id 38 would be cut by n_vocab 36: it must be re-added below 36.
  v.tokens[38] = "<｜User｜>";
  v.token_types[38] = 3;
  ASSERT_TRUE(FitVocabToModel(v, 36, nullptr).ok());
  ASSERT_EQ(v.size(), 36u);
  EXPECT_EQ(v.tokens[31], "<｜User｜>");
  EXPECT_EQ(v.tokens[35], "｜DSML｜");
  EXPECT_FALSE(FitVocabToModel(v, 4, nullptr).ok());
}

}  // namespace
}  // namespace flashkv
