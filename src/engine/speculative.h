// Speculative verification (issue #29, MTP decoding): a draft of k tokens — from the model's
// multi-token-prediction layer — is held against the k + 1 logits rows the target model gives
// in one verify step, so that the tokens kept are distributed exactly as plain decoding would
// draw them one by one (speculative sampling: Leviathan et al. 2023, Chen et al. 2023).
// Greedy requests keep a drafted token only where it is the argmax, so their output is the
// plain greedy output token for token. SpeculativeStep runs one verify step on a session's
// state and leaves it holding the kept tokens only (state/kv_checkpoint.h puts it back past
// a rejection). Must not: draft (the drafter does) or schedule sessions.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/sampler.h"
#include "util/status.h"

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

class Model;
class KvState;
class KvCheckpoint;

// One verify step of a session whose `state` holds its ids up to, not including, `last` (the
// token just sampled): appends `last` and the draft in one forward — a chunk of k + 1 tokens,
// whose rows carry the bits of one-token steps (model/model.h) — holds the draft to those
// rows (VerifyDraft), and leaves the state holding `last` and the kept draft tokens. After a
// rejection the state is put back with `checkpoint` (covering at least k + 1 tokens) and
// `last` and the kept tokens are appended again. `rows`: scratch, resized to (k + 1) rows.
// The verdict's `next` is the following step's `last`. On an error the state is as before
// the step when the checkpoint could put it back, else reset by the caller.
Expected<DraftVerdict> SpeculativeStep(Model& model, KvState& state, KvCheckpoint& checkpoint,
                                       Sampler& sampler, int32_t last,
                                       std::span<const DraftToken> draft, std::vector<float>& rows);

}  // namespace flashkv
