#include "server/openai_chat.h"

#include <gtest/gtest.h>

#include "sse_test_util.h"

namespace flashkv {
namespace {

using testing::Encode;
using testing::Generate;
using testing::kToolCallArgs;
using testing::kToolCallText;
using testing::ParseSse;
using testing::ToolRequest;

Json Body(const char* text) {
  return Json::parse(text);
}

TEST(OpenAiChatTest, ParsesMessagesToolsAndControls) {
  auto r = ParseChatCompletionsRequest(Body(R"({
    "model": "deepseek-v4-flash",
    "messages": [
      {"role": "developer", "content": "Be brief."},
      {"content": [{"type": "text", "text": "Hi "}, "there"]},
      {"role": "assistant", "content": null, "reasoning_content": "think",
       "tool_calls": [{"id": "call_1", "type": "function",
                       "function": {"name": "ls", "arguments": {"path": "/"}}},
                      {"id": "call_2", "function": {"name": "no_args"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "a b c"}
    ],
    "tools": [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}],
    "max_completion_tokens": 64, "temperature": 0.5, "top_k": 5000, "seed": 7,
    "stop": ["END", ""], "stream": true, "stream_options": {"include_usage": true},
    "thinking": {"type": "disabled"}
  })"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->messages.size(), 4u);
  EXPECT_EQ(r->messages[0].role, ChatRole::kSystem);
  EXPECT_EQ(r->messages[1].role, ChatRole::kUser);  // role missing: user
  EXPECT_EQ(r->messages[1].content, "Hi there");
  EXPECT_EQ(r->messages[2].reasoning, "think");
  ASSERT_EQ(r->messages[2].tool_calls.size(), 1u);  // the call without arguments is dropped
  EXPECT_EQ(r->messages[2].tool_calls[0].arguments, R"({"path":"/"})");
  EXPECT_EQ(r->messages[3].role, ChatRole::kTool);
  EXPECT_EQ(r->messages[3].tool_call_id, "call_1");
  ASSERT_EQ(r->tools.size(), 1u);
  EXPECT_EQ(r->tools[0]["name"], "ls");  // unwrapped to the function object
  EXPECT_EQ(r->max_tokens, 64);
  EXPECT_EQ(r->thinking, ThinkingMode::kNone);
  EXPECT_FLOAT_EQ(r->sampling.temperature, 0.5f);
  EXPECT_EQ(r->sampling.top_k, 1024);  // capped
  EXPECT_EQ(r->sampling.seed, 7u);
  EXPECT_TRUE(r->seeded);
  EXPECT_EQ(r->stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
}

TEST(OpenAiChatTest, ThinkingDefaultsOnAndIgnoresSamplingKnobs) {
  auto r = ParseChatCompletionsRequest(Body(
      R"({"model":"deepseek-v4-flash","messages":[{"role":"user","content":"x"}],"temperature":0.3,"top_p":0.1})"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->thinking, ThinkingMode::kHigh);
  EXPECT_FLOAT_EQ(r->sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r->sampling.top_p, 1.0f);
  EXPECT_FLOAT_EQ(r->sampling.min_p, 0.05f);
  EXPECT_FALSE(r->seeded);
  auto alias = ParseChatCompletionsRequest(
      Body(R"({"model":"deepseek-chat","messages":[{"content":"x"}]})"));
  ASSERT_TRUE(alias.ok());
  EXPECT_EQ(alias->thinking, ThinkingMode::kNone);
  auto effort = ParseChatCompletionsRequest(
      Body(R"({"model":"deepseek-chat","reasoning_effort":"max","messages":[{"content":"x"}]})"));
  ASSERT_TRUE(effort.ok());
  EXPECT_EQ(effort->thinking, ThinkingMode::kMax);
  auto none = ParseChatCompletionsRequest(
      Body(R"({"model":"m","reasoning_effort":"none","messages":[{"content":"x"}]})"));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->thinking, ThinkingMode::kNone);
}

// The quick start's curl names no model: DeepSeek's default model, deepseek-chat, does not
// think, so the answer is in `content` (issue 32); a thinking control still turns it on.
TEST(OpenAiChatTest, NoModelMeansNoThinking) {
  auto bare = ParseChatCompletionsRequest(
      Body(R"({"messages":[{"role":"user","content":"Hello! Who are you?"}],"max_tokens":32})"));
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->thinking, ThinkingMode::kNone);
  auto completion = ParseCompletionsRequest(Body(R"({"prompt":"x"})"));
  ASSERT_TRUE(completion.ok());
  EXPECT_EQ(completion->thinking, ThinkingMode::kNone);
  auto asked = ParseChatCompletionsRequest(
      Body(R"({"thinking":{"type":"enabled"},"messages":[{"content":"x"}]})"));
  ASSERT_TRUE(asked.ok());
  EXPECT_EQ(asked->thinking, ThinkingMode::kHigh);
  auto effort = ParseChatCompletionsRequest(
      Body(R"({"reasoning_effort":"high","messages":[{"content":"x"}]})"));
  ASSERT_TRUE(effort.ok());
  EXPECT_EQ(effort->thinking, ThinkingMode::kHigh);
  auto reasoner = ParseChatCompletionsRequest(
      Body(R"({"model":"deepseek-reasoner","messages":[{"content":"x"}]})"));
  ASSERT_TRUE(reasoner.ok());
  EXPECT_EQ(reasoner->thinking, ThinkingMode::kHigh);
}

// Two temperature-0 runs in thinking mode gave different text (issue 32): thinking mode
// ignores the sampling knobs, but temperature 0 asks for the argmax and gets it.
TEST(OpenAiChatTest, TemperatureZeroIsGreedyInThinkingMode) {
  for (const char* body :
       {R"({"model":"m","messages":[{"content":"x"}],"temperature":0,"top_p":0.5})",
        R"({"model":"deepseek-reasoner","messages":[{"content":"x"}],"temperature":0})"}) {
    auto r = ParseChatCompletionsRequest(Body(body));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->thinking, ThinkingMode::kHigh);
    EXPECT_EQ(r->sampling.temperature, 0.0f) << body;
    EXPECT_FLOAT_EQ(r->sampling.top_p, 1.0f) << body;  // the other knobs stay ignored
  }
}

TEST(OpenAiChatTest, BadRequestsNameTheField) {
  struct Case {
    const char* body;
    const char* says;
  };
  const Case cases[] = {
      {R"({})", "'messages' must be a non-empty array"},
      {R"({"messages": []})", "'messages' must be a non-empty array"},
      {R"({"messages": "hi"})", "'messages' must be a non-empty array"},
      {R"({"messages": [{"role": "system", "content": "x"}]})", "no user, assistant or tool"},
      {R"({"messages": [42]})", "'messages[0]' must be an object"},
      {R"({"messages": [{"role": "wizard", "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"content": 5}]})", "'messages[0].content' must be a string"},
      {R"({"messages": [{"content": "x"}], "max_tokens": "10"})", "'max_tokens' must be a number"},
      {R"({"messages": [{"content": "x"}], "max_tokens": 0})", "'max_tokens' must be between 1"},
      {R"({"messages": [{"content": "x"}], "max_tokens": 1.5})", "'max_tokens' must be an integer"},
      {R"({"messages": [{"content": "x"}], "temperature": 3})",
       "'temperature' must be between 0 and 2"},
      {R"({"messages": [{"content": "x"}], "stop": [1]})", "'stop' entries must be strings"},
      {R"({"messages": [{"content": "x"}], "stream": "yes"})", "'stream' must be a boolean"},
      {R"({"messages": [{"content": "x"}], "reasoning_effort": "huge"})",
       "reasoning effort must be"},
      {R"({"messages": [{"content": "x"}], "tools": {}})", "'tools' must be an array"},
      {R"({"messages": [{"content": "x"}], "thinking": "on"})",
       "'thinking' must be a boolean or an object"},
  };
  for (const Case& c : cases) {
    auto r = ParseChatCompletionsRequest(Body(c.body));
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().message();
  }
}

TEST(OpenAiChatTest, ToolChoiceNoneTurnsToolsOff) {
  auto r = ParseChatCompletionsRequest(Body(
      R"({"messages":[{"content":"x"}],"tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":"none"})"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->tools.empty());
}

TEST(OpenAiChatTest, CompletionsTakeTheFirstPrompt) {
  auto r = ParseCompletionsRequest(Body(R"({"prompt":["first","second"],"max_tokens":3})"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->prompt, "first");
  EXPECT_FALSE(ParseCompletionsRequest(Body(R"({"prompt":7})")).ok());
  EXPECT_FALSE(ParseCompletionsRequest(Body(R"({})")).ok());
}

// The tool-call path end to end: exact DSML text through the real parser, ids, the chunk
// stream and the final body.
TEST(OpenAiChatTest, ToolCallsStreamAsRecognisedAndMatchTheBody) {
  auto g = Generate(ToolRequest(false, "call_"), kToolCallText, FinishReason::kToolCalls);
  ASSERT_EQ(g.result.parsed.tool_calls.size(), 1u);
  ASSERT_EQ(g.result.tool_call_ids.size(), 1u);
  const std::string id = g.result.tool_call_ids[0];
  EXPECT_EQ(id.substr(0, 5), "call_");
  ResponseContext ctx{"chatcmpl-x", "m", 1, /*include_usage=*/true, false, {}, false};
  auto enc = NewChatCompletionsStream(ctx);
  auto events = ParseSse(Encode(*enc, g));
  ASSERT_GE(events.size(), 5u);
  EXPECT_EQ(events.back().data, "[DONE]");
  EXPECT_EQ(events[0].json["choices"][0]["delta"]["role"], "assistant");
  std::string content, args, name, streamed_id;
  std::string finish;
  Json usage;
  for (const auto& ev : events) {
    if (ev.json.is_null()) continue;
    EXPECT_EQ(ev.json["object"], "chat.completion.chunk");
    EXPECT_EQ(ev.json["id"], "chatcmpl-x");
    if (ev.json.contains("usage")) usage = ev.json["usage"];
    if (ev.json["choices"].empty()) continue;
    const Json& c = ev.json["choices"][0];
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
    const Json& d = c["delta"];
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (d.contains("tool_calls")) {
      const Json& tc = d["tool_calls"][0];
      EXPECT_EQ(tc["index"], 0);
      if (tc.contains("id")) {
        streamed_id = tc["id"];
        name = tc["function"]["name"];
        EXPECT_EQ(tc["type"], "function");
      }
      args += tc["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(content, "Let me look.");
  EXPECT_EQ(name, "read_file");
  EXPECT_EQ(streamed_id, id);
  EXPECT_EQ(args, kToolCallArgs);
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(usage["prompt_tokens"], 100);
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 60);
  EXPECT_EQ(usage["completion_tokens"], 20);
  EXPECT_EQ(usage["total_tokens"], 120);

  Json body = ChatCompletionResponse(ctx, g.result);
  const Json& msg = body["choices"][0]["message"];
  EXPECT_EQ(msg["content"], "Let me look.");
  EXPECT_EQ(msg["tool_calls"][0]["id"], id);
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], kToolCallArgs);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(body["object"], "chat.completion");
}

TEST(OpenAiChatTest, ReasoningStreamsInItsOwnFieldAndUsageOnlyWhenAsked) {
  GenerationRequest req;
  req.thinking = true;
  auto g = Generate(req, "hmm, two plus two</think>Four.", FinishReason::kStop);
  ResponseContext ctx{"chatcmpl-y", "m", 1, /*include_usage=*/false, false, {}, false};
  auto enc = NewChatCompletionsStream(ctx);
  std::string reasoning, content;
  for (const auto& ev : ParseSse(Encode(*enc, g))) {
    if (ev.json.is_null()) continue;
    EXPECT_FALSE(ev.json.contains("usage"));
    const Json& d = ev.json["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content")) content += d["content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "hmm, two plus two");
  EXPECT_EQ(content, "Four.");
  Json body = ChatCompletionResponse(ctx, g.result);
  EXPECT_EQ(body["choices"][0]["message"]["reasoning_content"], "hmm, two plus two");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
}

TEST(OpenAiChatTest, CompletionStreamsRawText) {
  GenerationRequest req;
  req.output = OutputMode::kRaw;
  auto g = Generate(req, "raw </think> text", FinishReason::kLength);
  ResponseContext ctx{"cmpl-z", "m", 1, true, false, {}, false};
  auto enc = NewCompletionsStream(ctx);
  std::string text;
  std::string finish;
  for (const auto& ev : ParseSse(Encode(*enc, g))) {
    if (ev.json.is_null() || ev.json["choices"].empty()) continue;
    text += ev.json["choices"][0]["text"].get<std::string>();
    if (!ev.json["choices"][0]["finish_reason"].is_null())
      finish = ev.json["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, "raw </think> text");
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(CompletionResponse(ctx, g.result)["choices"][0]["text"], "raw </think> text");
}

}  // namespace
}  // namespace flashkv
