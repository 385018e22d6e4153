// The logprobs of sampled tokens (engine TokenLogprob) in each OpenAI API's shape: Chat
// Completions' {"content":[{token, logprob, bytes, top_logprobs}]}, legacy Completions'
// parallel arrays (tokens, token_logprobs, top_logprobs, text_offset) and Responses'
// output_text `logprobs` array. A token is its bytes with invalid UTF-8 replaced (a token
// may hold part of a character); `bytes` has them exactly. Must not: compute probabilities
// (engine/sampler.h LogprobsOf does) or know HTTP.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/generation.h"
#include "server/json_util.h"

namespace flashkv {

// The tokens of the visible answer: those sampled after the reasoning closed.
std::vector<TokenLogprob> AnswerLogprobs(const std::vector<TokenLogprob>& all);

// [{token, logprob, bytes, top_logprobs:[{token, logprob, bytes}]}] (Chat's `content`,
// Responses' output_text `logprobs`).
Json LogprobEntries(const std::vector<TokenLogprob>& entries);

// Chat Completions' choice `logprobs`: {"content": LogprobEntries, "refusal": null}.
Json ChatLogprobs(const std::vector<TokenLogprob>& entries);

// Legacy Completions' choice `logprobs`; `text_offset` counts bytes from `offset` (where
// the first token's text starts in the completion).
Json CompletionLogprobs(const std::vector<TokenLogprob>& entries, size_t offset);

}  // namespace flashkv
