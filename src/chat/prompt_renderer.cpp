#include "chat/prompt_renderer.h"

#include "chat/dsml.h"
#include "chat/tool_schema.h"

namespace flashkv {
namespace {

bool Thinks(ThinkingMode mode) {
  return mode != ThinkingMode::kNone;
}

void AppendPrefix(ThinkingMode mode, std::string* out) {
  *out += kBosMarker;
  if (mode == ThinkingMode::kMax) *out += kThinkMaxPreamble;
}

// How many system messages open the conversation (they form the system block).
size_t LeadingSystemCount(const std::vector<ChatMessage>& messages) {
  size_t n = 0;
  while (n < messages.size() && messages[n].role == ChatRole::kSystem) ++n;
  return n;
}

// Whether old reasoning must be kept: tool loops need the model to see why it called.
bool HasToolContext(const std::vector<ChatMessage>& messages, const PromptOptions& options) {
  if (!options.tools.empty()) return true;
  for (const ChatMessage& m : messages) {
    if (m.role == ChatRole::kTool) return true;
    if (m.role == ChatRole::kAssistant && !m.tool_calls.empty()) return true;
  }
  return false;
}

}  // namespace

const std::string_view kThinkMaxPreamble =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate "
    "step, considered alternative, and rejected hypothesis to ensure absolutely no assumption "
    "is left unchecked.\n\n";

ThinkingMode EffectiveThinkingMode(ThinkingMode requested, size_t context_tokens) {
  if (requested == ThinkingMode::kMax && context_tokens < kThinkMaxMinContext) {
    return ThinkingMode::kHigh;
  }
  return requested;
}

std::string RenderPrompt(const std::vector<ChatMessage>& messages, const PromptOptions& options) {
  const bool think = Thinks(options.thinking);
  const bool tool_context = HasToolContext(messages, options);

  // System block: tools first, so the client's (often changing) system text sits right
  // before the first user turn and a cold-save trim cuts it, not the schemas. The tools
  // block ends in "\n"; one more gives the same blank line as between system texts. Only
  // the system messages before the conversation starts join it; later ones stay where
  // they were sent (Anthropic's mid-conversation system messages, a developer message
  // Codex adds on resume), so a new one never rewrites the start of a cached prompt.
  std::string system = RenderToolsBlock(options.tools);
  bool system_has_text = false;
  const size_t head = LeadingSystemCount(messages);
  for (size_t i = 0; i < head; ++i) {
    const ChatMessage& m = messages[i];
    if (system_has_text) {
      system += "\n\n";
    } else if (!system.empty()) {
      system += "\n";
    }
    system += m.content;
    system_has_text = true;
  }

  int last_user = -1;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role == ChatRole::kUser || messages[i].role == ChatRole::kTool) {
      last_user = static_cast<int>(i);
    }
  }

  std::string out;
  AppendPrefix(options.thinking, &out);
  out += system;
  bool pending_assistant = false;  // a user/tool turn awaits the assistant marker
  bool in_tool_results = false;    // consecutive tool results share one user turn
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    switch (m.role) {
      case ChatRole::kSystem:
        // DeepSeek's V4 encoding renders a system message as its bare text wherever it
        // stands; a user turn it follows still gets its assistant marker afterwards.
        if (i >= head) {
          out += m.content;
          in_tool_results = false;
        }
        break;
      case ChatRole::kUser:
        out += kUserMarker;
        out += m.content;
        pending_assistant = true;
        in_tool_results = false;
        break;
      case ChatRole::kTool:
        if (!in_tool_results) out += kUserMarker;
        out += "<tool_result>";
        out += EscapeToolResult(m.content);
        out += "</tool_result>";
        pending_assistant = true;
        in_tool_results = true;
        break;
      case ChatRole::kAssistant:
        if (pending_assistant) {
          out += kAssistantMarker;
          // Reasoning of turns before the last user message is dropped unless a tool loop
          // needs it; non-thinking turns carry only the closed marker.
          if (think && (tool_context || static_cast<int>(i) > last_user)) {
            out += kThinkOpen;
            out += m.reasoning;
          }
          out += kThinkClose;
        }
        out += m.content;
        if (!m.tool_calls.empty()) {
          out += m.raw_dsml.empty() ? RenderDsmlToolCalls(m.tool_calls) : m.raw_dsml;
        }
        out += kEosMarker;
        pending_assistant = false;
        in_tool_results = false;
        break;
    }
  }
  if (pending_assistant) {
    out += kAssistantMarker;
    out += think ? kThinkOpen : kThinkClose;
  }
  return out;
}

std::string RenderCompletionPrompt(std::string_view prompt, ThinkingMode thinking) {
  std::string out;
  AppendPrefix(thinking, &out);
  out += "You are a helpful assistant";
  out += kUserMarker;
  out += prompt;
  out += kAssistantMarker;
  out += Thinks(thinking) ? kThinkOpen : kThinkClose;
  return out;
}

}  // namespace flashkv
