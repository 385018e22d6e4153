// The OpenAI Responses dialect (POST /v1/responses, used by Codex; docs/SERVER.md §5.4, §5.6,
// §5.7): input items → ApiRequest (messages, function, custom and hosted tool calls and their
// outputs, reasoning merged into the next assistant turn), the response object (flattened
// namespace tools and tool_search restored to their wire shapes), and its typed SSE event
// stream with sequence numbers. Must not: render prompts or talk to the engine.
#pragma once

#include <memory>

#include "engine/generation.h"
#include "server/api_request.h"
#include "server/stream_encoder.h"

namespace flashkv {

Expected<ApiRequest> ParseResponsesRequest(const Json& body);

Json ResponsesResponse(const ResponseContext& ctx, const GenerationResult& r);

std::unique_ptr<StreamEncoder> NewResponsesStream(const ResponseContext& ctx);

}  // namespace flashkv
