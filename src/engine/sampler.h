// Sampler: picks the next token from a logits row. Greedy (temperature 0) or stochastic
// with temperature, then the top-k, top-p and min-p filters, from a seeded generator so a
// (seed, logits sequence) pair always gives the same tokens. Must not: know tokens' text
// or the model.
//
// Order: logits / temperature → keep the top_k largest → softmax → keep the smallest set
// of most likely tokens whose mass reaches top_p → drop tokens below min_p · p_max →
// renormalise → draw. Ties in the greedy argmax go to the lowest id. An excluded id is never
// a candidate (a probe that must run its full length bans the EOS).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace flashkv {

struct SamplerOptions {
  float temperature = 0.0f;  // <= 0: greedy
  int top_k = 0;             // <= 0: off
  float top_p = 1.0f;        // >= 1: off
  float min_p = 0.0f;        // <= 0: off
  uint64_t seed = 0;
};

// The log-probability of a picked token and of the most likely alternatives, as the
// OpenAI APIs report them: log-softmax of the model's logits row itself (temperature 1, no
// filter), so the numbers do not depend on the request's sampling knobs.
struct TokenLogprobs {
  int32_t id = -1;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // most likely first, lowest id on ties
};

// logits: [n_vocab]; `top_n` alternatives (0..20 in the APIs) besides the pick.
TokenLogprobs LogprobsOf(std::span<const float> logits, int32_t picked, int top_n);

class Sampler {
 public:
  // `exclude_id`: never picked (< 0: none).
  explicit Sampler(const SamplerOptions& options, int32_t exclude_id = -1);

  // logits: [n_vocab]. Reuses its candidate buffer, so calls after the first do not
  // allocate.
  int32_t Sample(std::span<const float> logits);
  int32_t exclude_id() const { return exclude_id_; }

  // The argmax, lowest id on ties, never `exclude` (< 0: none); 0 when nothing is left.
  static int32_t Greedy(std::span<const float> logits, int32_t exclude = -1);

  // The distribution Sample draws from for this logits row — temperature, the filters and
  // the excluded id applied — as (id, probability) pairs summing to 1, most likely first;
  // greedy: the argmax with probability 1. What speculative verification
  // (engine/speculative.h) holds a draft to.
  std::vector<std::pair<int32_t, double>> Distribution(std::span<const float> logits);
  bool greedy() const { return options_.temperature <= 0.0f; }

  // A uniform double in [0, 1) from 53 random bits of the sampler's seeded stream (the same
  // on every platform).
  double Uniform();

 private:
  struct Candidate {
    float logit;  // then probability
    int32_t id;
  };
  // Fills candidates_ (most likely first) and probs_ (unnormalised within the kept set) for a
  // stochastic draw; returns how many candidates are kept.
  size_t Filter(std::span<const float> logits);
  // Sorts candidates_ (filled in id order) most likely first, equal logits by id.
  void SortMostLikelyFirst();

  SamplerOptions options_;
  int32_t exclude_id_;
  std::mt19937_64 rng_;
  std::vector<Candidate> candidates_;
  std::vector<double> probs_;
  std::vector<Candidate> scratch_;  // SortMostLikelyFirst's buffers, kept between calls
  std::vector<uint32_t> keys_, scratch_keys_;
};

}  // namespace flashkv
