#include "engine/output_stream.h"

#include <gtest/gtest.h>

namespace flashkv {
namespace {

GenerationRequest ChatRequest(bool thinking) {
  GenerationRequest r;
  r.output = OutputMode::kChat;
  r.thinking = thinking;
  return r;
}

// Usage counts a token as reasoning while reasoning_open() holds before it is fed: up to
// and including the one that completes </think>, even when the marker is split across
// pieces or the stop matcher holds the bytes back.
TEST(OutputStreamTest, ReasoningStaysOpenUntilThinkCloseIsFed) {
  GenerationRequest req = ChatRequest(true);
  req.stop = {"</th"};  // holds back every prefix of the marker
  OutputStream os(req);
  int reasoning = 0;
  for (const char* piece : {"Let", " me", " think", "</t", "hin", "k>", "Hi", "."}) {
    reasoning += os.reasoning_open();
    os.Feed(piece);
  }
  EXPECT_EQ(reasoning, 6);
  EXPECT_FALSE(os.reasoning_open());

  EXPECT_FALSE(OutputStream(ChatRequest(false)).reasoning_open());
  GenerationRequest raw = ChatRequest(true);
  raw.output = OutputMode::kRaw;
  EXPECT_FALSE(OutputStream(raw).reasoning_open());
}

}  // namespace
}  // namespace flashkv
