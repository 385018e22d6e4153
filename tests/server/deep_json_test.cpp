// JSON nested a million levels deep wherever the server parses a string as JSON — the
// tool-call arguments of chat messages, Responses function_call and hosted call items —
// is a 400 naming the field, found before anything recurses; the same text reaching the
// renderer or coming out of the model is handled as text. Numbers beyond double's range
// are 400s too. (Issue 17: depth 80,000 used to overflow the stack in the serializer.)
#include <string>

#include <gtest/gtest.h>

#include "chat/dsml.h"
#include "chat/prompt_renderer.h"
#include "server/anthropic_messages.h"
#include "server/api_errors.h"
#include "server/openai_chat.h"
#include "server/openai_responses.h"
#include "server/request_reader.h"
#include "sse_test_util.h"

namespace flashkv {
namespace {

constexpr int kDeep = 1000000;

std::string Deep(int depth = kDeep) {
  return std::string(size_t(depth), '[') + std::string(size_t(depth), ']');
}

// {"a":{"a":…{"a":1}…}}: an object, so the renderer walks into its members.
std::string DeepObject(int depth = kDeep) {
  std::string out;
  out.reserve(size_t(depth) * 6 + 1);
  for (int i = 0; i < depth; ++i) out += "{\"a\":";
  out += '1';
  out.append(size_t(depth), '}');
  return out;
}

// `text` as a JSON string literal.
std::string Quoted(const std::string& text) {
  return Json(text).dump();
}

void ExpectRefused(Dialect dialect, const std::string& body, const std::string& field) {
  Expected<ApiRequest> r = ReadApiRequest(dialect, body);
  ASSERT_FALSE(r.ok()) << field;
  EXPECT_EQ(HttpStatusFor(r.status()), 400);
  EXPECT_EQ(r.status().message(), "'" + field + "' holds JSON nested deeper than 256 levels");
}

TEST(DeepJsonTest, ChatToolCallArgumentsAreRefusedByName) {
  const std::string body =
      R"({"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,)"
      R"("tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":)" +
      Quoted(DeepObject()) + R"(}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]})";
  ExpectRefused(Dialect::kChatCompletions, body, "messages[1].tool_calls[0].function.arguments");
}

TEST(DeepJsonTest, ResponsesCallArgumentsAreRefusedByName) {
  const std::string call =
      R"({"input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c1",)"
      R"("name":"f","arguments":)" +
      Quoted(DeepObject()) + R"(},{"type":"function_call_output","call_id":"c1","output":"ok"}]})";
  ExpectRefused(Dialect::kResponses, call, "input[1].arguments");
  // Hosted calls carry theirs under action, arguments or input.
  for (const char* type : {"local_shell_call", "tool_search_call", "web_search_call"}) {
    for (const char* key : {"action", "arguments", "input"}) {
      const std::string body = std::string(R"({"input":[{"role":"user","content":"hi"},)") +
                               R"({"type":")" + type + R"(","call_id":"c1",")" + key +
                               "\":" + Quoted(Deep()) + "}]}";
      ExpectRefused(Dialect::kResponses, body, std::string("input[1].") + key);
    }
  }
}

TEST(DeepJsonTest, DeepObjectsInTheBodyHitTheNestingLimit) {
  // Anthropic tool_use input (and every other object) is part of the body.
  const std::string body =
      R"({"max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use",)"
      R"("id":"t","name":"f","input":{"a":)" +
      Deep() + "}}]}]}";
  Expected<ApiRequest> r = ReadApiRequest(Dialect::kAnthropic, body);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "JSON nesting deeper than 256 levels");
}

TEST(DeepJsonTest, TheRendererTreatsTooDeepArgumentsAsText) {
  // Whatever reaches the renderer without the schema check stays safe.
  ChatMessage call;
  call.role = ChatRole::kAssistant;
  call.tool_calls.push_back(ToolCall{"c1", "f", DeepObject()});
  call.tool_calls.push_back(ToolCall{"c2", "g", Deep()});
  const std::string dsml = RenderDsmlToolCalls(call.tool_calls);
  EXPECT_NE(dsml.find("<｜DSML｜parameter name=\"arguments\" string=\"true\">{\"a\":{\"a\":"),
            std::string::npos);
  EXPECT_NE(dsml.find("<｜DSML｜parameter name=\"arguments\" string=\"true\">[[[["),
            std::string::npos);
  ChatMessage user;
  user.role = ChatRole::kUser;
  user.content = "hi";
  PromptOptions po;
  EXPECT_NE(RenderPrompt({user, call}, po).find(DeepObject()), std::string::npos);
}

TEST(DeepJsonTest, DeepModelOutputStaysTextInEveryDialect) {
  // A string="false" parameter the model nests a million levels deep, and loose-XML
  // parameter elements nested 100,000 levels deep.
  std::string loose;
  for (int i = 0; i < 100000; ++i) loose += "<｜DSML｜parameter name=\"a\">";
  loose += "x";
  for (int i = 0; i < 100000; ++i) loose += "</｜DSML｜parameter>";
  const std::string text =
      "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n"
      "<｜DSML｜parameter name=\"deep\" string=\"false\">" +
      Deep() + "</｜DSML｜parameter>\n<｜DSML｜parameter name=\"loose\">" + loose +
      "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  GenerationRequest req = testing::ToolRequest(false, "call_");
  testing::Generated g = testing::Generate(req, text, FinishReason::kToolCalls, 65536);
  ASSERT_EQ(g.result.parsed.tool_calls.size(), 1u);
  const Json args = Json::parse(g.result.parsed.tool_calls[0].arguments);
  EXPECT_EQ(args["deep"], Deep());  // a string, not a million arrays
  // 256 objects, then the rest of the elements as text.
  const Json* level = &args["loose"];
  int objects = 0;
  while (level->is_object()) {
    level = &(*level)["a"];
    ++objects;
  }
  EXPECT_EQ(objects, 256);
  EXPECT_TRUE(level->is_string());

  ResponseContext ctx;
  ctx.id = "x";
  for (const Json& body : {ChatCompletionResponse(ctx, g.result), AnthropicResponse(ctx, g.result),
                           ResponsesResponse(ctx, g.result)}) {
    EXPECT_NE(DumpJson(body).find("[[[["), std::string::npos);
  }
  for (auto* make : {&NewChatCompletionsStream, &NewAnthropicStream, &NewResponsesStream}) {
    auto enc = make(ctx);
    EXPECT_NE(testing::Encode(*enc, g).find("[[[["), std::string::npos);
  }
}

TEST(DeepJsonTest, NumbersBeyondDoubleAre400sOnEveryEndpoint) {
  const std::pair<Dialect, const char*> cases[] = {
      {Dialect::kChatCompletions,
       R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":1e999999})"},
      {Dialect::kCompletions, R"({"prompt":"hi","max_tokens":1e999999})"},
      {Dialect::kResponses, R"({"input":"hi","max_output_tokens":1e999999})"},
      {Dialect::kAnthropic,
       R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":1e999999})"},
  };
  for (const auto& [dialect, body] : cases) {
    Expected<ApiRequest> r = ReadApiRequest(dialect, body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(HttpStatusFor(r.status()), 400);
    EXPECT_EQ(r.status().message(), "invalid JSON body: number overflow parsing '1e999999'");
  }
  // In range for a double but not for the field.
  Expected<ApiRequest> big = ReadApiRequest(
      Dialect::kChatCompletions, R"({"messages":[{"content":"hi"}],"max_tokens":1e300})");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(HttpStatusFor(big.status()), 400);
  Expected<ApiRequest> neg = ReadApiRequest(
      Dialect::kChatCompletions, R"({"messages":[{"content":"hi"}],"temperature":-1e308})");
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(HttpStatusFor(neg.status()), 400);
}

}  // namespace
}  // namespace flashkv
