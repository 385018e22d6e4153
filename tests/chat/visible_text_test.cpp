#include "chat/visible_text.h"

#include <gtest/gtest.h>

namespace flashkv {
namespace {

const std::string kBos = "<｜begin▁of▁sentence｜>";
const std::string kEos = "<｜end▁of▁sentence｜>";

ChatMessage User(std::string text) {
  ChatMessage m;
  m.role = ChatRole::kUser;
  m.content = std::move(text);
  return m;
}

ChatMessage Reply(std::string content, std::string reasoning) {
  ChatMessage m;
  m.role = ChatRole::kAssistant;
  m.content = std::move(content);
  m.reasoning = std::move(reasoning);
  return m;
}

// A reply with a tool call: the template then keeps the reasoning of the turn, so the two
// renderings differ.
ChatMessage ToolCallReply() {
  ChatMessage m = Reply("Checking.", "need the weather");
  m.tool_calls.push_back({"call_1", "get_weather", R"({"city":"Oslo"})"});
  m.raw_dsml = "<｜DSML｜tool_calls>sampled bytes</｜DSML｜tool_calls>";
  return m;
}

PromptOptions Thinking(ThinkingMode mode) {
  PromptOptions o;
  o.thinking = mode;
  return o;
}

TEST(VisibleTextTest, NoHistoryMakesNothingVisible) {
  EXPECT_TRUE(
      VisibleTextsAfterReply({}, Reply("Hello", ""), Thinking(ThinkingMode::kNone), true).empty());
}

TEST(VisibleTextTest, ReplyIsRenderedAsHistoryUpToTheNextUserMarker) {
  const auto texts =
      VisibleTextsAfterReply({User("Hi")}, Reply("Hello", ""), Thinking(ThinkingMode::kNone), true);
  ASSERT_EQ(texts.size(), 1u);
  EXPECT_EQ(texts[0], kBos + "<｜User｜>Hi<｜Assistant｜></think>Hello" + kEos);
}

TEST(VisibleTextTest, DroppedReasoningGivesOneText) {
  // Without tools the template drops a finished turn's reasoning: both renderings agree.
  const auto texts = VisibleTextsAfterReply({User("Hi")}, Reply("Hello", "think first"),
                                            Thinking(ThinkingMode::kHigh), true);
  ASSERT_EQ(texts.size(), 1u);
  EXPECT_EQ(texts[0], kBos + "<｜User｜>Hi<｜Assistant｜></think>Hello" + kEos);
}

TEST(VisibleTextTest, KeptReasoningGivesBothTextsLikeliestFirst) {
  const ChatMessage reply = ToolCallReply();
  const std::string head = kBos + "<｜User｜>weather?<｜Assistant｜><think>";
  const std::string tail = "</think>Checking." + reply.raw_dsml + kEos;
  const std::string with = head + "need the weather" + tail;
  const std::string without = head + tail;

  const auto replaying =
      VisibleTextsAfterReply({User("weather?")}, reply, Thinking(ThinkingMode::kHigh), true);
  ASSERT_EQ(replaying.size(), 2u);
  EXPECT_EQ(replaying[0], with);
  EXPECT_EQ(replaying[1], without);

  const auto dropping =
      VisibleTextsAfterReply({User("weather?")}, reply, Thinking(ThinkingMode::kHigh), false);
  ASSERT_EQ(dropping.size(), 2u);
  EXPECT_EQ(dropping[0], without);
  EXPECT_EQ(dropping[1], with);
}

TEST(VisibleTextTest, CutsAtTheLastUserMarkerNotOneInTheReply) {
  // A reply that quotes the marker text keeps it: only the appended turn's marker cuts.
  const auto texts = VisibleTextsAfterReply({User("say it")}, Reply("<｜User｜> is a marker", ""),
                                            Thinking(ThinkingMode::kNone), true);
  ASSERT_EQ(texts.size(), 1u);
  EXPECT_EQ(texts[0],
            kBos + "<｜User｜>say it<｜Assistant｜></think><｜User｜> is a marker" + kEos);
}

TEST(VisibleTextTest, ToolResultsInHistoryAreKept) {
  ChatMessage call = ToolCallReply();
  call.reasoning.clear();
  ChatMessage result;
  result.role = ChatRole::kTool;
  result.content = "12 C";
  result.tool_call_id = "call_1";
  const auto texts =
      VisibleTextsAfterReply({User("weather?"), call, result}, Reply("It is 12 C.", ""),
                             Thinking(ThinkingMode::kNone), true);
  ASSERT_EQ(texts.size(), 1u);
  EXPECT_EQ(texts[0], kBos + "<｜User｜>weather?<｜Assistant｜></think>Checking." + call.raw_dsml +
                          kEos +
                          "<｜User｜><tool_result>12 C</tool_result><｜Assistant｜></think>" +
                          "It is 12 C." + kEos);
}

}  // namespace
}  // namespace flashkv
