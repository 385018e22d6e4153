#include "server/openai_responses.h"

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

TEST(ResponsesTest, InputItemsBecomeTurns) {
  auto r = ParseResponsesRequest(Json::parse(R"({
    "model": "gpt-5-codex", "instructions": "You are Codex.",
    "input": [
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]},
      {"type": "reasoning", "summary": [{"type": "summary_text", "text": "look first"}]},
      {"type": "function_call", "call_id": "call_a", "name": "shell", "arguments": "{\"cmd\":\"ls\"}"},
      {"type": "function_call", "call_id": "call_b", "name": "shell", "arguments": "{\"cmd\":\"pwd\"}", "status": "completed"},
      {"type": "function_call_output", "call_id": "call_a", "output": "a.c"},
      {"type": "function_call_output", "call_id": "call_b", "output": [{"type": "input_text", "text": "/src"}]},
      {"role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}
    ],
    "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
    "tool_choice": "auto", "max_output_tokens": 50, "reasoning": {"effort": "low", "summary": "auto"},
    "store": false, "include": ["reasoning.encrypted_content"], "prompt_cache_key": "k"
  })"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->messages.size(), 6u);
  EXPECT_EQ(r->messages[0].role, ChatRole::kSystem);
  EXPECT_EQ(r->messages[0].content, "You are Codex.");
  EXPECT_EQ(r->messages[1].content, "fix it");
  // Adjacent calls share one assistant turn, which also gets the reasoning before them.
  EXPECT_EQ(r->messages[2].role, ChatRole::kAssistant);
  ASSERT_EQ(r->messages[2].tool_calls.size(), 2u);
  EXPECT_EQ(r->messages[2].tool_calls[1].id, "call_b");
  EXPECT_EQ(r->messages[2].reasoning, "look first");
  EXPECT_EQ(r->messages[3].role, ChatRole::kTool);
  EXPECT_EQ(r->messages[4].content, "/src");
  EXPECT_EQ(r->messages[5].content, "Done.");
  EXPECT_EQ(r->tools[0]["name"], "shell");
  EXPECT_EQ(r->max_tokens, 50);
  EXPECT_TRUE(r->reasoning_summary);
  EXPECT_EQ(r->thinking, ThinkingMode::kHigh);
}

TEST(ResponsesTest, UnsupportedRequestsAreRefusedClearly) {
  struct Case {
    const char* body;
    const char* says;
  };
  const Case cases[] = {
      {R"({"input": "x", "previous_response_id": "resp_1"})",
       "previous_response_id is not supported; replay full input instead"},
      {R"({"input": "x", "conversation": {"id": "c"}})",
       "conversation is not supported; replay full input instead"},
      {R"({"input": "x", "tool_choice": "required"})",
       "'tool_choice' forces a tool call but 'tools' is empty"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "b"}], "tool_choice": {"type": "function", "name": "a"}})",
       "'tool_choice.name' names \"a\", which is not in 'tools'"},
      {R"({"input": "x", "tool_choice": {"type": "mcp", "server_label": "s"}})",
       "'tool_choice' {\"type\":\"mcp\"} is not supported"},
      {R"({"input": [{"type": "message", "role": "user", "content": [{"type": "input_image"}]}]})",
       "part type \"input_image\" is not supported"},
      {R"({"input": [{"type": "function_call", "name": "a", "status": "in_progress"}]})",
       "'input[0].status' \"in_progress\" is not supported (only completed or incomplete items)"},
      {R"({"input": [{"type": "item_reference", "id": "x"}]})",
       "\"item_reference\" is not supported"},
      {R"({})", "'input' is required"},
      {R"({"input": []})", "'input' must be a string or a non-empty array"},
  };
  for (const Case& c : cases) {
    auto r = ParseResponsesRequest(Json::parse(c.body));
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().message();
  }
}

TEST(ResponsesTest, StreamEventsAreOrderedNumberedAndEndWithTheWholeResponse) {
  GenerationRequest req = ToolRequest(true, "call_");
  auto g = Generate(req, "Check the file.</think>" + kToolCallText, FinishReason::kToolCalls);
  ResponseContext ctx{"resp_1", "codex", 5, false, /*reasoning_summary=*/true, {}, false};
  auto enc = NewResponsesStream(ctx);
  auto events = ParseSse(Encode(*enc, g));
  ASSERT_FALSE(events.empty());
  std::vector<std::string> types;
  int64_t seq = 0;
  std::string text_deltas, reasoning_deltas, fc_arguments, fc_call_id;
  for (const auto& ev : events) {
    EXPECT_EQ(ev.event, ev.json["type"]);
    EXPECT_EQ(ev.json["sequence_number"], seq++);
    types.push_back(ev.event);
    if (ev.event == "response.output_text.delta")
      text_deltas += ev.json["delta"].get<std::string>();
    if (ev.event == "response.reasoning_summary_text.delta")
      reasoning_deltas += ev.json["delta"].get<std::string>();
    if (ev.event == "response.output_item.done" && ev.json["item"]["type"] == "function_call") {
      fc_arguments = ev.json["item"]["arguments"];
      fc_call_id = ev.json["item"]["call_id"];
    }
  }
  EXPECT_EQ(types.front(), "response.created");
  EXPECT_EQ(types.back(), "response.completed");
  EXPECT_EQ(reasoning_deltas, "Check the file.");
  EXPECT_EQ(text_deltas, "Let me look.");
  EXPECT_EQ(fc_arguments, kToolCallArgs);
  EXPECT_EQ(fc_call_id, g.result.tool_call_ids[0]);
  const Json& done = events.back().json["response"];
  EXPECT_EQ(done["status"], "completed");
  ASSERT_EQ(done["output"].size(), 3u);
  EXPECT_EQ(done["output"][0]["type"], "reasoning");
  EXPECT_EQ(done["output"][1]["content"][0]["text"], "Let me look.");
  EXPECT_EQ(done["output"][2]["name"], "read_file");
  EXPECT_EQ(done["usage"]["input_tokens_details"]["cached_tokens"], 60);
  // Item ids agree between the stream and the final object.
  for (const auto& ev : events) {
    if (ev.event == "response.output_item.done") {
      EXPECT_EQ(ev.json["item"]["id"], done["output"][ev.json["output_index"].get<int>()]["id"]);
    }
  }
}

// Stopped inside its thinking: no reasoning item unless asked for, and no empty message
// item (Codex would replay it).
TEST(ResponsesTest, LengthEndsIncompleteWithoutReasoningItemsUnlessAsked) {
  GenerationRequest req;
  req.thinking = true;
  auto g = Generate(req, "thinking only", FinishReason::kLength);
  ResponseContext ctx{"resp_2", "codex", 5, false, false, {}, false};
  Json body = ResponsesResponse(ctx, g.result);
  EXPECT_EQ(body["status"], "incomplete");
  EXPECT_EQ(body["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(body["output"], Json::array());
  auto enc = NewResponsesStream(ctx);
  auto events = ParseSse(Encode(*enc, g));
  EXPECT_EQ(events.back().event, "response.incomplete");
  EXPECT_EQ(events.back().json["response"]["output"], Json::array());
  for (const auto& ev : events) {
    EXPECT_EQ(ev.event.find("reasoning"), std::string::npos);
    EXPECT_EQ(ev.event.find("output_item"), std::string::npos);
  }
}

}  // namespace
}  // namespace flashkv
