// Picking a token from one logits row of DS4's vocabulary (129,280 entries) on the host: greedy
// and sampled (temperature, top-p). A batched decode step picks once per row, so this is
// host time every step pays per session. Figures: docs/PERFORMANCE.md ("Sampling on the host").
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "engine/sampler.h"

namespace flashkv {
namespace {

constexpr size_t kVocab = 129280;

std::vector<float> Logits() {
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> l(kVocab);
  for (float& x : l) x = d(rng);
  return l;
}

// range(0): temperature ×100 (0: greedy); range(1): top_p ×100.
void BM_Sample(benchmark::State& state) {
  const std::vector<float> logits = Logits();
  Sampler s(
      SamplerOptions{float(state.range(0)) / 100.0f, 0, float(state.range(1)) / 100.0f, 0.0f, 1});
  for (auto _ : state) benchmark::DoNotOptimize(s.Sample(logits));
}
BENCHMARK(BM_Sample)
    ->Args({0, 100})
    ->Args({100, 100})
    ->Args({100, 95})
    ->Args({70, 90})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace flashkv

BENCHMARK_MAIN();
