// RequestTiming: where one request's time went, measured by the engine worker; feeds the
// x-flashkv-cache header, usage logs and /metrics. Must not: hold anything but numbers.
#pragma once

#include <cstdint>

namespace flashkv {

struct RequestTiming {
  double queue_ms = 0;         // submitted → the worker picked it up
  double restore_ms = 0;       // loading a disk snapshot (0 for live hits and cold starts)
  double prefill_ms = 0;       // evaluating the prompt suffix
  int64_t prefill_tokens = 0;  // ids evaluated for the prompt (pending ids included)
  double first_token_ms = 0;   // picked up → first token sampled (restore + prefill + sample)
  double decode_ms = 0;        // sampling and evaluating generated tokens
  int64_t decode_tokens = 0;   // generated tokens (each sampled one)

  double prefill_tps() const { return prefill_ms > 0 ? prefill_tokens * 1000.0 / prefill_ms : 0; }
  double decode_tps() const { return decode_ms > 0 ? decode_tokens * 1000.0 / decode_ms : 0; }
};

}  // namespace flashkv
