// Runs one official API vector case through flashkv (`flashkv check-vectors`): its prompt
// (tools/vector_runner.h) as one engine request that decodes the recorded number of steps
// greedily, whatever they hold (EOS included), keeping the logits each step was chosen
// from; those become our side of the comparison. Must not: print (the caller reports).
#pragma once

#include <cstdint>
#include <functional>

#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "tools/official_vectors.h"
#include "util/status.h"

namespace flashkv {

struct VectorRunOptions {
  int top_k = 20;         // alternatives collected per step
  int prefill_chunk = 0;  // <= 0: the whole prompt at once
  // Called after each prefill chunk with (tokens done, total) — progress for long cases.
  std::function<void(int64_t done, int64_t total)> on_prefill;
};

// Renders and tokenizes the case; with `model` null only the prompt count is checked.
Expected<CaseVerdict> RunVectorCase(const VectorCase& c, const Tokenizer& tokenizer, Model* model,
                                    const VectorRunOptions& options);

}  // namespace flashkv
