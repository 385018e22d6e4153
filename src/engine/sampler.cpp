#include "engine/sampler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

namespace flashkv {

Sampler::Sampler(const SamplerOptions& options, int32_t exclude_id)
    : options_(options), exclude_id_(exclude_id), rng_(options.seed) {}

TokenLogprobs LogprobsOf(std::span<const float> logits, int32_t picked, int top_n) {
  TokenLogprobs out;
  out.id = picked;
  if (logits.empty()) return out;
  // log p_i = x_i - (max + log Σ exp(x_j - max)), summed in double.
  float max_logit = logits[0];
  for (float x : logits) max_logit = std::max(max_logit, x);
  double sum = 0.0;
  for (float x : logits) sum += std::exp(double(x) - double(max_logit));
  const double log_z = double(max_logit) + std::log(sum);
  if (picked >= 0 && size_t(picked) < logits.size()) {
    out.logprob = float(double(logits[size_t(picked)]) - log_z);
  }
  const size_t n = std::min(size_t(std::max(top_n, 0)), logits.size());
  if (n == 0) return out;
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
  std::partial_sort(ids.begin(), ids.begin() + ptrdiff_t(n), ids.end(), [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] ||
           (logits[size_t(a)] == logits[size_t(b)] && a < b);
  });
  out.top.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out.top.emplace_back(ids[i], float(double(logits[size_t(ids[i])]) - log_z));
  }
  return out;
}

int32_t Sampler::Greedy(std::span<const float> logits, int32_t exclude) {
  // One pass; the branch almost never moves, so at -O3 this runs ~50 us for a 129k-entry
  // row (a two-pass max-then-find form measured twice that: docs/PERFORMANCE.md "Sampling on
  // the host").
  int32_t best = -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (int32_t(i) == exclude) continue;
    if (best < 0 || logits[i] > logits[best]) best = int32_t(i);
  }
  return std::max(best, 0);
}

double Sampler::Uniform() {
  return double(rng_() >> 11) * (1.0 / 9007199254740992.0);
}

int32_t Sampler::Sample(std::span<const float> logits) {
  const int32_t exclude = exclude_id_;
  const bool excludes = exclude >= 0 && size_t(exclude) < logits.size();
  if (options_.temperature <= 0.0f || logits.size() <= (excludes ? 1u : 0u)) {
    return Greedy(logits, exclude);
  }
  const size_t n = Filter(logits);
  const std::vector<double>& p = probs_;
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += p[i];
  double r = Uniform() * total;
  for (size_t i = 0; i < n; ++i) {
    r -= p[i];
    if (r < 0.0) return candidates_[i].id;
  }
  return candidates_[n - 1].id;
}

std::vector<std::pair<int32_t, double>> Sampler::Distribution(std::span<const float> logits) {
  const int32_t exclude = exclude_id_;
  const bool excludes = exclude >= 0 && size_t(exclude) < logits.size();
  if (options_.temperature <= 0.0f || logits.size() <= (excludes ? 1u : 0u)) {
    return {{Greedy(logits, exclude), 1.0}};
  }
  const size_t n = Filter(logits);
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += probs_[i];
  std::vector<std::pair<int32_t, double>> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = {candidates_[i].id, probs_[i] / total};
  return out;
}

namespace {

// A candidate's logit as an unsigned key whose ascending order is the logits' descending
// order, −0 and +0 one key (they compare equal).
uint32_t DescendingKey(float logit) {
  uint32_t u;
  std::memcpy(&u, &logit, sizeof(u));
  if (u == 0x80000000u) u = 0;
  const uint32_t ascending = (u & 0x80000000u) != 0 ? ~u : u | 0x80000000u;
  return ~ascending;
}

}  // namespace

// The order of std::sort with `better` (logit descending, id ascending on equal logits) as a
// stable radix sort of the keys over candidates_, which Filter fills in id order: the same
// permutation, so the same draws, in ~1/20 of the time of a comparison sort of a 129k-token
// vocabulary (sampling sorted every candidate: ~11 ms a row, more than a batched GPU step).
void Sampler::SortMostLikelyFirst() {
  const size_t n = candidates_.size();
  if (n < 2) return;
  keys_.resize(n);
  for (size_t i = 0; i < n; ++i) keys_[i] = DescendingKey(candidates_[i].logit);
  std::array<std::array<uint32_t, 256>, 4> count{};
  for (uint32_t k : keys_) {
    for (int d = 0; d < 4; ++d) ++count[size_t(d)][(k >> (8 * d)) & 0xffu];
  }
  scratch_.resize(n);
  scratch_keys_.resize(n);
  for (int d = 0; d < 4; ++d) {
    std::array<uint32_t, 256>& c = count[size_t(d)];
    if (c[(keys_[0] >> (8 * d)) & 0xffu] == n) continue;  // every key has this digit
    uint32_t at = 0;
    for (uint32_t& v : c) {
      const uint32_t here = v;
      v = at;
      at += here;
    }
    for (size_t i = 0; i < n; ++i) {
      const uint32_t to = c[(keys_[i] >> (8 * d)) & 0xffu]++;
      scratch_[to] = candidates_[i];
      scratch_keys_[to] = keys_[i];
    }
    candidates_.swap(scratch_);
    keys_.swap(scratch_keys_);
  }
}

size_t Sampler::Filter(std::span<const float> logits) {
  const int32_t exclude = exclude_id_;
  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (int32_t(i) == exclude) continue;
    candidates_.push_back({logits[i] / options_.temperature, int32_t(i)});
  }
  // Most likely first; equal logits by id so the order is fully determined.
  auto better = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  size_t n = candidates_.size();
  if (options_.top_k > 0 && size_t(options_.top_k) < n) {
    n = size_t(options_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + n, candidates_.end(), better);
  } else {
    SortMostLikelyFirst();
  }

  // Softmax over the kept candidates, in double.
  const double max_logit = candidates_[0].logit;
  double sum = 0.0;
  std::vector<double>& p = probs_;
  p.resize(n);
  for (size_t i = 0; i < n; ++i) {
    p[i] = std::exp(double(candidates_[i].logit) - max_logit);
    sum += p[i];
  }
  for (size_t i = 0; i < n; ++i) p[i] /= sum;

  if (options_.top_p < 1.0f) {
    double mass = 0.0;
    size_t keep = 0;
    while (keep < n) {
      mass += p[keep++];
      if (mass >= options_.top_p) break;
    }
    n = std::max<size_t>(keep, 1);
  }
  if (options_.min_p > 0.0f) {
    const double floor = options_.min_p * p[0];
    size_t keep = 1;
    while (keep < n && p[keep] >= floor) ++keep;
    n = keep;
  }

  return n;
}

}  // namespace flashkv
