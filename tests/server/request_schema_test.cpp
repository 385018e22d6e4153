// Each API's request schema: malformed fields the dialect parsers would have let through
// (issue 17's "garbage accepted with 200") are 400s naming the field, through the same
// reader every endpoint uses; the shapes real clients send stay accepted.
#include "server/request_schema.h"

#include <string>

#include <gtest/gtest.h>

#include "server/api_errors.h"
#include "server/request_reader.h"

namespace flashkv {
namespace {

struct Garbage {
  Dialect dialect;
  const char* body;
  const char* message;  // the whole error message
};

// Bodies whose only fault is the one named.
const Garbage kGarbage[] = {
    // Chat completions.
    {Dialect::kChatCompletions, R"({"messages":[{}]})", "'messages[0].content' is required"},
    {Dialect::kChatCompletions, R"({"messages":[{"role":null,"content":"x"}]})",
     "'messages[0].role' must be a string, not null"},
    {Dialect::kChatCompletions, R"({"messages":[{"role":"user","content":[1]}]})",
     "'messages[0].content[0]' must be a string or an object, not number"},
    {Dialect::kChatCompletions, R"({"messages":[{"role":"user","content":[{"type":"text"}]}]})",
     "'messages[0].content[0].text' is required"},
    {Dialect::kChatCompletions,
     R"({"messages":[{"role":"user","content":"x"},{"role":"assistant"}]})",
     "'messages[1]' needs 'content' or 'tool_calls'"},
    {Dialect::kChatCompletions,
     R"({"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function"}]}]})",
     "'messages[0].tool_calls[0].function' is required"},
    {Dialect::kChatCompletions,
     R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":7}}]}]})",
     "'messages[0].tool_calls[0].function.arguments' must be a string, an object or null, not "
     "number"},
    {Dialect::kChatCompletions, R"({"messages":[{"content":"x"}],"tools":[{"type":"function"}]})",
     "'tools[0].function' is required"},
    {Dialect::kChatCompletions,
     R"({"messages":[{"content":"x"}],"tools":[{"type":"function","function":{"name":1}}]})",
     "'tools[0].function.name' must be a string, not number"},
    {Dialect::kChatCompletions,
     R"({"messages":[{"content":"x"}],"tools":[{"type":"function","function":{"name":""}}]})",
     "'tools[0].function.name' must not be empty"},
    {Dialect::kChatCompletions,
     R"({"messages":[{"content":"x"}],"tools":[{"type":"wat","name":"f"}]})",
     "'tools[0].type' must be one of function, custom; not \"wat\""},
    {Dialect::kChatCompletions,
     R"({"messages":[{"content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":"x"}}]})",
     "'tools[0].function.parameters' must be an object or null, not string"},
    {Dialect::kChatCompletions, R"({"messages":[{"content":"x"}],"tool_choice":"bogus"})",
     "'tool_choice' must be one of none, auto, required; not \"bogus\""},
    {Dialect::kChatCompletions,
     R"({"messages":[{"content":"x"}],"tool_choice":{"type":"function"}})",
     "'tool_choice.function' is required"},
    {Dialect::kChatCompletions, R"({"messages":[{"content":"x"}],"response_format":"x"})",
     "'response_format' must be an object or null, not string"},
    {Dialect::kChatCompletions,
     R"({"messages":[{"content":"x"}],"response_format":{"type":"yaml"}})",
     "'response_format.type' must be one of text, json_object, json_schema; not \"yaml\""},
    {Dialect::kChatCompletions,
     R"({"messages":[{"content":"x"}],"thinking":{"type":"enabled","budget_tokens":-1}})",
     "'thinking.budget_tokens' must be between 1 and 2147483647, not -1"},
    {Dialect::kChatCompletions, R"({"messages":[{"content":"x"}],"n":3})",
     "'n' must be 1: this server returns one choice per request"},
    {Dialect::kChatCompletions, R"({"messages":[{"content":"x"}],"presence_penalty":9})",
     "'presence_penalty' must be between -2 and 2, not 9"},
    {Dialect::kChatCompletions, R"({"messages":[{"content":"x"}],"parallel_tool_calls":"yes"})",
     "'parallel_tool_calls' must be a boolean or null, not string"},
    {Dialect::kChatCompletions, R"({"messages":[{"content":"x"}],"top_logprobs":21})",
     "'top_logprobs' must be between 0 and 20, not 21"},
    // Completions.
    {Dialect::kCompletions, R"({"prompt":"x","echo":"no"})",
     "'echo' must be a boolean or null, not string"},
    {Dialect::kCompletions, R"({"prompt":"x","logprobs":2.5})",
     "'logprobs' must be an integer, not 2.5"},
    // Anthropic Messages.
    {Dialect::kAnthropic, R"({"max_tokens":5,"messages":[{"role":"user"}]})",
     "'messages[0].content' is required"},
    {Dialect::kAnthropic,
     R"({"max_tokens":5,"messages":[{"role":"user","content":[{"type":"text"}]}]})",
     "'messages[0].content[0].text' is required"},
    {Dialect::kAnthropic,
     R"({"max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":"x"}]}]})",
     "'messages[0].content[0].input' must be an object or null, not string"},
    {Dialect::kAnthropic,
     R"({"max_tokens":5,"messages":[{"role":"user","content":"x"}],"thinking":{"type":"enabled","budget_tokens":-1}})",
     "'thinking.budget_tokens' must be between 1 and 2147483647, not -1"},
    {Dialect::kAnthropic, R"({"max_tokens":5,"messages":[{"content":"x"}],"tools":[{"name":"f"}]})",
     "'tools[0].input_schema' is required"},
    {Dialect::kAnthropic,
     R"({"max_tokens":5,"messages":[{"content":"x"}],"tools":[{"name":"f","type":"wat","input_schema":{}}]})",
     "'tools[0].type' must be \"custom\" or a server tool's versioned type (e.g. "
     "\"web_search_20250305\"); not \"wat\""},
    {Dialect::kAnthropic,
     R"({"max_tokens":5,"messages":[{"content":"x"}],"tool_choice":{"type":"bogus"}})",
     "'tool_choice.type' must be one of auto, any, tool, none; not \"bogus\""},
    {Dialect::kAnthropic,
     R"({"max_tokens":5,"messages":[{"content":"x"}],"tool_choice":{"type":"tool"}})",
     "'tool_choice.name' is required"},
    {Dialect::kAnthropic,
     R"({"max_tokens":5,"messages":[{"content":"x"}],"system":[{"type":"text"}]})",
     "'system[0].text' is required"},
    {Dialect::kAnthropic, R"({"max_tokens":5,"messages":[{"content":"x"}],"temperature":1.5})",
     "'temperature' must be between 0 and 1, not 1.5"},
    // Responses.
    {Dialect::kResponses, R"({"input":[{"type":"message","role":"user"}]})",
     "'input[0].content' is required"},
    {Dialect::kResponses, R"({"input":[{"role":"user","content":[{"type":"input_text"}]}]})",
     "'input[0].content[0].text' is required"},
    {Dialect::kResponses,
     R"({"input":[{"role":"user","content":"x"},{"type":"function_call_output","output":"o"}]})",
     "'input[1].call_id' is required"},
    {Dialect::kResponses, R"({"input":"x","tools":[{"type":"wat"}]})",
     "'tools[0].type' \"wat\" is not a Responses tool type"},
    {Dialect::kResponses, R"({"input":"x","tools":[{"type":"function","name":1}]})",
     "'tools[0].name' must be a string, not number"},
    {Dialect::kResponses, R"({"input":"x","reasoning":{"summary":"x"}})",
     "'reasoning.summary' must be one of auto, concise, detailed, none; not \"x\""},
    {Dialect::kResponses, R"({"input":"x","text":{"format":{"type":"yaml"}}})",
     "'text.format.type' must be one of text, json_schema, json_object; not \"yaml\""},
    {Dialect::kResponses, R"({"input":"x","truncation":"sometimes"})",
     "'truncation' must be one of auto, disabled; not \"sometimes\""},
};

TEST(RequestSchemaTest, GarbageIsA400NamingTheField) {
  for (const Garbage& g : kGarbage) {
    Expected<ApiRequest> r = ReadApiRequest(g.dialect, g.body);
    ASSERT_FALSE(r.ok()) << g.body;
    EXPECT_EQ(HttpStatusFor(r.status()), 400) << g.body;
    EXPECT_EQ(r.status().message(), g.message) << g.body;
  }
}

TEST(RequestSchemaTest, TheSchemaAloneRefusesTheSame) {
  // Independent of the parsers' order: each body fails its schema on its own.
  for (const Garbage& g : kGarbage) {
    EXPECT_FALSE(ValidateRequestSchema(g.dialect, Json::parse(g.body)).ok()) << g.body;
  }
}

// Shaped like what the official SDKs, Claude Code and Codex send.
const std::pair<Dialect, const char*> kClientBodies[] = {
    {Dialect::kChatCompletions, R"({
      "model": "deepseek-v4-flash", "stream": true, "stream_options": {"include_usage": true},
      "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Look"}, "at"]},
        {"role": "assistant", "content": null, "reasoning_content": "r",
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "ls", "arguments": "{\"path\":\"/\"}"}},
                        {"id": "c2", "function": {"name": "no_args", "arguments": ""}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a b"},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "ok"}]}
      ],
      "tools": [{"type": "function", "function": {"name": "ls", "description": "list",
                 "parameters": {"type": "object"}, "strict": true}},
                {"type": "function", "name": "flat", "parameters": {}},
                {"name": "anthropic_shaped", "input_schema": {"type": "object"}}],
      "tool_choice": "auto",
      "parallel_tool_calls": true, "response_format": {"type": "text"},
      "max_tokens": null, "temperature": null, "stop": null, "n": 1, "user": "u",
      "frequency_penalty": 0, "presence_penalty": 0, "logit_bias": {}, "seed": 3, "logprobs": false,
      "reasoning_effort": "high", "metadata": {"k": "v"}, "store": false
    })"},
    {Dialect::kCompletions,
     R"({"prompt": ["hi"], "max_tokens": 4, "echo": false, "n": 1, "logprobs": null, "suffix": null})"},
    {Dialect::kAnthropic, R"({
      "model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": true,
      "system": [{"type": "text", "text": "x-anthropic-billing-header: 1"},
                 {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
      "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]},
        {"role": "assistant", "content": [
          {"type": "thinking", "thinking": "t", "signature": "s"},
          {"type": "redacted_thinking", "data": "d"},
          {"type": "text", "text": "Running."},
          {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]},
        {"role": "user", "content": [
          {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": false,
           "content": [{"type": "text", "text": "a"}]},
          {"type": "text", "text": "<system-reminder>x</system-reminder>"}]}
      ],
      "tools": [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}},
                {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}],
      "tool_choice": {"type": "auto", "disable_parallel_tool_use": false},
      "thinking": {"type": "enabled", "budget_tokens": 31999}, "temperature": 1,
      "metadata": {"user_id": "u"}, "output_config": {"effort": "high"}
    })"},
    {Dialect::kResponses, R"({
      "model": "gpt-5-codex", "instructions": "You are Codex.", "stream": true, "store": false,
      "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "env"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix"}]},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}],
         "content": null, "encrypted_content": null},
        {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}",
         "call_id": "call_1", "status": "completed"},
        {"type": "function_call_output", "call_id": "call_1", "output": "a.c"},
        {"type": "local_shell_call", "id": "ls_1", "call_id": "call_2", "status": "completed",
         "action": {"type": "exec", "command": ["ls"]}},
        {"type": "local_shell_call_output", "call_id": "call_2", "output": "b.c"},
        {"type": "custom_tool_call", "call_id": "call_3", "name": "apply_patch",
         "input": "*** Begin Patch\n{{{{\n*** End Patch"},
        {"type": "custom_tool_call_output", "call_id": "call_3", "output": "done"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}
      ],
      "tools": [{"type": "function", "name": "shell", "description": "run", "strict": false,
                 "parameters": {"type": "object"}},
                {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}},
                {"type": "local_shell"}, {"type": "web_search"}],
      "tool_choice": "auto", "parallel_tool_calls": false,
      "reasoning": {"effort": "medium", "summary": "auto"},
      "text": {"verbosity": "low", "format": {"type": "text"}},
      "include": ["reasoning.encrypted_content"], "prompt_cache_key": "k"
    })"},
};

TEST(RequestSchemaTest, RealClientShapesAreAccepted) {
  for (const auto& [dialect, body] : kClientBodies) {
    Expected<ApiRequest> r = ReadApiRequest(dialect, body);
    EXPECT_TRUE(r.ok()) << r.status().ToString() << "\n" << body;
  }
}

TEST(RequestSchemaTest, ItemsAndRolesTheParsersDecideOnPassTheSchema) {
  // Claude Code sends system-role entries inside `messages`, Codex replays items it saw
  // incomplete: whether they are honoured is the parsers' call, never the schema's.
  EXPECT_TRUE(
      ValidateAnthropicSchema(
          Json::parse(
              R"({"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}]})"))
          .ok());
  EXPECT_TRUE(ValidateResponsesSchema(Json::parse(R"({"input":[
      {"type":"message","role":"assistant","status":"incomplete",
       "content":[{"type":"output_text","text":"partial"}]},
      {"type":"reasoning","status":"in_progress","summary":[]}]})"))
                  .ok());
}

}  // namespace
}  // namespace flashkv
