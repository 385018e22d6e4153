// Structured-output request fields (issue 32): each API's JSON format becomes a grammar
// on the request, turns thinking off (the constraint holds from the first token, so the
// client's sampling knobs apply) and tells the model the schema in the system prompt.
#include <gtest/gtest.h>

#include "constrain/json_matcher.h"
#include "server/request_reader.h"

namespace flashkv {
namespace {

TEST(StructuredOutputRequestTest, EachApisFormatConstrainsTheAnswer) {
  const std::pair<Dialect, const char*> bodies[] = {
      {Dialect::kChatCompletions,
       R"({"model":"deepseek-reasoner","messages":[{"role":"system","content":"Be brief."},{"content":"x"}],
           "temperature":0.2,"response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,
           "schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}}}})"},
      {Dialect::kResponses,
       R"({"input":"x","temperature":0.2,"text":{"format":{"type":"json_schema","name":"p","strict":true,
           "schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}}}})"},
      {Dialect::kAnthropic,
       R"({"max_tokens":9,"messages":[{"role":"user","content":"x"}],"temperature":0.2,"thinking":{"type":"enabled","budget_tokens":100},
           "output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}}}})"},
  };
  for (const auto& [dialect, body] : bodies) {
    auto r = ReadApiRequest(dialect, body);
    ASSERT_TRUE(r.ok()) << body << "\n" << r.status().ToString();
    EXPECT_TRUE(r->constraint) << body;
    EXPECT_EQ(r->thinking, ThinkingMode::kNone) << body;
    EXPECT_FLOAT_EQ(r->sampling.temperature, 0.2f) << body;
    ASSERT_FALSE(r->messages.empty());
    EXPECT_EQ(r->messages.front().role, ChatRole::kSystem);
    EXPECT_NE(r->messages.front().content.find(R"("required":["a"])"), std::string::npos)
        << r->messages.front().content;
  }
  auto chat =
      ReadApiRequest(Dialect::kChatCompletions,
                     R"({"messages":[{"role":"system","content":"Be brief."},{"content":"x"}],
                                 "response_format":{"type":"json_object"}})");
  ASSERT_TRUE(chat.ok());
  EXPECT_TRUE(chat->constraint);
  EXPECT_EQ(chat->messages.size(), 2u);  // appended to the client's system message
  EXPECT_EQ(chat->messages[0].content.rfind("Be brief.", 0), 0u);
  auto text = ReadApiRequest(Dialect::kChatCompletions,
                             R"({"messages":[{"content":"x"}],"response_format":{"type":"text"}})");
  ASSERT_TRUE(text.ok());
  EXPECT_FALSE(text->constraint);
  EXPECT_EQ(text->messages.size(), 1u);
}

bool Opens(const ApiRequest& r, const std::string& text) {
  JsonMatcher m(r.constraint);
  for (char c : text) {
    if (!m.Feed(uint8_t(c))) return false;
  }
  return m.done();
}

std::string Opening(const std::string& name) {
  return "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"" + name + "\">\n";
}

// tool_choice "required" / a named tool: the reply must open a DSML call of an allowed
// tool (the model writes the arguments), without thinking.
TEST(StructuredOutputRequestTest, ForcedToolCallsConstrainTheOpening) {
  const std::string tools =
      R"("tools":[{"type":"function","function":{"name":"ls","parameters":{}}},)"
      R"({"type":"function","function":{"name":"cat","parameters":{}}}])";
  auto any = ReadApiRequest(
      Dialect::kChatCompletions,
      R"({"model":"m","messages":[{"content":"x"}],"tool_choice":"required",)" + tools + "}");
  ASSERT_TRUE(any.ok()) << any.status().ToString();
  EXPECT_TRUE(any->constraint_prefix);
  EXPECT_EQ(any->thinking, ThinkingMode::kNone);
  EXPECT_TRUE(Opens(*any, Opening("ls")));
  EXPECT_TRUE(Opens(*any, Opening("cat")));
  EXPECT_FALSE(Opens(*any, Opening("rm")));
  EXPECT_FALSE(Opens(*any, "Sure, " + Opening("ls")));

  auto named = ReadApiRequest(
      Dialect::kChatCompletions,
      R"({"messages":[{"content":"x"}],"tool_choice":{"type":"function","function":{"name":"cat"}},)" +
          tools + "}");
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_TRUE(Opens(*named, Opening("cat")));
  EXPECT_FALSE(Opens(*named, Opening("ls")));

  auto anthropic = ReadApiRequest(
      Dialect::kAnthropic,
      R"({"max_tokens":9,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"Read","input_schema":{}}],"tool_choice":{"type":"any"}})");
  ASSERT_TRUE(anthropic.ok()) << anthropic.status().ToString();
  EXPECT_TRUE(Opens(*anthropic, Opening("Read")));
  auto responses = ReadApiRequest(
      Dialect::kResponses,
      R"({"input":"x","tools":[{"type":"function","name":"shell","parameters":{}}],"tool_choice":{"type":"function","name":"shell"}})");
  ASSERT_TRUE(responses.ok()) << responses.status().ToString();
  EXPECT_TRUE(Opens(*responses, Opening("shell")));
}

}  // namespace
}  // namespace flashkv
