// ExpertHeat: which routed experts a device cache should hold. Each (layer, expert) keeps a
// decayed count of the routes it took (heat = heat · decay + routes since the last fold), and
// PlanSwaps trades the coldest cached experts for hotter uncached ones, any layer for any
// layer (a cache slot holds one whole expert of any layer, model/expert_cache.h). An
// uncached expert must beat the coldest cached one by `margin` routes of heat, so that
// experts of equal heat never trade places back and forth.
// Must not: touch a backend (pure bookkeeping, tested on the CPU).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace flashkv {

struct ExpertId {
  int layer = 0;
  int expert = 0;
  bool operator==(const ExpertId&) const = default;
};

struct ExpertSwap {
  ExpertId evict;  // cached now, cold
  ExpertId admit;  // uncached now, hot
};

class ExpertHeat {
 public:
  ExpertHeat(int n_layer, int n_expert, double decay);

  // Folds in routes counted since the last call: counts[layer · n_expert + expert].
  void Add(std::span<const uint32_t> counts);
  double heat(ExpertId id) const { return heat_[Index(id)]; }

  // At most max_swaps trades, hottest admissions first; `cached` is [layer · n_expert +
  // expert] != 0 for experts the cache holds. Each cached expert is evicted at most once and
  // each uncached one admitted at most once.
  std::vector<ExpertSwap> PlanSwaps(std::span<const uint8_t> cached, int max_swaps,
                                    double margin) const;

  int n_layer() const { return n_layer_; }
  int n_expert() const { return n_expert_; }

 private:
  size_t Index(ExpertId id) const {
    return size_t(id.layer) * size_t(n_expert_) + size_t(id.expert);
  }
  ExpertId Id(size_t i) const {
    return ExpertId{int(i / size_t(n_expert_)), int(i % size_t(n_expert_))};
  }

  int n_layer_;
  int n_expert_;
  double decay_;
  std::vector<double> heat_;
};

}  // namespace flashkv
