#include <gtest/gtest.h>

#include "server/sse.h"

namespace flashkv {
namespace {

TEST(SseProgressTest, PrefillCommentCarriesLlamaCppPromptProgressNumbers) {
  const std::string s = SsePrefillProgress(50000, 1024, 13312, 5321);
  // Still the ": prefill" comment clients already skip, now with the numbers.
  EXPECT_EQ(s,
            ": prefill {\"total\":50000,\"cache\":1024,\"processed\":13312,\"time_ms\":5321}\n\n");
}

}  // namespace
}  // namespace flashkv
