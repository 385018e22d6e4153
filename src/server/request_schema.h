// The request schema of each API: kinds, allowed values and ranges of the request fields,
// and the depth of JSON carried inside strings (tool-call arguments), checked before
// anything is rendered. The dialect parsers (openai_chat, openai_responses,
// anthropic_messages) convert what they honour and run first, so a field both look at
// gets the parser's message; these checks refuse what the parsers would let through as
// garbage (`messages:[{}]`, `tool_choice:"bogus"`, a tool without a name, a numeric part in
// a content array). Unknown fields are skipped (spec §3.4), and what real clients send
// stays accepted: Claude Code's system-role entries in `messages` and Codex's replayed
// items with `"status":"incomplete"` are left to the parsers.
// Must not: convert fields (the parsers do) or know HTTP.
#pragma once

#include "server/api_request.h"
#include "server/json_util.h"
#include "util/status.h"

namespace flashkv {

// The schema of `dialect` on a body that is a JSON object. InvalidArgument naming the
// field ("'tools[0].function.name' must be a string, not number").
Status ValidateRequestSchema(Dialect dialect, const Json& body);

// Each API's schema (ValidateRequestSchema picks one).
Status ValidateChatCompletionsSchema(const Json& body);
Status ValidateCompletionsSchema(const Json& body);
Status ValidateAnthropicSchema(const Json& body);
Status ValidateResponsesSchema(const Json& body);

// `thinking` as an object: its budget_tokens (Anthropic's field, also sent to the chat
// endpoints) is a positive token count.
Status ValidateThinkingSchema(const Json& body);

}  // namespace flashkv
