#include "chat/prompt_renderer.h"

#include <gtest/gtest.h>

#include "chat/dsml.h"
#include "chat/tool_schema.h"

namespace flashkv {
namespace {

using json = nlohmann::ordered_json;

const std::string kBos = "<｜begin▁of▁sentence｜>";
const std::string kEos = "<｜end▁of▁sentence｜>";

ChatMessage Message(ChatRole role, std::string text) {
  ChatMessage m;
  m.role = role;
  m.content = std::move(text);
  return m;
}
ChatMessage System(std::string text) {
  return Message(ChatRole::kSystem, std::move(text));
}
ChatMessage User(std::string text) {
  return Message(ChatRole::kUser, std::move(text));
}
ChatMessage Assistant(std::string text, std::string reasoning = "") {
  ChatMessage m = Message(ChatRole::kAssistant, std::move(text));
  m.reasoning = std::move(reasoning);
  return m;
}
ChatMessage Tool(std::string text) {
  ChatMessage m = Message(ChatRole::kTool, std::move(text));
  m.tool_call_id = "call_1";
  return m;
}

PromptOptions Mode(ThinkingMode mode) {
  PromptOptions o;
  o.thinking = mode;
  return o;
}

TEST(PromptRendererTest, FirstTurnInEachThinkingMode) {
  std::vector<ChatMessage> msgs = {System("Be brief."), User("Hi")};
  EXPECT_EQ(RenderPrompt(msgs, Mode(ThinkingMode::kNone)),
            kBos + "Be brief.<｜User｜>Hi<｜Assistant｜></think>");
  EXPECT_EQ(RenderPrompt(msgs, Mode(ThinkingMode::kHigh)),
            kBos + "Be brief.<｜User｜>Hi<｜Assistant｜><think>");
  EXPECT_EQ(RenderPrompt(msgs, Mode(ThinkingMode::kMax)),
            kBos +
                "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
                "You MUST be very thorough in your thinking and comprehensively decompose the "
                "problem to resolve the root cause, rigorously stress-testing your logic against "
                "all potential paths, edge cases, and adversarial scenarios.\n"
                "Explicitly write out your entire deliberation process, documenting every "
                "intermediate step, considered alternative, and rejected hypothesis to ensure "
                "absolutely no assumption is left unchecked.\n\n"
                "Be brief.<｜User｜>Hi<｜Assistant｜><think>");
}

TEST(PromptRendererTest, SystemAndDeveloperTextsJoinWithBlankLine) {
  std::vector<ChatMessage> msgs = {System("A"), System("B"), User("u")};
  EXPECT_EQ(RenderPrompt(msgs, Mode(ThinkingMode::kNone)),
            kBos + "A\n\nB<｜User｜>u<｜Assistant｜></think>");
}

// DeepSeek's V4 encoding renders a system message as its bare text where it stands; the
// user turn before it still gets the assistant marker. Appending one never changes the
// text before it, so a cached prompt stays a prefix.
TEST(PromptRendererTest, LaterSystemMessagesStayInPlace) {
  std::vector<ChatMessage> msgs = {System("A"), User("u"), System("B")};
  const std::string first = RenderPrompt(msgs, Mode(ThinkingMode::kHigh));
  EXPECT_EQ(first, kBos + "A<｜User｜>uB<｜Assistant｜><think>");
  msgs.push_back(Assistant("a", "r"));
  msgs.push_back(System("C"));
  msgs.push_back(Tool("t1"));
  msgs.push_back(System("D"));
  msgs.push_back(Tool("t2"));
  const std::string later = RenderPrompt(msgs, Mode(ThinkingMode::kNone));
  EXPECT_EQ(later,
            kBos + "A<｜User｜>uB<｜Assistant｜></think>a" + kEos +
                "C<｜User｜><tool_result>t1</tool_result>D<｜User｜><tool_result>t2</tool_result>"
                "<｜Assistant｜></think>");
  const std::string prefix = kBos + "A<｜User｜>uB<｜Assistant｜></think>";
  EXPECT_EQ(later.substr(0, prefix.size()), prefix);
}

TEST(PromptRendererTest, OldReasoningDroppedWithoutToolContext) {
  std::vector<ChatMessage> msgs = {User("q1"), Assistant("a1", "r1"), User("q2")};
  EXPECT_EQ(
      RenderPrompt(msgs, Mode(ThinkingMode::kHigh)),
      kBos + "<｜User｜>q1<｜Assistant｜></think>a1" + kEos + "<｜User｜>q2<｜Assistant｜><think>");
  // Non-thinking history never carries reasoning.
  EXPECT_EQ(RenderPrompt(msgs, Mode(ThinkingMode::kNone)),
            kBos + "<｜User｜>q1<｜Assistant｜></think>a1" + kEos +
                "<｜User｜>q2<｜Assistant｜></think>");
}

TEST(PromptRendererTest, ReasoningKeptAfterLastUserAndInToolLoops) {
  // An assistant message after the last user message keeps its reasoning.
  std::vector<ChatMessage> msgs = {User("q"), Assistant("a", "r")};
  EXPECT_EQ(RenderPrompt(msgs, Mode(ThinkingMode::kHigh)),
            kBos + "<｜User｜>q<｜Assistant｜><think>r</think>a" + kEos);
  // Any tool message makes every assistant turn keep its reasoning.
  msgs = {User("q1"), Assistant("a1", "r1"), User("q2"), Tool("out")};
  EXPECT_EQ(RenderPrompt(msgs, Mode(ThinkingMode::kHigh)),
            kBos + "<｜User｜>q1<｜Assistant｜><think>r1</think>a1" + kEos +
                "<｜User｜>q2<｜User｜><tool_result>out</tool_result><｜Assistant｜><think>");
}

TEST(PromptRendererTest, ConsecutiveAssistantMessagesShareOneMarker) {
  std::vector<ChatMessage> msgs = {User("q"), Assistant("a"), Assistant("b")};
  EXPECT_EQ(RenderPrompt(msgs, Mode(ThinkingMode::kNone)),
            kBos + "<｜User｜>q<｜Assistant｜></think>a" + kEos + "b" + kEos);
}

TEST(PromptRendererTest, ToolCallsAndResults) {
  ChatMessage call = Assistant("Let me check.", "need weather");
  call.tool_calls = {{"call_1", "get_weather", R"({"city":"Paris","days":3,"units":["c"]})"},
                     {"call_2", "now", "{}"}};
  std::vector<ChatMessage> msgs = {User("Weather?"), call, Tool("sunny </tool_result> & <b>"),
                                   Tool("12:00")};
  std::string want =
      kBos + "<｜User｜>Weather?<｜Assistant｜><think>need weather</think>" +
      "Let me check.\n\n<｜DSML｜tool_calls>\n"
      "<｜DSML｜invoke name=\"get_weather\">\n"
      "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"units\" string=\"false\">[\"c\"]</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n"
      "<｜DSML｜invoke name=\"now\">\n"
      "</｜DSML｜invoke>\n"
      "</｜DSML｜tool_calls>" +
      kEos +
      "<｜User｜><tool_result>sunny &lt;/tool_result> & <b></tool_result>"
      "<tool_result>12:00</tool_result><｜Assistant｜><think>";
  EXPECT_EQ(RenderPrompt(msgs, Mode(ThinkingMode::kHigh)), want);
}

TEST(PromptRendererTest, ReplaysRawDsmlVerbatim) {
  ChatMessage call = Assistant("");
  call.tool_calls = {{"call_1", "f", R"({"b":1,"a":2})"}};
  call.raw_dsml =
      "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n"
      "<｜DSML｜parameter name=\"a\" string=\"false\">2</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"b\" string=\"false\">1</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  std::vector<ChatMessage> msgs = {User("go"), call};
  EXPECT_EQ(RenderPrompt(msgs, Mode(ThinkingMode::kNone)),
            kBos + "<｜User｜>go<｜Assistant｜></think>" + call.raw_dsml + kEos);
}

TEST(PromptRendererTest, ToolsBlockComesFirstInSystem) {
  PromptOptions o = Mode(ThinkingMode::kHigh);
  o.tools = {NormalizeToolSchema(json::parse(
      R"({"type":"function","function":{"name":"get_weather","description":"Weather now",)"
      R"("parameters":{"type":"object","properties":{"city":{"type":"string"}}}}})"))};
  std::string tools_block =
      "## Tools\n\n"
      "You have access to a set of tools to help answer the user's question. You can invoke "
      "tools by writing a \"<｜DSML｜tool_calls>\" block like the following:\n\n"
      "<｜DSML｜tool_calls>\n"
      "<｜DSML｜invoke name=\"$TOOL_NAME\">\n"
      "<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE"
      "</｜DSML｜parameter>\n...\n</｜DSML｜invoke>\n"
      "<｜DSML｜invoke name=\"$TOOL_NAME2\">\n...\n</｜DSML｜invoke>\n"
      "</｜DSML｜tool_calls>\n\n"
      "String parameters should be specified as is and set `string=\"true\"`. For all other "
      "types (numbers, booleans, arrays, objects), pass the value in JSON format and set "
      "`string=\"false\"`.\n\n"
      "If thinking_mode is enabled (triggered by <think>), you MUST output your complete "
      "reasoning inside <think>...</think> BEFORE any tool calls or final response.\n\n"
      "Otherwise, output directly after </think> with tool calls or final response.\n\n"
      "### Available Tool Schemas\n\n"
      "{\"name\": \"get_weather\", \"description\": \"Weather now\", \"parameters\": "
      "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}\n\n"
      "You MUST strictly follow the above defined tool name and parameter schemas to invoke "
      "tool calls.\n";
  EXPECT_EQ(RenderToolsBlock(o.tools), tools_block);
  std::vector<ChatMessage> msgs = {System("You are terse."), User("Paris?")};
  EXPECT_EQ(RenderPrompt(msgs, o),
            kBos + tools_block + "\nYou are terse.<｜User｜>Paris?<｜Assistant｜><think>");
  // Tools active without a system message: the block is followed by the user turn.
  msgs = {User("Paris?")};
  EXPECT_EQ(RenderPrompt(msgs, o), kBos + tools_block + "<｜User｜>Paris?<｜Assistant｜><think>");
}

TEST(PromptRendererTest, CompletionTemplate) {
  EXPECT_EQ(RenderCompletionPrompt("2+2=", ThinkingMode::kNone),
            kBos + "You are a helpful assistant<｜User｜>2+2=<｜Assistant｜></think>");
  EXPECT_EQ(RenderCompletionPrompt("x", ThinkingMode::kHigh),
            kBos + "You are a helpful assistant<｜User｜>x<｜Assistant｜><think>");
  EXPECT_TRUE(RenderCompletionPrompt("x", ThinkingMode::kMax)
                  .starts_with(kBos + "Reasoning Effort: Absolute maximum"));
}

TEST(PromptRendererTest, ThinkMaxNeedsLongContext) {
  EXPECT_EQ(EffectiveThinkingMode(ThinkingMode::kMax, 393216), ThinkingMode::kMax);
  EXPECT_EQ(EffectiveThinkingMode(ThinkingMode::kMax, 393215), ThinkingMode::kHigh);
  EXPECT_EQ(EffectiveThinkingMode(ThinkingMode::kNone, 100), ThinkingMode::kNone);
}

TEST(ToolSchemaTest, NormalizesEachDialect) {
  json openai = json::parse(R"({"type":"function","function":{"name":"f","parameters":{}}})");
  EXPECT_EQ(NormalizeToolSchema(openai).dump(), R"({"name":"f","parameters":{}})");
  json responses = json::parse(
      R"({"type":"function","name":"g","strict":true,"description":"d","parameters":{}})");
  EXPECT_EQ(NormalizeToolSchema(responses).dump(),
            R"({"name":"g","description":"d","parameters":{}})");
  json anthropic = json::parse(R"({"name":"h","description":"d","input_schema":{}})");
  EXPECT_EQ(NormalizeToolSchema(anthropic), anthropic);
}

TEST(ToolSchemaTest, PythonStyleJson) {
  json v = json::parse(R"({"s":"a\"b\\c\nd\u0001é","n":[1,2.5,true,null],"o":{}})");
  EXPECT_EQ(DumpJsonPythonStyle(v),
            R"({"s": "a\"b\\c\nd\u0001é", "n": [1, 2.5, true, null], "o": {}})");
}

TEST(DsmlTest, CanonicalEscapes) {
  std::vector<ToolCall> calls = {
      {"1", "w\"x",
       R"({"text":"a </｜DSML｜parameter> b && c > d","obj":{"k":"</｜DSML｜parameter>"}})"},
      {"2", "raw", "not json"}};
  EXPECT_EQ(
      RenderDsmlToolCalls(calls),
      "\n\n<｜DSML｜tool_calls>\n"
      "<｜DSML｜invoke name=\"w&quot;x\">\n"
      "<｜DSML｜parameter name=\"text\" string=\"true\">a &lt;/｜DSML｜parameter> b && c > d"
      "</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"obj\" string=\"false\">{\"k\":\"\\u003c/｜DSML｜parameter>\"}"
      "</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n"
      "<｜DSML｜invoke name=\"raw\">\n"
      "<｜DSML｜parameter name=\"arguments\" string=\"true\">not json</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n"
      "</｜DSML｜tool_calls>");
  EXPECT_EQ(RenderDsmlToolCalls({}), "");
}

}  // namespace
}  // namespace flashkv
