#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

namespace flashkv {

Sampler::Sampler(const SamplerOptions& options, int32_t exclude_id)
    : options_(options), exclude_id_(exclude_id), rng_(options.seed) {}

int32_t Sampler::Greedy(std::span<const float> logits, int32_t exclude) {
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
    std::sort(candidates_.begin(), candidates_.end(), better);
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

  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += p[i];
  double r = Uniform() * total;
  for (size_t i = 0; i < n; ++i) {
    r -= p[i];
    if (r < 0.0) return candidates_[i].id;
  }
  return candidates_[n - 1].id;
}

}  // namespace flashkv
