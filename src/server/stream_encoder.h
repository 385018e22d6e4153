// StreamEncoder: turns one request's engine events into its API's SSE events; one
// implementation per dialect (openai_chat, openai_responses, anthropic_messages). Also
// ResponseContext, the per-response values every shape repeats. Must not: write to the
// connection or decide when to send keepalives (api_server does).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/generation.h"
#include "server/api_request.h"

namespace flashkv {

struct ResponseContext {
  std::string id;                        // "chatcmpl-…", "cmpl-…", "resp_…", "msg_…"
  std::string model;                     // the model name the client sent (echoed)
  int64_t created = 0;                   // Unix seconds
  bool include_usage = false;            // OpenAI stream_options.include_usage
  bool reasoning_summary = false;        // Responses: reasoning items were asked for
  std::vector<ToolWireName> tool_names;  // Responses: wire names of flattened/hosted tools
  bool logprobs = false;                 // the client asked for logprobs
};

class StreamEncoder {
 public:
  virtual ~StreamEncoder() = default;
  // Events right after the headers, once the request has started.
  virtual std::string Start(const CacheInfo& cache) = 0;
  // Events for one kChat or kText engine event ("" when it maps to nothing).
  virtual std::string Delta(const GenerationEvent& event) = 0;
  // The closing events, with usage.
  virtual std::string Finish(const GenerationResult& result) = 0;
  // A failure after the stream began (the status line was already sent).
  virtual std::string Error(const std::string& message) = 0;
};

}  // namespace flashkv
