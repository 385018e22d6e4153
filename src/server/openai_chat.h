// The OpenAI Chat Completions and legacy Completions dialects (docs/SERVER.md §5.4, §5.6, §5.7):
// request parsing into ApiRequest, the chat.completion / text_completion bodies, and their
// SSE chunk streams (reasoning_content, content, tool calls streamed as recognised,
// optional usage chunk, [DONE]). Must not: render prompts or talk to the engine.
#pragma once

#include <memory>

#include "engine/generation.h"
#include "server/api_request.h"
#include "server/stream_encoder.h"

namespace flashkv {

Expected<ApiRequest> ParseChatCompletionsRequest(const Json& body);
Expected<ApiRequest> ParseCompletionsRequest(const Json& body);

Json ChatCompletionResponse(const ResponseContext& ctx, const GenerationResult& r);
Json CompletionResponse(const ResponseContext& ctx, const GenerationResult& r);

std::unique_ptr<StreamEncoder> NewChatCompletionsStream(const ResponseContext& ctx);
std::unique_ptr<StreamEncoder> NewCompletionsStream(const ResponseContext& ctx);

// OpenAI finish_reason: stop | length | tool_calls | error.
const char* OpenAiFinishReason(FinishReason reason);

}  // namespace flashkv
