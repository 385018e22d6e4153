// ApiRequest: a chat request after one dialect's JSON has been checked and converted —
// the common form the server renders, tokenizes and queues, whatever API it came from.
// Also the request fields all dialects share the parsing of (thinking controls, sampling,
// stop sequences). Must not: render or tokenize (api_server does), or know HTTP.
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_message.h"
#include "constrain/json_grammar.h"
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
  int logprobs = -1;  // < 0: no logprobs; else the alternatives per token (top_logprobs)
  std::shared_ptr<const JsonGrammar> constraint;  // structured output: the answer's grammar
  bool constraint_prefix = false;  // the constraint is a forced tool call's opening only
};

// The thinking controls of every dialect (docs/SERVER.md §5.5): `thinking` (bool or {"type":…}),
// `think` (bool), `reasoning_effort` / `output_config.effort` / Responses
// `reasoning.effort` (passed in `effort`), and the deepseek-chat / deepseek-reasoner model
// aliases. When nothing decides, `fallback` (thinking on, except in the OpenAI dialects for a
// request that names no model: DeepSeek's default model, deepseek-chat, does not think).
Expected<ThinkingMode> ParseThinking(const Json& body, const std::optional<std::string>& effort,
                                     const std::string& model,
                                     ThinkingMode fallback = ThinkingMode::kHigh);

// temperature, top_p, top_k, min_p, seed (those present in `body`; the keys this dialect
// does not accept are skipped by the caller). Defaults: temperature 1, top_p 1, min_p
// 0.05, top_k off. In thinking mode the client's knobs are ignored (DeepSeek's API does the
// same) except temperature 0, which asks for the argmax and so for the same text every run;
// the seed is kept.
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

// A structured-output request (Chat `response_format`, Responses `text.format`, Anthropic
// `output_config.format`; `format` null or absent: none): `{"type":"text"}` changes
// nothing; `json_object` constrains the answer to a JSON object and `json_schema` to its
// schema (`format.json_schema.schema` or `format.schema`, compiled by constrain/json_grammar.h;
// what it cannot enforce is a 400 naming `where`). Such a request does not think (the
// constraint holds from the first token) and calls no tools (`tools` with a JSON format is
// a 400); the system prompt asks for JSON matching the schema, as the model cannot see the
// mask.
Status ParseStructuredOutput(const Json* format, std::string_view where, ApiRequest* req);

// A forced tool call (Chat `tool_choice` "required" or a named function, Anthropic `any` /
// `tool`, Responses "required" or a named function): the reply opens a DSML tool-call block
// and invokes one of `names` (as the client calls them; all of `tools` when empty), its
// opening forced by a prefix constraint; the model writes the arguments. Such a request
// does not think (as in Anthropic's API). `where` names the field in errors (a name not
// in `tools`, no tools at all).
Status ForceToolCall(std::vector<std::string> names, std::string_view where, ApiRequest* req);

// Whether this client sends the reasoning of its earlier assistant turns back (Responses
// reasoning items, Anthropic thinking blocks, chat reasoning_content), read from the
// request: with assistant turns in the history, whether any carries reasoning; on a first
// turn, whether the client is shown the reasoning at all (on Responses only when
// reasoning.summary asked for reasoning items). Picks the key a session is saved under.
bool ReplaysReasoning(const ApiRequest& req);

// Text of an OpenAI-style content value: a string, null, or an array whose string items
// and objects' "text" (or an assistant's "refusal") fields are concatenated; the request
// schema refused the other part types (images, audio, files) before this runs.
Expected<std::string> ContentText(const Json& content, std::string_view where);

}  // namespace flashkv
