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

TEST(VocabTest, LoadsDs4TinyGguf) {
  Expected<GgufFile> gguf =
      GgufFile::Open(std::string(FLASHKV_FIXTURES_DIR) + "/ds4-tiny/ds4-tiny.gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
  Expected<Vocab> v = LoadVocabFromGguf(*gguf);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->size(), 1024u);
  EXPECT_EQ(v->merges.size(), 760u);
  EXPECT_EQ(v->merges.back(), "> Ċ");
  EXPECT_EQ(v->bos_id, 0);
  EXPECT_EQ(v->eos_id, 1);
  EXPECT_EQ(IdOf(*v, "<｜User｜>"), 1019);
  EXPECT_EQ(IdOf(*v, "｜DSML｜"), 1023);
  EXPECT_EQ(v->token_types[1023], static_cast<int32_t>(TokenType::kControl));
  EXPECT_EQ(v->token_types[1018], static_cast<int32_t>(TokenType::kNormal));
  // Already complete: nothing to add, nothing padded.
  ASSERT_TRUE(AddMissingChatMarkers(*v, 1024).ok());
  EXPECT_EQ(v->size(), 1024u);
}

TEST(VocabTest, GgufRoundTrip) {
  Expected<Vocab> v = LoadVocabFromTokenizerJson(kTokenizerJson);
  ASSERT_TRUE(v.ok());
  ASSERT_TRUE(AddMissingChatMarkers(*v, 129280).ok());
  GgufWriter writer;
  WriteVocabToGguf(*v, writer);
  Expected<std::vector<uint8_t>> bytes = writer.WriteToBytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  Expected<GgufFile> gguf = GgufFile::FromBytes(std::move(*bytes));
  ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
  EXPECT_EQ(*gguf->GetString("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(*gguf->GetString("tokenizer.ggml.pre"), "joyai-llm");
  EXPECT_EQ(*gguf->TypeOf("tokenizer.ggml.bos_token_id"), GgufType::kU32);
  Expected<Vocab> back = LoadVocabFromGguf(*gguf);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->tokens, v->tokens);
  EXPECT_EQ(back->token_types, v->token_types);
  EXPECT_EQ(back->merges, v->merges);
  EXPECT_EQ(back->bos_id, 0);
  EXPECT_EQ(back->eos_id, 1);
}

}  // namespace
}  // namespace flashkv
