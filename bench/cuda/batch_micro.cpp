#include "batch_micro.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <random>
#include <span>
#include <string>

#include "decode_micro.h"
#include "util/thread_pool.h"

namespace flashkv {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<int32_t> SessionPrompt(int session, int n, int vocab) {
  std::mt19937 rng(uint32_t(1000 + session));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = int32_t(rng() % uint32_t(vocab));
  return t;
}

int32_t ArgmaxRow(const float* v, int n) {
  return int32_t(std::max_element(v, v + n) - v);
}

struct SavedState {
  std::optional<KvState> state;  // KvState has no empty state
  int n_tokens = 0;
  std::vector<std::vector<float>> host;
  std::vector<HostCopy> copies;
  std::vector<float> first_logits;
};

}  // namespace

Status RunBatchMicro(CudaBackend& be, Model& model, const BatchMicroOptions& o,
                     nlohmann::json& out) {
  const int V = model.config().n_vocab;
  const int max_r = *std::max_element(o.batches.begin(), o.batches.end());
  const int steps = o.warmup_steps + std::max(o.decode_steps, o.profile_steps) + 1;
  std::vector<SavedState> ss(static_cast<size_t>(max_r));
  const auto p0 = Clock::now();
  for (int i = 0; i < max_r; ++i) {
    SavedState& s = ss[size_t(i)];
    s.n_tokens = o.frontier + 8 * i;
    FLASHKV_ASSIGN_OR_RETURN(KvState st, model.NewState(s.n_tokens + steps));
    s.state.emplace(std::move(st));
    const auto prompt = SessionPrompt(i, s.n_tokens, V);
    s.first_logits.resize(size_t(V));
    FLASHKV_RETURN_IF_ERROR(
        model.Forward(prompt, *s.state, LogitsFor::kLast, s.first_logits.data(), o.chunk));
    s.copies = Sections(*s.state, s.host);
    FLASHKV_RETURN_IF_ERROR(be.ReadMany(s.copies.data(), s.copies.size()));
  }
  std::printf("batch-micro: %d sessions prefilled to %d … %d in %.1f s\n", max_r, o.frontier,
              o.frontier + 8 * (max_r - 1),
              std::chrono::duration<double>(Clock::now() - p0).count());

  nlohmann::json rows = nlohmann::json::array();
  std::vector<int32_t> alone_tokens;  // session 0's greedy tokens in the first batch size
  ThreadPool pick(8);                 // Engine::kMaxPickThreads
  for (int R : o.batches) {
    auto restore = [&]() -> Status {
      for (int i = 0; i < R; ++i) {
        SavedState& s = ss[size_t(i)];
        FLASHKV_RETURN_IF_ERROR(s.state->SetTokenCount(s.n_tokens));
        FLASHKV_RETURN_IF_ERROR(be.WriteMany(s.copies.data(), s.copies.size()));
      }
      return Status::Ok();
    };
    // As the engine keeps them (engine/engine.h PinLogits): each row's logits read straight
    // into page-locked memory, and the rows' tokens picked side by side (PickDecodingRows).
    std::vector<float> logits(size_t(R) * V);
    const bool pinned =
        o.pinned_logits && be.PinHost(logits.data(), logits.size() * sizeof(float)).ok();
    struct Unpin {  // before `logits` goes, on every path out
      Backend& be;
      void* p;
      ~Unpin() {
        if (p != nullptr) be.UnpinHost(p);
      }
    } unpin{be, pinned ? logits.data() : nullptr};
    std::vector<int32_t> next(static_cast<size_t>(R));
    std::vector<SessionChunk> chunks(static_cast<size_t>(R));
    // n greedy batched steps from the restored states; session 0's tokens when asked.
    auto decode = [&](int n, std::vector<int32_t>* tokens0) -> Status {
      for (int i = 0; i < R; ++i) {
        std::copy(ss[size_t(i)].first_logits.begin(), ss[size_t(i)].first_logits.end(),
                  logits.begin() + size_t(i) * V);
      }
      for (int step = 0; step < n; ++step) {
        pick.ParallelFor(size_t(R), 1, [&](size_t begin, size_t end, int) {
          for (size_t i = begin; i < end; ++i) next[i] = ArgmaxRow(logits.data() + i * V, V);
        });
        for (int i = 0; i < R; ++i) {
          chunks[size_t(i)] =
              SessionChunk{std::span<const int32_t>(&next[size_t(i)], 1), &*ss[size_t(i)].state,
                           LogitsFor::kLast, logits.data() + size_t(i) * V};
        }
        if (tokens0 != nullptr) tokens0->push_back(next[0]);
        FLASHKV_RETURN_IF_ERROR(model.ForwardBatch(chunks));
      }
      return Status::Ok();
    };
    FLASHKV_RETURN_IF_ERROR(restore());
    FLASHKV_RETURN_IF_ERROR(decode(o.warmup_steps, nullptr));
    FLASHKV_RETURN_IF_ERROR(restore());
    FLASHKV_RETURN_IF_ERROR(be.Synchronize());
    std::vector<int32_t> tokens0;
    // How the timed steps were issued: graph replays (a step's launch sequence seen before)
    // or launches one by one (a new sequence: each step's shapes differ, or first seen).
    const uint64_t graphs0 = be.graph_launches(), direct0 = be.direct_launches();
    const auto a = Clock::now();
    FLASHKV_RETURN_IF_ERROR(decode(o.decode_steps, &tokens0));
    const double step_ms =
        1e3 * std::chrono::duration<double>(Clock::now() - a).count() / o.decode_steps;
    const uint64_t graph_replays = be.graph_launches() - graphs0;
    const uint64_t direct = be.direct_launches() - direct0;
    if (alone_tokens.empty()) alone_tokens = tokens0;
    const bool same = tokens0 == alone_tokens;

    FLASHKV_RETURN_IF_ERROR(restore());
    FLASHKV_RETURN_IF_ERROR(be.Synchronize());
    be.SetProfiling(true);
    be.ProfileTimes(true);
    const auto b = Clock::now();
    FLASHKV_RETURN_IF_ERROR(decode(o.profile_steps, nullptr));
    FLASHKV_RETURN_IF_ERROR(be.Synchronize());
    const double wall_ms =
        1e3 * std::chrono::duration<double>(Clock::now() - b).count() / o.profile_steps;
    const std::vector<CudaKernelTime> prof = be.ProfileTimes(true);
    be.SetProfiling(false);

    const double per = 1.0 / o.profile_steps;
    double launches = 0, ms = 0;
    for (const CudaKernelTime& k : prof) {
      launches += double(k.launches);
      ms += k.ms;
    }
    std::printf(
        "\nbatch %d: step %.2f ms, %.1f tok/s aggregate (graphs on); session 0's tokens %s; "
        "profiled step: %.0f kernels, %.2f ms of kernel time, %.2f ms wall\n",
        R, step_ms, 1e3 * R / step_ms, same ? "the same as the first batch's" : "DIFFER",
        launches * per, ms * per, wall_ms);
    std::printf("  timed steps: %llu graph launches, %.0f kernels a step launched one by one\n",
                (unsigned long long)graph_replays, double(direct) / o.decode_steps);
    std::printf("  %10s %8s %7s %9s  %s\n", "us/step", "launches", "share", "GB/s", "kernel");
    nlohmann::json kernels = nlohmann::json::array();
    for (const CudaKernelTime& k : prof) {
      const double us = 1e3 * k.ms * per;
      const double gbs = k.bytes > 0 ? double(k.bytes) / (k.ms * 1e-3) / 1e9 : 0.0;
      const std::string name = ShortName(k.name);
      std::printf("  %10.1f %8.1f %6.1f%% %9.0f  %s\n", us, double(k.launches) * per,
                  ms > 0 ? 100.0 * k.ms / ms : 0.0, gbs, name.c_str());
      kernels.push_back({{"kernel", name},
                         {"us_per_step", us},
                         {"launches_per_step", double(k.launches) * per},
                         {"gb_s", gbs}});
    }
    std::fflush(stdout);
    rows.push_back({{"batch", R},
                    {"step_ms", step_ms},
                    {"tok_s", 1e3 * R / step_ms},
                    {"session0_same", same},
                    {"kernels_per_step", launches * per},
                    {"kernel_ms_per_step", ms * per},
                    {"profiled_wall_ms", wall_ms},
                    {"timed_graph_launches", graph_replays},
                    {"timed_direct_kernels_per_step", double(direct) / o.decode_steps},
                    {"logits_pinned", pinned},
                    {"kernels", kernels}});
  }
  out["batch_micro"] = rows;
  return Status::Ok();
}

}  // namespace flashkv
