// Forward-pass throughput on the CPU backend: prefill and decode tokens/s of a model
// (default: the ds4-tiny fixture; FLASHKV_BENCH_MODEL=path overrides), per numerics mode
// and thread count. Figures go to docs/PERFORMANCE.md ("Forward pass (CPU)").
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <spdlog/spdlog.h>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"

namespace flashkv {
namespace {

std::string ModelPath() {
  const char* env = std::getenv("FLASHKV_BENCH_MODEL");
  return env ? env : std::string(FLASHKV_FIXTURES_DIR) + "/ds4-tiny/ds4-tiny.gguf";
}

// range(0): threads; range(1): 0 = official+q8, 1 = official+off, 2 = hf+off.
ModelOptions OptionsFor(int64_t mode) {
  switch (mode) {
    case 1:
      return {NumericsMode::kOfficial, ActQuantMode::kOff};
    case 2:
      return {NumericsMode::kHf, ActQuantMode::kOff};
    default:
      return {NumericsMode::kOfficial, ActQuantMode::kQ8};
  }
}

struct Setup {
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<CpuBackend> backend;
  std::unique_ptr<Model> model;
};

bool Load(benchmark::State& state, Setup* s) {
  const ModelOptions opts = OptionsFor(state.range(1));
  s->pool = std::make_unique<ThreadPool>(int(state.range(0)));
  s->backend = std::make_unique<CpuBackend>(s->pool.get());
  auto model = Model::Load(ModelPath(), *s->backend, &opts);
  if (!model.ok()) {
    state.SkipWithError(model.status().ToString().c_str());
    return false;
  }
  s->model = std::move(*model);
  return true;
}

std::vector<int32_t> Tokens(int n, int vocab) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 389 + 17) % vocab;
  return t;
}

// A 512-token prompt in chunks of 256, logits for the last token only.
void BM_Prefill(benchmark::State& state) {
  Setup s;
  if (!Load(state, &s)) return;
  const int n = 512;
  const auto prompt = Tokens(n, s.model->config().n_vocab);
  std::vector<float> logits(s.model->config().n_vocab);
  auto kv = s.model->NewState(n);
  for (auto _ : state) {
    (void)kv->Clear();
    Status st = s.model->Forward(prompt, *kv, LogitsFor::kLast, logits.data(), 256);
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
  }
  state.counters["tok/s"] =
      benchmark::Counter(double(n) * state.iterations(), benchmark::Counter::kIsRate);
}

// One token at a time after a 512-token prompt (positions 512..1023, then start again).
void BM_Decode(benchmark::State& state) {
  Setup s;
  if (!Load(state, &s)) return;
  const int prompt_len = 512, ctx = 1024;
  const auto prompt = Tokens(prompt_len, s.model->config().n_vocab);
  std::vector<float> logits(s.model->config().n_vocab);
  auto kv = s.model->NewState(ctx);
  int32_t next = 1;
  for (auto _ : state) {
    if (kv->n_tokens() == 0 || kv->n_tokens() == ctx) {
      state.PauseTiming();
      (void)kv->Clear();
      (void)s.model->Forward(prompt, *kv, LogitsFor::kNone, nullptr, 256);
      state.ResumeTiming();
    }
    Status st = s.model->Forward({&next, 1}, *kv, LogitsFor::kLast, logits.data());
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
    next = (next * 31 + 7) % s.model->config().n_vocab;
  }
  state.counters["tok/s"] =
      benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}

void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"threads", "mode"});
  for (int threads : {1, 2}) {
    for (int mode : {0, 1, 2}) b->Args({threads, mode});
  }
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_Prefill)->Apply(Args);
BENCHMARK(BM_Decode)->Apply(Args);

}  // namespace
}  // namespace flashkv

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);  // no per-load info lines in the table
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
