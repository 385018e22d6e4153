#include "server/usage.h"

#include <gtest/gtest.h>

namespace flashkv {
namespace {

GenerationResult Result() {
  GenerationResult r;
  r.cache.source = CacheSource::kDisk;
  r.cache.detail = "disk-text";
  r.cache.prompt_tokens = 1000;
  r.cache.cached_tokens = 900;
  r.cache.restore_ms = 12.5;
  r.completion_tokens = 48;
  r.reasoning_tokens = 40;
  return r;
}

// Only the fields each API defines: clients map extensions onto other providers' meanings
// (Pi read cache_write_tokens as a write count and under-reported cache reads).
TEST(UsageTest, EachApiGetsItsOwnStandardFieldsWithReasoningTokens) {
  const GenerationResult r = Result();
  EXPECT_EQ(OpenAiUsage(r), Json::parse(R"({"prompt_tokens": 1000, "completion_tokens": 48,
      "total_tokens": 1048, "prompt_tokens_details": {"cached_tokens": 900},
      "completion_tokens_details": {"reasoning_tokens": 40}})"));
  EXPECT_EQ(ResponsesUsage(r), Json::parse(R"({"input_tokens": 1000,
      "input_tokens_details": {"cached_tokens": 900}, "output_tokens": 48,
      "output_tokens_details": {"reasoning_tokens": 40}, "total_tokens": 1048})"));
  EXPECT_EQ(AnthropicUsage(r), Json::parse(R"({"input_tokens": 0,
      "cache_creation_input_tokens": 100, "cache_read_input_tokens": 900,
      "output_tokens": 48})"));
  EXPECT_EQ(CacheHeaderValue(r.cache),
            "disk; reused=900; prompt=1000; restore_ms=12.5; match=disk-text");
}

}  // namespace
}  // namespace flashkv
