// Responses hosted tool items, namespace tool groups and tool_search (docs/SERVER.md §5.4, §5.6).
#include <algorithm>

#include <gtest/gtest.h>

#include "chat/prompt_renderer.h"
#include "server/openai_responses.h"
#include "server/openai_responses_tools.h"
#include "sse_test_util.h"

namespace flashkv {
namespace {

using testing::Encode;
using testing::Generate;
using testing::ParseSse;
using testing::ToolRequest;

const char* kNamespaceTools = R"([
  {"type": "function", "name": "shell", "parameters": {"type": "object"}},
  {"type": "namespace", "name": "mcp__fs__", "description": "Files",
   "tools": [{"type": "function", "name": "read", "description": "Read a file",
              "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
             {"name": "stat"}]},
  {"type": "tool_search", "description": "Find tools"}
])";

TEST(ResponsesToolsTest, NamespacesFlattenAndToolSearchGetsAFunctionSchema) {
  ResponsesTools t;
  ASSERT_TRUE(ParseResponsesTools(Json::parse(kNamespaceTools), "tools", &t).ok());
  ASSERT_EQ(t.schemas.size(), 4u);
  EXPECT_EQ(DumpJson(t.schemas[0]), R"({"name":"shell","parameters":{"type":"object"}})");
  EXPECT_EQ(
      DumpJson(t.schemas[1]),
      R"({"name":"mcp__fs__read","description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}})");
  EXPECT_EQ(
      DumpJson(t.schemas[2]),
      R"({"name":"mcp__fs__stat","description":"","parameters":{"type":"object","properties":{}}})");
  EXPECT_EQ(
      DumpJson(t.schemas[3]),
      R"({"name":"tool_search","description":"Find tools","parameters":{"type":"object","properties":{}}})");
  ASSERT_EQ(t.names.size(), 3u);
  const ToolWireName* read = FindToolWireName(t.names, "mcp__fs__read");
  ASSERT_NE(read, nullptr);
  EXPECT_EQ(read->name, "read");
  EXPECT_EQ(read->name_space, "mcp__fs__");
  EXPECT_FALSE(read->tool_search);
  ASSERT_NE(FindToolWireName(t.names, "tool_search"), nullptr);
  EXPECT_TRUE(FindToolWireName(t.names, "tool_search")->tool_search);
  EXPECT_EQ(FindToolWireName(t.names, "shell"), nullptr);

  for (const char* bad :
       {R"([{"type": "namespace", "tools": []}])",
        R"([{"type": "namespace", "name": "n", "tools": [{"type": "web_search"}]}])",
        R"([{"type": "namespace", "name": "n"}])", R"({"type": "function"})"}) {
    ResponsesTools b;
    EXPECT_FALSE(ParseResponsesTools(Json::parse(bad), "tools", &b).ok()) << bad;
  }
}

TEST(ResponsesToolsTest, HostedItemsBecomeCallsAndResultsAndToolSearchLoadsTools) {
  auto r = ParseResponsesRequest(Json::parse(R"({
    "input": [
      {"role": "user", "content": "look around"},
      {"type": "local_shell_call", "id": "ls_1", "call_id": "call_sh", "status": "completed",
       "action": {"type": "exec", "command": ["ls", "-l"]}},
      {"type": "local_shell_call_output", "call_id": "call_sh", "output": "a.c"},
      {"type": "web_search_call", "id": "ws_1", "status": "completed",
       "action": {"type": "search", "query": "ds4"}},
      {"type": "web_search_call_output", "id": "ws_1", "result": {"hits": 2}},
      {"type": "image_generation_call", "id": "ig_1", "result": "b64"},
      {"type": "image_generation_call_output", "call_id": "ig_1", "output": [{"type": "input_text", "text": "saved"}]},
      {"type": "tool_search_call", "call_id": "call_ts", "execution": "client",
       "arguments": {"query": "files"}},
      {"type": "tool_search_output", "call_id": "call_ts", "execution": "client",
       "tools": [{"type": "namespace", "name": "mcp__fs__",
                  "tools": [{"type": "function", "name": "read", "parameters": {"type": "object"}}]}]},
      {"type": "compaction", "encrypted_content": "opaque"},
      {"type": "function_call", "call_id": "call_rd", "name": "read", "namespace": "mcp__fs__",
       "arguments": "{\"path\":\"a.c\"}"},
      {"type": "function_call_output", "call_id": "call_rd", "output": "int main;"}
    ],
    "tools": [{"type": "tool_search"}]
  })"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& m = r->messages;
  ASSERT_EQ(m.size(), 11u);
  EXPECT_EQ(m[1].role, ChatRole::kAssistant);
  ASSERT_EQ(m[1].tool_calls.size(), 1u);
  EXPECT_EQ(m[1].tool_calls[0].name, "local_shell");
  EXPECT_EQ(m[1].tool_calls[0].id, "call_sh");
  EXPECT_EQ(m[1].tool_calls[0].arguments, R"({"type":"exec","command":["ls","-l"]})");
  EXPECT_EQ(m[2].role, ChatRole::kTool);
  EXPECT_EQ(m[2].content, "a.c");
  EXPECT_EQ(m[2].tool_call_id, "call_sh");
  EXPECT_EQ(m[3].tool_calls[0].name, "web_search_call");
  EXPECT_EQ(m[3].tool_calls[0].id, "ws_1");  // no call_id: the item id
  EXPECT_EQ(m[4].content, R"({"hits":2})");
  EXPECT_EQ(m[5].tool_calls[0].name, "image_generation_call");
  EXPECT_EQ(m[5].tool_calls[0].arguments, "{}");
  EXPECT_EQ(m[6].content, "saved");
  EXPECT_EQ(m[7].tool_calls[0].name, "tool_search");
  EXPECT_EQ(m[7].tool_calls[0].arguments, R"({"query":"files"})");
  EXPECT_EQ(
      m[8].content,
      R"([{"type":"namespace","name":"mcp__fs__","tools":[{"type":"function","name":"read","parameters":{"type":"object"}}]}])");
  // The compaction item left nothing behind; the namespaced call is flattened.
  EXPECT_EQ(m[9].tool_calls[0].name, "mcp__fs__read");
  EXPECT_EQ(m[10].content, "int main;");
  // The request's tool_search first, then what the search loaded.
  ASSERT_EQ(r->tools.size(), 2u);
  EXPECT_EQ(r->tools[0]["name"], "tool_search");
  EXPECT_EQ(r->tools[1]["name"], "mcp__fs__read");
  ASSERT_EQ(r->tool_names.size(), 2u);
  EXPECT_EQ(r->tool_names[1].name, "read");

  // The flattened call renders like any other call.
  PromptOptions po;
  po.tools = r->tools;
  const std::string prompt = RenderPrompt(r->messages, po);
  EXPECT_NE(prompt.find("<｜DSML｜invoke name=\"mcp__fs__read\">"), std::string::npos);
  EXPECT_NE(prompt.find("<｜DSML｜invoke name=\"local_shell\">"), std::string::npos);
  EXPECT_NE(
      prompt.find(
          R"({"name": "mcp__fs__read", "description": "", "parameters": {"type": "object"}})"),
      std::string::npos);
}

TEST(ResponsesToolsTest, ToolChoiceNoneAlsoDropsLoadedTools) {
  auto r = ParseResponsesRequest(Json::parse(R"({"tool_choice": "none", "input": [
      {"role": "user", "content": "x"},
      {"type": "tool_search_call", "call_id": "c", "arguments": {}},
      {"type": "tool_search_output", "call_id": "c", "tools": [{"type": "function", "name": "f"}]}]})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->tools.empty());
}

TEST(ResponsesToolsTest, RefusesOutputsWithoutTheirCallsAndUnfinishedHostedItems) {
  struct Case {
    const char* body;
    const char* says;
  };
  const Case cases[] = {
      {R"({"input": [{"role": "user", "content": "x"},
          {"type": "function_call_output", "call_id": "call_gone", "output": "y"}]})",
       "Responses continuation state is not available for call_id call_gone; retry by "
       "replaying the full input history"},
      {R"({"input": [{"type": "web_search_call", "id": "w", "status": "in_progress"}]})",
       "'input[0].status' \"in_progress\" is not supported"},
      {R"({"input": [{"type": "file_search_call", "id": "f"}]})",
       "'input[0].type' \"file_search_call\" is not supported"},
      {R"({"input": [{"type": "tool_search_output", "call_id": "c", "tools": {"a": 1}}]})",
       "'input[0].tools' must be an array"},
  };
  for (const Case& c : cases) {
    auto r = ParseResponsesRequest(Json::parse(c.body));
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().message();
  }
}

// The model calls the flat names; the client gets its names, namespace and item types back.
TEST(ResponsesToolsTest, OutputItemsRestoreNamespaceAndToolSearchShape) {
  const std::string text =
      "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"mcp__fs__read\">\n"
      "<｜DSML｜parameter name=\"path\" string=\"true\">a.c</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n<｜DSML｜invoke name=\"tool_search\">\n"
      "<｜DSML｜parameter name=\"query\" string=\"true\">git</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n<｜DSML｜invoke name=\"shell\">\n"
      "<｜DSML｜parameter name=\"cmd\" string=\"true\">ls</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  auto g = Generate(ToolRequest(false, "call_"), text, FinishReason::kToolCalls);
  ASSERT_EQ(g.result.parsed.tool_calls.size(), 3u);
  ResponsesTools t;
  ASSERT_TRUE(ParseResponsesTools(Json::parse(kNamespaceTools), "tools", &t).ok());
  ResponseContext ctx{"resp_9", "codex", 5, false, false, t.names, false};

  const Json body = ResponsesResponse(ctx, g.result);
  ASSERT_EQ(body["output"].size(), 3u);
  const Json& read = body["output"][0];
  EXPECT_EQ(read["type"], "function_call");
  EXPECT_EQ(read["name"], "read");
  EXPECT_EQ(read["namespace"], "mcp__fs__");
  EXPECT_EQ(read["arguments"], R"({"path":"a.c"})");
  EXPECT_EQ(read["call_id"], g.result.tool_call_ids[0]);
  const Json& search = body["output"][1];
  EXPECT_EQ(search["type"], "tool_search_call");
  EXPECT_EQ(search["execution"], "client");
  EXPECT_EQ(search["arguments"], Json::parse(R"({"query":"git"})"));
  EXPECT_EQ(search["call_id"], g.result.tool_call_ids[1]);
  EXPECT_FALSE(search.contains("name"));
  const Json& shell = body["output"][2];
  EXPECT_EQ(shell["name"], "shell");
  EXPECT_FALSE(shell.contains("namespace"));

  auto enc = NewResponsesStream(ctx);
  std::vector<std::string> types;
  Json done_items = Json::array();
  for (const auto& ev : ParseSse(Encode(*enc, g))) {
    types.push_back(ev.event);
    if (ev.event == "response.output_item.added" && ev.json["item"]["type"] == "tool_search_call") {
      EXPECT_EQ(ev.json["item"]["arguments"], Json::object());
    }
    if (ev.event == "response.output_item.done") done_items.push_back(ev.json["item"]);
  }
  // Arguments events only for the two function calls.
  EXPECT_EQ(std::count(types.begin(), types.end(), "response.function_call_arguments.done"), 2);
  ASSERT_EQ(done_items.size(), 3u);
  EXPECT_EQ(done_items[0]["namespace"], "mcp__fs__");
  EXPECT_EQ(done_items[1]["type"], "tool_search_call");
  EXPECT_EQ(done_items[1]["arguments"]["query"], "git");
  EXPECT_EQ(types.back(), "response.completed");
}

TEST(ResponsesSpecTest, SamplingKeysOutsideTheDialectAreIgnored) {
  auto r = ParseResponsesRequest(Json::parse(R"({"input": "x", "reasoning": {"effort": "none"},
      "temperature": 0.5, "top_p": 0.9, "top_k": 5, "min_p": 0.3, "seed": 7, "stop": ["a"]})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FLOAT_EQ(r->sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r->sampling.top_p, 0.9f);
  EXPECT_EQ(r->sampling.top_k, 0);
  EXPECT_FLOAT_EQ(r->sampling.min_p, 0.05f);
  EXPECT_FALSE(r->seeded);
  EXPECT_TRUE(r->stop.empty());
}

// Item statuses follow the finish (length: incomplete), reasoning is complete only once
// </think> closed it (docs/SERVER.md §5.6, §5.7).
TEST(ResponsesSpecTest, ItemStatusesFollowTheFinish) {
  GenerationRequest req;
  req.thinking = true;
  ResponseContext ctx{"resp_3", "codex", 5, false, /*reasoning_summary=*/true, {}, false};

  // Cut inside the thinking: the reasoning item alone (no empty message item).
  auto open = Generate(req, "still thinking", FinishReason::kLength);
  Json body = ResponsesResponse(ctx, open.result);
  ASSERT_EQ(body["output"].size(), 1u);
  EXPECT_EQ(body["output"][0]["type"], "reasoning");
  EXPECT_EQ(body["output"][0]["status"], "incomplete");
  auto enc = NewResponsesStream(ctx);
  std::vector<std::string> done_status;
  for (const auto& ev : ParseSse(Encode(*enc, open))) {
    if (ev.event == "response.output_item.done") done_status.push_back(ev.json["item"]["status"]);
  }
  EXPECT_EQ(done_status, (std::vector<std::string>{"incomplete"}));

  auto closed = Generate(req, "plan</think>Answer", FinishReason::kLength);
  body = ResponsesResponse(ctx, closed.result);
  EXPECT_EQ(body["output"][0]["status"], "completed");
  EXPECT_EQ(body["output"][1]["status"], "incomplete");
  EXPECT_EQ(body["output"][1]["content"][0]["text"], "Answer");

  auto stopped = Generate(req, "plan</think>Answer", FinishReason::kStop);
  body = ResponsesResponse(ctx, stopped.result);
  EXPECT_EQ(body["status"], "completed");
  EXPECT_EQ(body["output"][1]["status"], "completed");
}

// Codex replays one assistant turn as a message item followed by its call items.
TEST(ResponsesSpecTest, AMessageAndTheCallsAfterItAreOneAssistantTurn) {
  auto r = ParseResponsesRequest(Json::parse(R"({"input": [
      {"role": "user", "content": "fix"},
      {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}]},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]},
      {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{}"},
      {"type": "function_call", "call_id": "call_2", "name": "shell", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "a"},
      {"type": "function_call_output", "call_id": "call_2", "output": "b"},
      {"type": "reasoning", "summary": [{"type": "summary_text", "text": "again"}]},
      {"type": "function_call", "call_id": "call_3", "name": "shell", "arguments": "{}"}]})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& m = r->messages;
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[1].role, ChatRole::kAssistant);
  EXPECT_EQ(m[1].content, "Looking.");
  EXPECT_EQ(m[1].reasoning, "plan");
  ASSERT_EQ(m[1].tool_calls.size(), 2u);
  EXPECT_EQ(m[1].tool_calls[1].id, "call_2");
  EXPECT_EQ(m[4].role, ChatRole::kAssistant);
  EXPECT_EQ(m[4].reasoning, "again");
  ASSERT_EQ(m[4].tool_calls.size(), 1u);
  // Rendered as the model wrote it: text, then the DSML block, in one turn.
  PromptOptions po;
  const std::string prompt = RenderPrompt(m, po);
  EXPECT_NE(prompt.find("Looking.\n\n<｜DSML｜tool_calls>"), std::string::npos) << prompt;
}

}  // namespace
}  // namespace flashkv
