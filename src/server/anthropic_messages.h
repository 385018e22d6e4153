// The Anthropic Messages dialect (POST /v1/messages, docs/SERVER.md §5.4, §5.6, §5.7): request
// parsing into ApiRequest — including dropping Claude Code's per-request
// "x-anthropic-…" system header so it cannot break prefix reuse — the message body, and
// the SSE event stream (message_start, content blocks with thinking/text/tool_use deltas,
// message_delta, message_stop). Must not: render prompts or talk to the engine.
#pragma once

#include <memory>

#include "engine/generation.h"
#include "server/api_request.h"
#include "server/stream_encoder.h"

namespace flashkv {

Expected<ApiRequest> ParseAnthropicRequest(const Json& body);

Json AnthropicResponse(const ResponseContext& ctx, const GenerationResult& r);

std::unique_ptr<StreamEncoder> NewAnthropicStream(const ResponseContext& ctx);

// end_turn | max_tokens | tool_use | stop_sequence.
const char* AnthropicStopReason(const GenerationResult& r);

}  // namespace flashkv
