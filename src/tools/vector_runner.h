// Runs one official API vector case through flashkv: render the request with the DS4 chat
// template, tokenize it, and (given a model) decode greedily for the recorded steps,
// collecting what CompareVectorCase needs. Used by `flashkv check-vectors`.
// Must not: print (the caller reports) or know HTTP.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "tools/official_vectors.h"

namespace flashkv {

// The prompt text the case's request renders to (no system message, thinking as the
// request asks: the vectors were captured with thinking disabled).
Expected<std::string> RenderVectorPrompt(const VectorCase& c);

struct VectorRunOptions {
  int top_k = 20;         // alternatives collected per step
  int prefill_chunk = 0;  // <= 0: the whole prompt at once
  // Called after each prefill chunk with (tokens done, total) — progress for long cases.
  std::function<void(int64_t done, int64_t total)> on_prefill;
};

// Renders and tokenizes the case; with `model` null only the prompt count is checked.
Expected<CaseVerdict> RunVectorCase(const VectorCase& c, const Tokenizer& tokenizer, Model* model,
                                    const VectorRunOptions& options);

// log-softmax of logits[0..n) into out (double accumulation so tiny probabilities keep
// their digits).
void LogSoftmax(const float* logits, int n, std::vector<double>* out);

}  // namespace flashkv
