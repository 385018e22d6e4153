#include "fast_spread.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "util/logit_distance.h"
#include "util/thread_pool.h"

namespace flashkv {
namespace {

int Argmax(const float* x, int n) {
  return int(std::max_element(x, x + n) - x);
}

Expected<std::vector<float>> AllLogits(Model& m, const std::vector<int32_t>& prompt,
                                       double* seconds) {
  std::vector<float> logits(prompt.size() * size_t(m.config().n_vocab));
  FLASHKV_ASSIGN_OR_RETURN(KvState st, m.NewState(int(prompt.size())));
  const auto t0 = std::chrono::steady_clock::now();
  FLASHKV_RETURN_IF_ERROR(m.Forward(prompt, st, LogitsFor::kAll, logits.data()));
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return logits;
}

}  // namespace

Status RunFastSpread(CudaBackend& be, Model& model, const RandomModelSpec& spec,
                     const FastSpreadOptions& o, nlohmann::json& out) {
  const int vocab = model.config().n_vocab;
  const int n = o.prompt_tokens;
  std::mt19937 rng(11);
  std::vector<int32_t> prompt(static_cast<size_t>(n));
  for (int32_t& t : prompt) t = int32_t(rng() % uint32_t(vocab));
  const int before = be.fast_terms();
  struct Run {
    const char* name;
    std::vector<float> logits;
    double seconds = 0;
  };
  std::vector<Run> runs;
  for (const auto& [name, terms] : {std::pair{"cuda exact", 0}, std::pair{"cuda fast", 2},
                                    std::pair{"cuda fast, one TF32 term", 1}}) {
    be.SetFastTerms(terms);
    Run r{name, {}, 0};
    FLASHKV_ASSIGN_OR_RETURN(r.logits, AllLogits(model, prompt, &r.seconds));
    runs.push_back(std::move(r));
  }
  be.SetFastTerms(before);
  {
    const int threads =
        o.cpu_threads > 0 ? o.cpu_threads : int(std::max(1u, std::thread::hardware_concurrency()));
    ThreadPool pool(threads);
    CpuBackend cpu(&pool);
    const ModelOptions options{NumericsMode::kOfficial, ActQuantMode::kQ8};
    RandomWeights info;
    const auto t0 = std::chrono::steady_clock::now();
    FLASHKV_ASSIGN_OR_RETURN(std::unique_ptr<Model> cm,
                             MakeRandomModel(spec, cpu, &options, &info));
    std::printf("fast spread: %s generated on the CPU (%d threads) in %.1f s\n",
                spec.Describe().c_str(), threads,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    Run r{"cpu exact", {}, 0};
    FLASHKV_ASSIGN_OR_RETURN(r.logits, AllLogits(*cm, prompt, &r.seconds));
    runs.push_back(std::move(r));
  }
  nlohmann::json rows = nlohmann::json::array();
  const std::vector<float>& ref = runs[0].logits;
  std::printf("fast spread over %d teacher-forced positions (reference: %s):\n", n, runs[0].name);
  for (size_t i = 1; i < runs.size(); ++i) {
    int agree = 0;
    double kl = 0;
    for (int p = 0; p < n; ++p) {
      const float* e = &ref[size_t(p) * vocab];
      const float* x = &runs[i].logits[size_t(p) * vocab];
      agree += Argmax(e, vocab) == Argmax(x, vocab);
      kl += SoftmaxKl(e, x, vocab);
    }
    kl /= n;
    const double nmse = Nmse(ref.data(), runs[i].logits.data(), ref.size());
    std::printf("  %-26s top-1 %d/%d (%.1f %%), mean KL %.3g, logits NMSE %.3g (%.2f s)\n",
                runs[i].name, agree, n, 100.0 * agree / n, kl, nmse, runs[i].seconds);
    rows.push_back({{"run", runs[i].name},
                    {"top1", agree},
                    {"positions", n},
                    {"mean_kl", kl},
                    {"nmse", nmse},
                    {"seconds", runs[i].seconds}});
  }
  out["fast_spread"] = rows;
  return Status::Ok();
}

}  // namespace flashkv
