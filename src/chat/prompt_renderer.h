// Renders a conversation into the DS4 prompt text (docs/TOKENIZER.md "Chat template"): BOS,
// the Think-Max preamble, the system block (tools first, then the system/developer text that
// opens the conversation), later system messages in place, role markers, reasoning,
// canonical or replayed DSML tool calls, tool results, and the assistant prefix in the
// requested thinking mode. Must not: tokenize (the caller encodes the text with specials
// allowed) or parse HTTP.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_message.h"

namespace flashkv {

// Marker texts. Ids are looked up by these strings in the model vocabulary, never fixed.
inline constexpr std::string_view kBosMarker = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEosMarker = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kUserMarker = "<｜User｜>";
inline constexpr std::string_view kAssistantMarker = "<｜Assistant｜>";
inline constexpr std::string_view kThinkOpen = "<think>";
inline constexpr std::string_view kThinkClose = "</think>";

// DeepSeek V4's reasoning-effort "max" preamble (REASONING_EFFORT_MAX of the official
// encoding for V4-Flash / V4-Pro), inserted right after BOS in Think-Max mode.
extern const std::string_view kThinkMaxPreamble;

// DeepSeek recommends Think Max only with at least 384K tokens of context.
inline constexpr size_t kThinkMaxMinContext = 393216;

// kMax falls back to kHigh when the context is shorter than kThinkMaxMinContext.
ThinkingMode EffectiveThinkingMode(ThinkingMode requested, size_t context_tokens);

struct PromptOptions {
  ThinkingMode thinking = ThinkingMode::kNone;
  // Active tool schemas, one object per tool (NormalizeToolSchema applied). Empty when the
  // request has no tools or tool_choice is "none".
  std::vector<nlohmann::ordered_json> tools;
};

// The full prompt for a chat request.
std::string RenderPrompt(const std::vector<ChatMessage>& messages, const PromptOptions& options);

// /v1/completions: a chat turn with the fixed system prompt "You are a helpful assistant".
std::string RenderCompletionPrompt(std::string_view prompt, ThinkingMode thinking);

}  // namespace flashkv
