#include "model/expert_heat.h"

#include <algorithm>

namespace flashkv {

ExpertHeat::ExpertHeat(int n_layer, int n_expert, double decay)
    : n_layer_(std::max(n_layer, 0)),
      n_expert_(std::max(n_expert, 1)),
      decay_(std::clamp(decay, 0.0, 1.0)),
      heat_(size_t(n_layer_) * size_t(n_expert_), 0.0) {}

void ExpertHeat::Add(std::span<const uint32_t> counts) {
  const size_t n = std::min(counts.size(), heat_.size());
  for (size_t i = 0; i < heat_.size(); ++i) {
    heat_[i] = heat_[i] * decay_ + (i < n ? double(counts[i]) : 0.0);
  }
}

std::vector<ExpertSwap> ExpertHeat::PlanSwaps(std::span<const uint8_t> cached, int max_swaps,
                                              double margin) const {
  std::vector<ExpertSwap> swaps;
  if (max_swaps <= 0 || cached.size() != heat_.size()) return swaps;
  std::vector<size_t> in, out;
  for (size_t i = 0; i < heat_.size(); ++i) (cached[i] ? in : out).push_back(i);
  // Ties break by index, so a plan is a pure function of the heat and the cached set.
  auto colder = [&](size_t a, size_t b) {
    return heat_[a] != heat_[b] ? heat_[a] < heat_[b] : a < b;
  };
  auto hotter = [&](size_t a, size_t b) {
    return heat_[a] != heat_[b] ? heat_[a] > heat_[b] : a < b;
  };
  const size_t n = std::min({in.size(), out.size(), size_t(max_swaps)});
  std::partial_sort(in.begin(), in.begin() + n, in.end(), colder);
  std::partial_sort(out.begin(), out.begin() + n, out.end(), hotter);
  for (size_t j = 0; j < n; ++j) {
    if (heat_[out[j]] <= heat_[in[j]] + margin) break;
    swaps.push_back(ExpertSwap{Id(in[j]), Id(out[j])});
  }
  return swaps;
}

}  // namespace flashkv
