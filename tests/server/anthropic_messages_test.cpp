#include "server/anthropic_messages.h"

#include <gtest/gtest.h>

#include "chat/prompt_renderer.h"
#include "sse_test_util.h"

namespace flashkv {
namespace {

using testing::Encode;
using testing::Generate;
using testing::kToolCallArgs;
using testing::kToolCallText;
using testing::ParseSse;
using testing::ToolRequest;

TEST(AnthropicTest, DropsClaudeCodesPerRequestHeaderAndInlinesToolResults) {
  auto r = ParseAnthropicRequest(Json::parse(R"({
    "model": "claude-sonnet", "max_tokens": 100, "stream": true,
    "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=1; cch=abc"},
               {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
               {"type": "text", "text": "Be careful."}],
    "messages": [
      {"content": "list files", "role": "user"},
      {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "I will call ls.", "signature": "sig"},
        {"type": "text", "text": "Listing."},
        {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "/tmp"}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1",
         "content": [{"type": "text", "text": "a.txt </tool_result> b.txt"}]},
        {"type": "text", "text": "<system-reminder>keep going</system-reminder>"}]}
    ],
    "tools": [{"name": "ls", "description": "list", "input_schema": {"type": "object"},
               "cache_control": {"type": "ephemeral"}}],
    "stop_sequences": ["STOP"], "top_k": 40
  })"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->messages.size(), 4u);
  EXPECT_EQ(r->messages[0].role, ChatRole::kSystem);
  EXPECT_EQ(r->messages[0].content, "You are Claude Code.\nBe careful.");
  EXPECT_EQ(r->messages[2].reasoning, "I will call ls.");
  EXPECT_EQ(r->messages[2].content, "Listing.");
  ASSERT_EQ(r->messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(r->messages[2].tool_calls[0].id, "toolu_1");
  EXPECT_EQ(r->messages[2].tool_calls[0].arguments, R"({"path":"/tmp"})");
  EXPECT_EQ(r->messages[3].content,
            "<tool_result>a.txt &lt;/tool_result> b.txt</tool_result>"
            "<system-reminder>keep going</system-reminder>");
  ASSERT_EQ(r->tools.size(), 1u);
  EXPECT_FALSE(r->tools[0].contains("cache_control"));
  EXPECT_EQ(r->stop, std::vector<std::string>{"STOP"});
  EXPECT_EQ(r->max_tokens, 100);
  EXPECT_TRUE(r->stream);

  // The billing header changes on every request; without it two requests render the same.
  auto again = ParseAnthropicRequest(Json::parse(R"({"max_tokens": 5,
    "system": [{"type":"text","text":"x-anthropic-billing-header: cch=OTHER"},
               {"type":"text","text":"You are Claude Code."}],
    "messages": [{"role":"user","content":"hi"}]})"));
  auto first = ParseAnthropicRequest(Json::parse(R"({"max_tokens": 5,
    "system": "You are Claude Code.", "messages": [{"role":"user","content":"hi"}]})"));
  ASSERT_TRUE(again.ok() && first.ok());
  PromptOptions po;
  EXPECT_EQ(RenderPrompt(again->messages, po), RenderPrompt(first->messages, po));
}

TEST(AnthropicTest, BadRequestsAndThinkingControls) {
  EXPECT_FALSE(ParseAnthropicRequest(Json::parse(R"({"messages": []})")).ok());
  auto role =
      ParseAnthropicRequest(Json::parse(R"({"messages": [{"role":"tool","content":"x"}]})"));
  ASSERT_FALSE(role.ok());
  EXPECT_NE(role.status().message().find("messages[0].role"), std::string::npos);
  auto only_system =
      ParseAnthropicRequest(Json::parse(R"({"messages": [{"role":"system","content":"x"}]})"));
  ASSERT_FALSE(only_system.ok());
  EXPECT_EQ(only_system.status().message(), "'messages' has no user or assistant message");
  auto block = ParseAnthropicRequest(
      Json::parse(R"({"messages": [{"role":"user","content":[{"text":"x"}]}]})"));
  ASSERT_FALSE(block.ok());
  EXPECT_NE(block.status().message().find("content[0].type"), std::string::npos);
  auto off = ParseAnthropicRequest(Json::parse(
      R"({"thinking":{"type":"disabled"},"messages":[{"role":"user","content":"x"}]})"));
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->thinking, ThinkingMode::kNone);
  auto effort = ParseAnthropicRequest(Json::parse(
      R"({"output_config":{"effort":"max"},"messages":[{"role":"user","content":"x"}]})"));
  ASSERT_TRUE(effort.ok());
  EXPECT_EQ(effort->thinking, ThinkingMode::kMax);
  auto none = ParseAnthropicRequest(Json::parse(
      R"({"tools":[{"name":"a","input_schema":{}}],"tool_choice":{"type":"none"},"messages":[{"role":"user","content":"x"}]})"));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->tools.empty());
}

TEST(AnthropicTest, StreamOpensOneBlockPerKindWithToolInputDeltas) {
  auto g = Generate(ToolRequest(true, "toolu_"), "I should read it.</think>" + kToolCallText,
                    FinishReason::kToolCalls);
  ASSERT_EQ(g.result.tool_call_ids.size(), 1u);
  const std::string id = g.result.tool_call_ids[0];
  EXPECT_EQ(id.substr(0, 6), "toolu_");
  ResponseContext ctx{"msg_1", "claude", 1, false, false, {}, false};
  auto enc = NewAnthropicStream(ctx);
  auto events = ParseSse(Encode(*enc, g));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front().event, "message_start");
  EXPECT_EQ(events.front().json["message"]["usage"]["cache_read_input_tokens"], 60);
  EXPECT_EQ(events.front().json["message"]["usage"]["cache_creation_input_tokens"], 40);
  EXPECT_EQ(events.back().event, "message_stop");

  std::vector<std::string> starts;
  std::string thinking, text, input, signature;
  int open = -1;
  Json stop_delta;
  for (const auto& ev : events) {
    EXPECT_EQ(ev.event, ev.json["type"]) << ev.data;
    if (ev.event == "content_block_start") {
      EXPECT_EQ(open, -1) << "a block was still open";
      open = ev.json["index"];
      EXPECT_EQ(open, int(starts.size()));
      starts.push_back(ev.json["content_block"]["type"]);
      if (starts.back() == "tool_use") {
        EXPECT_EQ(ev.json["content_block"]["id"], id);
        EXPECT_EQ(ev.json["content_block"]["name"], "read_file");
      }
    } else if (ev.event == "content_block_delta") {
      EXPECT_EQ(ev.json["index"], open);
      const Json& d = ev.json["delta"];
      if (d["type"] == "thinking_delta") thinking += d["thinking"].get<std::string>();
      if (d["type"] == "text_delta") text += d["text"].get<std::string>();
      if (d["type"] == "input_json_delta") input += d["partial_json"].get<std::string>();
      if (d["type"] == "signature_delta") signature = d["signature"];
    } else if (ev.event == "content_block_stop") {
      EXPECT_EQ(ev.json["index"], open);
      open = -1;
    } else if (ev.event == "message_delta") {
      stop_delta = ev.json;
    }
  }
  EXPECT_EQ(starts, (std::vector<std::string>{"thinking", "text", "tool_use"}));
  EXPECT_EQ(thinking, "I should read it.");
  EXPECT_EQ(signature, "msg_1");
  EXPECT_EQ(text, "Let me look.");
  EXPECT_EQ(input, kToolCallArgs);
  EXPECT_EQ(stop_delta["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(stop_delta["usage"]["output_tokens"], 20);

  Json body = AnthropicResponse(ctx, g.result);
  ASSERT_EQ(body["content"].size(), 3u);
  EXPECT_EQ(body["content"][0]["type"], "thinking");
  EXPECT_EQ(body["content"][2]["input"], Json::parse(kToolCallArgs));
  EXPECT_EQ(body["stop_reason"], "tool_use");
  EXPECT_EQ(body["usage"]["input_tokens"], 0);
}

// A reply that stopped inside its thinking has no (empty) text block: clients replay it.
TEST(AnthropicTest, OnlyThinkingGetsNoTextBlockAndStopSequencesAreReported) {
  GenerationRequest req;
  req.thinking = true;
  req.stop = {"zz"};
  auto g = Generate(req, "pondering aa zz more", FinishReason::kStop);
  EXPECT_EQ(g.result.stop_sequence, "zz");
  ResponseContext ctx{"msg_2", "m", 1, false, false, {}, false};
  auto enc = NewAnthropicStream(ctx);
  std::vector<std::string> starts;
  for (const auto& ev : ParseSse(Encode(*enc, g))) {
    if (ev.event == "content_block_start") starts.push_back(ev.json["content_block"]["type"]);
    if (ev.event == "message_delta") {
      EXPECT_EQ(ev.json["delta"]["stop_reason"], "stop_sequence");
      EXPECT_EQ(ev.json["delta"]["stop_sequence"], "zz");
    }
  }
  EXPECT_EQ(starts, (std::vector<std::string>{"thinking"}));
  Json body = AnthropicResponse(ctx, g.result);
  ASSERT_EQ(body["content"].size(), 1u);
  EXPECT_EQ(body["content"][0]["thinking"], "pondering aa ");
}

TEST(AnthropicTest, ToolResultsNeedTheirToolUseAndOnlyMessagesSamplingKeysCount) {
  auto orphan = ParseAnthropicRequest(Json::parse(R"({"max_tokens": 5, "messages": [
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_gone",
                                    "content": "x"}]}]})"));
  ASSERT_FALSE(orphan.ok());
  EXPECT_EQ(orphan.status().message(),
            "Anthropic continuation state is not available for tool_use_id toolu_gone; retry by "
            "replaying the full messages history");

  auto r = ParseAnthropicRequest(Json::parse(R"({"max_tokens": 5, "thinking": {"type": "disabled"},
      "temperature": 0.25, "top_k": 3, "min_p": 0.5, "seed": 9,
      "messages": [{"role": "user", "content": "hi"}]})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FLOAT_EQ(r->sampling.temperature, 0.25f);
  EXPECT_EQ(r->sampling.top_k, 3);
  EXPECT_FLOAT_EQ(r->sampling.min_p, 0.05f);
  EXPECT_FALSE(r->seeded);
}

}  // namespace
}  // namespace flashkv
