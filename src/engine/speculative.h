// Speculative verification (issue #29, MTP decoding): a draft of k tokens — from the model's
// multi-token-prediction layer — is held against the k + 1 logits rows the target model gives
// in one verify step, so that the tokens kept are distributed exactly as plain decoding would
// draw them one by one (speculative sampling: Leviathan et al. 2023, Chen et al. 2023).
// Greedy requests keep a drafted token only where it is the argmax, so their output is the
// plain greedy output token for token. Must not: run the model, or know the KV state (the
// caller keeps the KV of the accepted prefix only).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/sampler.h"

namespace flashkv {

// One drafted token and the distribution the draft drew it from ((id, probability) pairs;
// one pair of probability 1 for a greedy draft).
struct DraftToken {
  int32_t id = -1;
  std::vector<std::pair<int32_t, double>> q;
};

struct DraftVerdict {
  int accepted = 0;   // draft[0, accepted) are kept
  int32_t next = -1;  // then this token: drawn at the first rejection, or the bonus from row k
};

// rows: k + 1 logits rows of n_vocab each, row i the target's logits for the token that
// follows the prompt and draft[0, i). Uses the sampler's options, excluded id and seeded
// stream: draft token i is kept with probability min(1, p(x)/q(x)) (greedy: iff it is the
// argmax); at the first rejection the next token is drawn from max(0, p − q) renormalised
// (greedy: the argmax); when all k are kept, from row k as Sample would.
DraftVerdict VerifyDraft(Sampler& sampler, std::span<const DraftToken> draft,
                         std::span<const float> rows, size_t n_vocab);

}  // namespace flashkv
