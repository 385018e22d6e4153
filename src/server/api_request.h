// ApiRequest: a chat request after one dialect's JSON has been checked and converted —
// the common form the server renders, tokenizes and queues, whatever API it came from.
// Also the request fields all dialects share the parsing of (thinking controls, sampling,
// stop sequences). Must not: render or tokenize (api_server does), or know HTTP.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_message.h"
#include "engine/sampler.h"
#include "server/json_util.h"

namespace flashkv {

enum class Dialect {
  kChatCompletions,  // POST /v1/chat/completions
  kCompletions,      // POST /v1/completions
  kResponses,        // POST /v1/responses
  kAnthropic,        // POST /v1/messages
};

// A tool whose name in the prompt differs from what the client calls it (Responses
// `namespace` groups are flattened to "<namespace><name>") or whose calls go out as a
// hosted item type (Responses `tool_search`).
struct ToolWireName {
  std::string prompt_name;   // as the model sees and calls it
  std::string name;          // as the client knows it
  std::string name_space;    // Responses `namespace`, "" when none
  bool tool_search = false;  // calls are tool_search_call items with object arguments
};

struct ApiRequest {
  Dialect dialect = Dialect::kChatCompletions;
  std::string model;                     // as sent (echoed back)
  std::vector<ChatMessage> messages;     // chat dialects
  std::string prompt;                    // kCompletions: the user text
  std::vector<Json> tools;               // normalized schemas; empty when none or tool_choice none
  std::vector<ToolWireName> tool_names;  // Responses: names to restore on output items
  ThinkingMode thinking = ThinkingMode::kHigh;  // before the context gate for Think Max
  bool stream = false;
  bool include_usage = false;      // OpenAI stream_options.include_usage
  bool reasoning_summary = false;  // Responses reasoning.summary asked for reasoning items
  std::optional<int64_t> max_tokens;
  SamplerOptions sampling;
  bool seeded = false;  // the client gave a seed (else a random one is drawn)
  std::vector<std::string> stop;
};

// The thinking controls of every dialect (docs/SERVER.md §5.5): `thinking` (bool or {"type":…}),
// `think` (bool), `reasoning_effort` / `output_config.effort` / Responses
// `reasoning.effort` (passed in `effort`), and the deepseek-chat / deepseek-reasoner model
// aliases. Default: thinking on.
Expected<ThinkingMode> ParseThinking(const Json& body, const std::optional<std::string>& effort,
                                     const std::string& model);

// temperature, top_p, top_k, min_p, seed (those present in `body`; the keys this dialect
// does not accept are skipped by the caller). Defaults: temperature 1, top_p 1, min_p
// 0.05, top_k off. In thinking mode the client's knobs are ignored (DeepSeek's API does the
// same); the seed is kept.
Status ParseSampling(const Json& body, ApiRequest* out);

// The members of `body` named in `keys`: what a dialect honours of the shared sampling
// fields (Responses ignores top_k, min_p and seed; Anthropic min_p and seed).
Json OnlyKeys(const Json& body, std::initializer_list<std::string_view> keys);

// `key` as a string or an array of strings (at most 16, each non-empty).
Status ParseStop(const Json& body, std::string_view key, std::vector<std::string>* out);

// `tools`: an array of tool objects, each normalized for the prompt (NormalizeToolSchema).
Status ParseTools(const Json& body, std::vector<Json>* out);

// The first of `keys` present, as a token count in [1, 2^31).
Expected<std::optional<int64_t>> ParseMaxTokens(const Json& body,
                                                std::initializer_list<std::string_view> keys);

// Whether this client sends the reasoning of its earlier assistant turns back (Responses
// reasoning items, Anthropic thinking blocks, chat reasoning_content), read from the
// request: with assistant turns in the history, whether any carries reasoning; on a first
// turn, whether the client is shown the reasoning at all (on Responses only when
// reasoning.summary asked for reasoning items). Picks the key a session is saved under.
bool ReplaysReasoning(const ApiRequest& req);

// Text of an OpenAI-style content value: a string, null, or an array whose string items
// and objects' "text" fields are concatenated (other parts, e.g. images, are skipped).
Expected<std::string> ContentText(const Json& content, std::string_view where);

}  // namespace flashkv
