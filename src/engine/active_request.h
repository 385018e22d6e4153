// ActiveRequest: what the engine keeps about one request between its admission and its
// last event on the batched path — the request, its live slot, the snapshot points of its
// prefill, and its decode state (sampler, UTF-8 decoder, output stream, counters). Must not:
// run the model or touch sessions (Engine's step code does, engine/engine_steps.cpp).
//
// Threading: the engine worker's alone.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "constrain/token_constraint.h"
#include "engine/generation.h"
#include "engine/output_stream.h"
#include "engine/request_handle.h"
#include "engine/rewind_point.h"
#include "engine/sampler.h"
#include "tokenizer/stream_decoder.h"

namespace flashkv {

struct ActiveRequest {
  using Clock = std::chrono::steady_clock;

  ActiveRequest(int64_t id, RequestHandle& request)
      : id(id), request(request), result(std::make_shared<GenerationResult>()) {}

  const int64_t id;  // the StepPlanner's stream id
  RequestHandle& request;
  std::shared_ptr<GenerationResult> result;
  int slot = -1;
  bool live_hit = false;
  bool ram_looked_up = false;
  bool disk_looked_up = false;
  bool remote_looked_up = false;

  // Prefill: absolute token counts to stop at and save (those in `anchors` as cold
  // anchors), the next one not reached yet, and the progress counters.
  std::vector<int64_t> save_points;
  std::vector<int64_t> anchors;
  size_t next_point = 0;
  Clock::time_point prefill_t0;
  int64_t prefill_total = 0;
  int64_t prefill_done = 0;
  Clock::time_point prefill_logged;  // the last progress log line (engine_steps.cpp)

  // Decode (set when the prompt is read).
  bool decoding = false;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<StreamDecoder> decoder;
  std::unique_ptr<OutputStream> output;
  Clock::time_point decode_t0;
  Clock::time_point last_token;
  int64_t max_new = 0;
  int64_t sampled = 0;
  std::vector<TokenLogprob> unsent_logprobs;    // for the next kChat / kText event
  std::unique_ptr<TokenConstraint> constraint;  // request.constraint's state
  std::vector<float> masked_logits;             // the logits row with the constraint's mask
  FinishReason finish = FinishReason::kLength;
  std::optional<RewindPoint> rewind;  // eval.rewind: the prompt's end, put back by Finish
};

}  // namespace flashkv
