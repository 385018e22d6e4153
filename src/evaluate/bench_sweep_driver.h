// The driver of `flashkv bench`'s sweep (tools/bench_sweep.h says what a row measures): one
// Engine with a single live session, and one request per frontier that continues that
// session by its ids — the resume step's token rule, so only the ids since the previous
// frontier are prefilled — then probes gen_tokens greedy decode steps that never pick EOS
// (each evaluated) and rewinds the session to the frontier (EvaluationOptions, engine/
// evaluation.h). The row's times are the request's own: prefill, decode, and the rewind
// snapshot's save and restore. Must not: parse flags, read files or print (the CLI does).
//
// Lives in evaluate/, above engine/ and tools/ (the engine is not tools/' to include).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "tools/bench_sweep.h"
#include "util/status.h"

namespace flashkv {

struct BenchCallbacks {
  // After each finished row (e.g. to write a CSV line at once).
  std::function<void(const BenchRow&)> on_row;
  // For a progress line: the sequence tokens prefilled so far, the frontier being worked
  // on and the phase ("prefill" after each prefill step, "generate" before the probe).
  std::function<void(int64_t prefilled, int64_t frontier, const char* phase)> on_progress;
  // After each frontier's probe, the logits of every probe step ([gen_tokens, n_vocab]):
  // for consistency checks (keeping them costs a copy of each row).
  std::function<void(int64_t frontier, std::span<const float> logits)> on_probe_logits;
};

// Runs the sweep over `tokens` (at least options.ctx_max of them; ids < n_vocab) on
// `model`, whose requests `tokenizer` serves (its EOS is never probed). Errors name the
// frontier they happened at.
Expected<std::vector<BenchRow>> RunBenchSweep(Model& model, const Tokenizer& tokenizer,
                                              std::span<const int32_t> tokens,
                                              const BenchOptions& options,
                                              const BenchCallbacks& callbacks = {});

}  // namespace flashkv
