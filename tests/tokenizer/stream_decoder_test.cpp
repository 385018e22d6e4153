#include "tokenizer/stream_decoder.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_tokenizers.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace flashkv {
namespace {

using namespace testing_tokenizers;  // NOLINT: test helpers

int32_t ByteToken(uint8_t b) {
  return Tiny().FindToken(byte_level::EncodeByte(b));
}

TEST(StreamDecoderTest, HoldsASplitCharacterUntilComplete) {
  // 你 = E4 BD A0, fed one byte token at a time.
  StreamDecoder d(Tiny());
  EXPECT_EQ(*d.Push(ByteToken('a')), "a");
  EXPECT_EQ(*d.Push(ByteToken(0xE4)), "");
  EXPECT_EQ(d.pending_bytes(), 1u);
  EXPECT_EQ(*d.Push(ByteToken(0xBD)), "");
  EXPECT_EQ(*d.Push(ByteToken(0xA0)), "你");
  EXPECT_EQ(d.pending_bytes(), 0u);
  EXPECT_EQ(d.Flush(), "");
}

TEST(StreamDecoderTest, InvalidBytesPassThroughAndFlushReturnsTail) {
  StreamDecoder d(Tiny());
  // 0xFF can never start a character: emitted at once, unchanged.
  EXPECT_EQ(*d.Push(ByteToken(0xFF)), "\xff");
  // E4 then 'x': the held lead turns out invalid and is emitted with the 'x'.
  EXPECT_EQ(*d.Push(ByteToken(0xE4)), "");
  EXPECT_EQ(*d.Push(ByteToken('x')), "\xe4x");
  // A 4-byte lead left hanging at the end comes out of Flush.
  EXPECT_EQ(*d.Push(ByteToken(0xF0)), "");
  EXPECT_EQ(*d.Push(ByteToken(0x9F)), "");
  EXPECT_EQ(d.Flush(), "\xf0\x9f");
  EXPECT_FALSE(d.Push(1 << 30).ok());
}

TEST(StreamDecoderTest, StreamsEveryFixtureTextExactly) {
  std::ifstream in(std::string(FLASHKV_FIXTURES_DIR) + "/tokenizer_cases.json");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json fixture = nlohmann::json::parse(ss.str());
  for (const auto& c : fixture["cases"]) {
    std::string text = c["text"];
    StreamDecoder d(V3());
    std::string streamed;
    for (int32_t id : c["ids"].get<std::vector<int32_t>>()) {
      std::string chunk = *d.Push(id);
      // Valid input → every chunk is whole characters.
      EXPECT_EQ(utf8::ValidPrefixLength(chunk), chunk.size()) << text;
      streamed += chunk;
    }
    streamed += d.Flush();
    EXPECT_EQ(streamed, text);
  }
}

TEST(Utf8Test, ValidityRules) {
  EXPECT_EQ(utf8::ValidPrefixLength("héllo"), 6u);
  EXPECT_EQ(utf8::ValidPrefixLength("ab\xc0\xaf"), 2u);          // overlong
  EXPECT_EQ(utf8::ValidPrefixLength("ab\xed\xa0\x80"), 2u);      // surrogate
  EXPECT_EQ(utf8::ValidPrefixLength("ab\xf4\x90\x80\x80"), 2u);  // > U+10FFFF
  EXPECT_EQ(utf8::IncompleteTailLength("ab\xe4\xbd"), 2u);
  EXPECT_EQ(utf8::IncompleteTailLength("ab\xe4x"), 0u);
  EXPECT_EQ(utf8::IncompleteTailLength("ab\xed\xa0"), 0u);  // can only become a surrogate
  EXPECT_EQ(utf8::ReplaceInvalid("a\xff"
                                 "b\xe4\xbd"
                                 "c"),
            "a\uFFFDb\uFFFDc");
  EXPECT_EQ(utf8::ReplaceInvalid("ok 你"), "ok 你");
}

}  // namespace
}  // namespace flashkv
