#include "tokenizer/vocab.h"

#include <gtest/gtest.h>

namespace flashkv {
namespace {

const std::string kTokenizerJson =
    std::string(FLASHKV_SOURCE_DIR) + "/models/tokenizer/tokenizer.json";

int32_t IdOf(const Vocab& v, const std::string& text) {
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.tokens[i] == text) return static_cast<int32_t>(i);
  }
  return -1;
}

TEST(VocabTest, LoadsDeepSeekV3TokenizerJson) {
  Expected<Vocab> v = LoadVocabFromTokenizerJson(kTokenizerJson);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  // 128000 BPE ids + added tokens up to <｜tool▁sep｜> at 128814.
  EXPECT_EQ(v->size(), 128815u);
  EXPECT_EQ(v->merges.size(), 127741u);
  EXPECT_EQ(v->merges[0], "Ġ t");
  EXPECT_EQ(v->bos_id, 0);
  EXPECT_EQ(v->eos_id, 1);
  EXPECT_EQ(v->tokens[3], "!");
  EXPECT_EQ(v->token_types[3], static_cast<int32_t>(TokenType::kNormal));
  EXPECT_EQ(IdOf(*v, "<｜User｜>"), 128803);
  EXPECT_EQ(IdOf(*v, "<｜Assistant｜>"), 128804);
  // "special": false in tokenizer.json but a DeepSeek marker: control, as llama.cpp does.
  EXPECT_EQ(v->token_types[128803], static_cast<int32_t>(TokenType::kControl));
  EXPECT_EQ(v->token_types[0], static_cast<int32_t>(TokenType::kControl));
  EXPECT_EQ(IdOf(*v, "<think>"), -1);
}

TEST(VocabTest, AddsMissingMarkersInUnusedRange) {
  Expected<Vocab> v = LoadVocabFromTokenizerJson(kTokenizerJson);
  ASSERT_TRUE(v.ok());
  ASSERT_TRUE(AddMissingChatMarkers(*v, 129280).ok());
  EXPECT_EQ(v->size(), 129280u);
  EXPECT_EQ(v->token_types.size(), 129280u);
  EXPECT_EQ(IdOf(*v, "<think>"), 128815);
  EXPECT_EQ(IdOf(*v, "</think>"), 128816);
  EXPECT_EQ(IdOf(*v, "｜DSML｜"), 128817);
  EXPECT_EQ(v->token_types[128817], static_cast<int32_t>(TokenType::kControl));
  EXPECT_EQ(v->tokens[128818], "[PAD128818]");
  EXPECT_EQ(v->token_types[129279], static_cast<int32_t>(TokenType::kUnused));
  // Idempotent: a second call finds every marker present and changes nothing.
  Vocab copy = *v;
  ASSERT_TRUE(AddMissingChatMarkers(*v, 129280).ok());
  EXPECT_EQ(copy.tokens, v->tokens);
}

TEST(VocabTest, AddMarkersFailsWithoutRoom) {
  Expected<Vocab> v = LoadVocabFromTokenizerJson(kTokenizerJson);
  ASSERT_TRUE(v.ok());
  Status s = AddMissingChatMarkers(*v, 128815 + 2);  // three markers missing, two free ids
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
}

TEST(VocabTest, MissingFileIsAnError) {
  Expected<Vocab> v = LoadVocabFromTokenizerJson("/nonexistent/tokenizer.json");
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace flashkv
