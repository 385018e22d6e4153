// Runtime: the objects one process needs to run a model — the thread pool, the backend
// (CPU, or CUDA when this build has it) and the loaded Model — built in dependency order
// and torn down in reverse. Used by the CLI commands (logits, run, bench) and the server.
// The model source is a GGUF path or `random:SHAPE[:LAYERS]` (model/random_model.h:
// weights generated on the backend, e.g. DeepSeek-V4-Flash's shape without its file).
// Several devices (--gpus 0,1,… or, on the CPU, expert_shards): the routed experts are
// spread over them, home (the first) runs the rest and holds the KV (docs/MULTI_GPU.md).
// Must not: hold sequences (KvState and sessions are the caller's).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/exchange.h"
#include "model/expert_cache_plan.h"
#include "model/model.h"
#include "model/random_model.h"
#include "util/thread_pool.h"

namespace flashkv {

struct RuntimeOptions {
  std::string model_path;               // GGUF path, or random:SHAPE[:LAYERS]
  std::string backend = "cpu";          // "cpu" | "cuda" | "auto" (ResolveBackend)
  int threads = 0;                      // <= 0: one per core (CPU backend and host work)
  const ModelOptions* model = nullptr;  // null: DefaultModelOptions for the file
  // CUDA device ordinals (cli/gpus_flag.h); empty: device 0. Several: expert parallel over
  // them (docs/MULTI_GPU.md), the first is home.
  std::vector<int> gpus;
  // CPU backends the routed experts are spread over (the CPU form of several --gpus, so
  // that CI runs expert parallel); <= 1: one backend. The first is home.
  int expert_shards = 0;
  // Device memory flashkv may use (--gpu-memory); 0: what the device has free. When the
  // weights do not fit it beside keep_free, the routed experts stay in host memory behind a
  // device cache of whole experts (model/expert_cache_plan.h, model/expert_cache.h).
  uint64_t gpu_memory_bytes = 0;
  // Device bytes to leave free after the weights (activations and the KV of the live
  // sessions the caller plans), from the file's config and the device; unset: none.
  std::function<uint64_t(const ModelConfig&, const Backend::MemoryInfo&)> keep_free;
  // Tests and benchmarks: the expert cache even when everything fits, at most this many
  // slots (-1: what the budget leaves).
  bool force_expert_cache = false;
  int64_t expert_cache_slots = -1;
  // Steps of at least this many rows copy each layer's uncached experts ahead of its MoE
  // block (prefill staging, model/expert_cache.h); <= 0: never, kernels read them in place.
  int expert_stage_min_rows = 256;
  // Steps of at most this many rows copy the experts they chose from host memory with every
  // SM before reading them (decode gather, model/expert_cache.h); <= 0: read in place.
  int expert_gather_max_rows = 16;
  // How the device reads the experts left in host memory: page-locked, or the file's pages
  // through the page cache when RAM cannot hold them (model/expert_cache_plan.h).
  ExpertHostMode expert_host = ExpertHostMode::kAuto;
  // Follows the weights of a GGUF model onto one backend (model_weights.h); not called for
  // random: sources or expert parallel.
  LoadProgressFn load_progress;
};

// What Open built for a random: source (for logs and benchmark records).
struct RandomModelInfo {
  RandomModelSpec spec;
  uint64_t total_bytes = 0;      // every weight
  uint64_t bytes_per_token = 0;  // weights one decoded token reads
  double seconds = 0;            // generating them, including the backend's sync
};

class Runtime {
 public:
  static Expected<std::unique_ptr<Runtime>> Open(const RuntimeOptions& options);

  ThreadPool& pool() { return pool_; }
  // The home backend: everything but the routed experts, and every session's KV.
  Backend& backend() { return *backend_; }
  // Backends the routed experts are spread over, home first; 1 without expert parallel.
  int n_devices() const { return 1 + int(more_backends_.size()); }
  Model& model() { return *model_; }
  // Set when the model source was random:..., else null.
  const RandomModelInfo* random_model() const { return random_ ? &*random_ : nullptr; }
  // The home device's memory as the budget sees it: free bytes capped by what --gpu-memory
  // leaves after everything loaded since Open began; nullopt on a host-memory backend.
  std::optional<Backend::MemoryInfo> DeviceMemoryLeft() const;
  // How the routed experts were placed (the start-up log line); empty without a budget plan.
  const std::string& placement() const { return placement_; }

  // Whether `name` can be opened by this build ("cpu" and "auto" always; "cuda" when
  // compiled in).
  static bool HasBackend(const std::string& name);
  // The backend `name` stands for: "auto" is "cuda" when this build has CUDA and a device
  // answers, else "cpu"; other names are returned as they are. `why`, when given, says in
  // a few words how "auto" chose (for the start-up log).
  static std::string ResolveBackend(const std::string& name, std::string* why = nullptr);
  // CUDA devices present: 0 in a build without CUDA or without a driver or GPU, and `why`,
  // when given, then says which.
  static int CudaDeviceCount(std::string* why = nullptr);

 private:
  explicit Runtime(int threads) : pool_(threads) {}

  // Declaration order is construction order: the backend uses the pool, the model the
  // backend.
  ThreadPool pool_;
  std::unique_ptr<Backend> backend_;
  std::vector<std::unique_ptr<Backend>> more_backends_;  // expert shards 1 … N-1
  std::unique_ptr<RowExchange> exchange_;                // between them, when N > 1
  std::unique_ptr<Model> model_;
  std::optional<RandomModelInfo> random_;
  uint64_t budget_ = 0;        // --gpu-memory, when below what the device had free
  uint64_t free_at_open_ = 0;  // the device's free bytes before the weights
  std::string placement_;
};

}  // namespace flashkv
