// The conversation as chat/ sees it after the server has converted an OpenAI, Anthropic or
// Responses request: plain roles, text, reasoning and tool calls. Must not: know HTTP
// dialects (server/ converts) or tokens (tokenizer/ encodes the rendered text).
#pragma once

#include <string>
#include <vector>

namespace flashkv {

enum class ChatRole {
  kSystem,  // also OpenAI "developer": joined into the system block
  kUser,
  kAssistant,
  kTool,  // a tool result (OpenAI "tool"/"function", Anthropic tool_result)
};

// How the assistant turn is opened (docs/TOKENIZER.md "Thinking modes").
enum class ThinkingMode {
  kNone,  // non-thinking: the assistant prefix ends with </think>
  kHigh,  // thinking: ends with <think>
  kMax,   // thinking + the Think-Max preamble right after BOS
};

struct ToolCall {
  std::string id;  // client-visible call id ("call_…", "toolu_…"); not rendered
  std::string name;
  std::string arguments;  // JSON text as the client sent it (normally an object)
};

struct ChatMessage {
  ChatRole role = ChatRole::kUser;
  std::string content;
  std::string reasoning;             // assistant: reasoning_content / thinking text
  std::vector<ToolCall> tool_calls;  // assistant
  // assistant: the exact DSML bytes the model sampled for these calls (the replay map,
  // docs/SERVER.md §4), rendered verbatim instead of the canonical form when non-empty.
  std::string raw_dsml;
  std::string tool_call_id;  // tool: the call this result answers; not rendered
};

}  // namespace flashkv
