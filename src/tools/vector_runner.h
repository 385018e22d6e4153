// One official API vector case on flashkv's side, without the model: render the request
// with the DS4 chat template, tokenize it, check its prompt count, and turn the logits each
// greedy step was chosen from into what CompareVectorCase needs. The decode runs on the
// engine (evaluate/vector_case_runner.h). Used by `flashkv check-vectors`.
// Must not: run the model, print (the caller reports) or know HTTP.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tools/official_vectors.h"

namespace flashkv {

// The prompt text the case's request renders to (no system message, thinking as the
// request asks: the vectors were captured with thinking disabled).
Expected<std::string> RenderVectorPrompt(const VectorCase& c);

// The ids the case's prompt encodes to (RenderVectorPrompt + EncodeChatPrompt).
Expected<std::vector<int32_t>> VectorPromptTokens(const VectorCase& c, const Tokenizer& tokenizer);

// The prompt count alone, checked against the API's usage.prompt_tokens.
Expected<CaseVerdict> CheckVectorPrompt(const VectorCase& c, const Tokenizer& tokenizer);

// Our side of each step from the logits it was chosen from (`rows`: [steps, n_vocab]): the
// argmax (lowest id on ties) and its bytes, the top_k alternatives, and our log-probability
// of the official token.
std::vector<EngineStep> VectorSteps(const VectorCase& c, const Tokenizer& tokenizer,
                                    std::span<const float> rows, int n_vocab, int top_k);

// log-softmax of logits[0..n) into out (double accumulation so tiny probabilities keep
// their digits).
void LogSoftmax(const float* logits, int n, std::vector<double>* out);

}  // namespace flashkv
