// ExpertCache: a model's routed experts kept in host memory, read by the device in place
// (Backend::MapHost: the GGUF mapping itself, page-locked, no second copy), with the hottest
// whole experts copied into device slots. Each layer's gate, up and down stacks become
// tables of addresses (Weight::experts): an expert's entry points into its slot when cached,
// else at its bytes in host memory. The kernels are the same either way and read the same
// bytes, so a run's logits equal the fully resident run's bit for bit — only the time
// differs. Routing frequency comes from CountRoutes after every MoE block; every
// `fold_interval` steps BeforeStep folds the counts into ExpertHeat and trades at most
// `max_swaps` cold cached experts for hot uncached ones (copy into the slot, then point the
// tables at it, all in stream order between steps, so no kernel sees a half-written slot).
// Prefill staging: a step of at least stage_min_rows rows touches nearly every expert of
// every layer, which in-place reads across PCIe serve slowly (docs/PERFORMANCE.md). Such a step
// copies each layer's uncached experts (up to stage_experts of them) into one of two staging
// buffers on an upload stream — layer l+2's while layers l+1 and l+2 compute, after layer l's
// MoE block is done with the buffer — and that layer's MoE block reads a second set of tables
// that point into the buffer (StagedStack). Same bytes, same kernels: the same logits.
// Decode gather: a step of at most gather_max_rows rows (not staged) hands its MoE blocks an
// ExpertGather (backend.h) over the first staging buffer, so the backend copies the chosen
// uncached experts with every SM at the host link's rate before their products read them.
// Pageable host (options.pageable_host): nothing is page-locked; the device reads the
// mapping at its own address through the host's page tables, so experts evicted from the
// page cache are read back from the GGUF on disk (ds4's --ssd-streaming, without a second
// copy) — the same bytes and kernels, slower where a page must come from disk.
// Must not: decide the budget (model/expert_cache_plan.h) or outlive the file's mapping.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf_file.h"
#include "model/expert_heat.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace flashkv {

struct ExpertCacheOptions {
  int64_t slots = 0;          // experts the device holds (0: every expert read from host memory)
  int fold_interval = 16;     // steps between folds of the route counts
  int max_swaps = 32;         // experts traded per fold at most
  double decay = 0.9;         // heat kept per fold
  double margin = 1.0;        // routes of heat an admission must win by
  int64_t stage_experts = 0;  // per staging buffer (0: no prefill staging)
  int stage_min_rows = 256;   // steps of at least this many rows stage (<= 0: never)
  int gather_max_rows = 16;   // steps of at most this many rows gather (needs stage_experts)
  // The device reads uncached experts from the file's shared mapping as ordinary pageable
  // memory (Backend::ReadsPageableHost) instead of page-locking it: the page cache holds
  // what host RAM can and the rest is read from disk when a copy or kernel touches it — for
  // hosts whose RAM cannot pin the routed experts (model/expert_cache_plan.h decides).
  bool pageable_host = false;
  // What the device may still take, asked after the resident weights are placed (nullopt:
  // no limit); with keep_free_bytes, the slots shrink to what is really left. The plan
  // (model/expert_cache_plan.h) counts the resident weights by their file bytes, and their
  // device copies and the backend's load-time buffers can take more (~0.5 GiB of the
  // 43-layer file on an H100): without this the cache would eat what activations and KV
  // were promised.
  std::function<std::optional<uint64_t>()> device_bytes_left;
  uint64_t keep_free_bytes = 0;
};

struct ExpertCacheStats {
  int64_t slots = 0;
  int64_t experts = 0;  // layers × experts per layer
  uint64_t slot_bytes = 0;
  uint64_t host_bytes = 0;  // routed-expert bytes read from host memory on a miss
  uint64_t hits = 0;        // routes to a cached expert (counted when folded)
  uint64_t misses = 0;      // routes to an expert read from host memory
  uint64_t miss_bytes = 0;  // host bytes those misses named (one expert's gate+up+down each)
  uint64_t swaps = 0;       // experts copied into slots after the first fill
  uint64_t swap_bytes = 0;
  uint64_t steps = 0;
  int64_t stage_experts = 0;  // per staging buffer
  uint64_t staged_steps = 0;  // steps that staged their layers' uncached experts
  uint64_t staged_bytes = 0;  // bytes those steps copied
  uint64_t gather_steps = 0;  // steps whose MoE blocks gathered their uncached experts
};

class ExpertCache {
 public:
  // Points `weights`' routed stacks (bound but not placed: BindModelWeights with
  // place_routed_experts false) at tables over `file`'s mapping and `options.slots` device
  // slots, filled with experts spread evenly over the layers (no routing seen yet). `file`
  // and `backend` must outlive the cache; the cache must outlive `weights`' use.
  static Expected<std::unique_ptr<ExpertCache>> Create(const ModelConfig& config,
                                                       ModelWeights& weights, const GgufFile& file,
                                                       Backend& backend,
                                                       const ExpertCacheOptions& options);
  ~ExpertCache();
  ExpertCache(const ExpertCache&) = delete;
  ExpertCache& operator=(const ExpertCache&) = delete;

  // Where layer l's MoE block counts its routes (Backend::CountRoutes).
  DevPtr<uint32_t> counts(int layer) const;
  int n_expert() const { return n_expert_; }

  // Before a step's first op: every fold_interval steps, Fold().
  Status BeforeStep();
  // Reads and clears the route counts, updates hits/misses and the heat, and trades experts.
  Status Fold();

  // Prefill staging, for a step of `rows` rows: whether it stages; then BeginStagedStep
  // before its first layer, and around each layer's MoE block BeforeStagedFfn (its uploads
  // must be done) and AfterStagedFfn (its buffer is free for layer l + 2). The block reads
  // StagedStack(l, 0 gate | 1 up | 2 down) instead of the model's stacks.
  bool Staging(int rows) const {
    return opt_.stage_experts > 0 && opt_.stage_min_rows > 0 && rows >= opt_.stage_min_rows;
  }
  Status BeginStagedStep();
  Status BeforeStagedFfn(int layer);
  Status AfterStagedFfn(int layer);
  const Weight& StagedStack(int layer, int i) const {
    return staged_weights_[size_t(layer)][size_t(i)];
  }

  // Decode gather: whether a step of `rows` rows that does not stage gathers; then
  // BeginGatherStep before its first layer, and Gather(l) for layer l's MoeBlockArgs.
  bool Gathering(int rows) const {
    return !staging_[0].empty() && opt_.gather_max_rows > 0 && rows <= opt_.gather_max_rows;
  }
  void BeginGatherStep() { ++stats_.gather_steps; }
  const ExpertGather* Gather(int layer) const { return &gather_[size_t(layer)]; }

  ExpertCacheStats stats() const { return stats_; }
  // Whether the experts are read pageable (nothing page-locked) rather than pinned.
  bool pageable_host() const { return opt_.pageable_host; }
  bool cached(int layer, int expert) const {
    return slot_of_[size_t(layer) * size_t(n_expert_) + size_t(expert)] >= 0;
  }

 private:
  ExpertCache(Backend& be, const ExpertCacheOptions& o, int n_layer, int n_expert)
      : be_(be),
        opt_(o),
        n_layer_(n_layer),
        n_expert_(n_expert),
        heat_(n_layer, n_expert, o.decay) {}

  // One stack of one layer: its host bytes and the device's address for them.
  struct Stack {
    const uint8_t* host = nullptr;
    const uint8_t* device = nullptr;  // MapHost's address of `host`
    uint64_t matrix_bytes = 0;
    uint64_t slot_offset = 0;  // where this part sits in a slot
  };
  size_t Index(int layer, int expert) const {
    return size_t(layer) * size_t(n_expert_) + size_t(expert);
  }
  const uint8_t* SlotAddress(int64_t slot) const;
  // Copies expert `id` into `slot` and points the host tables at it (the caller writes them).
  Status Load(ExpertId id, int64_t slot, std::vector<HostCopy>& copies);
  void PointAtHost(ExpertId id);
  Status WriteTables();
  // The staged tables from the cached set: layer l's uncached experts at positions 0, 1, …
  // of buffer l % 2 (up to stage_experts), the rest as in the main tables.
  void BuildStagedTables();
  Status UploadLayer(int layer, uint64_t after);

  Backend& be_;
  ExpertCacheOptions opt_;
  int n_layer_;
  int n_expert_;
  const uint8_t* mapped_ = nullptr;  // host range mapped for the device (UnmapHost at the end)
  // The file again, shared and read-only: the range the device pins (Create says why).
  const uint8_t* shared_ = nullptr;
  size_t shared_bytes_ = 0;
  std::vector<std::array<Stack, 3>> stacks_;  // [layer][gate, up, down]
  uint64_t slot_bytes_ = 0;
  DeviceBuffer slots_;
  DeviceBuffer tables_;  // [layer][3][expert] addresses
  DeviceBuffer counts_;  // [layer][expert] routes since the last fold
  DeviceBuffer staging_[2];
  DeviceBuffer staged_tables_;  // [layer][3][expert], as tables_
  std::vector<const uint8_t*> staged_host_;
  std::vector<std::array<Weight, 3>> staged_weights_;  // the stacks over staged_tables_
  std::vector<std::vector<int>> stage_list_;           // per layer: experts in buffer order
  std::vector<uint64_t> upload_ticket_;                // per layer, within a staged step
  DeviceBuffer gather_tables_;                         // [3][expert], rewritten per layer
  DeviceBuffer gather_plan_;
  std::vector<ExpertGather> gather_;  // per layer
  std::vector<const uint8_t*> table_host_;
  std::vector<int64_t> slot_of_;  // [layer · n_expert + expert] → slot, or -1
  std::vector<ExpertId> holder_;  // slot → expert
  std::vector<uint32_t> counts_host_;
  std::vector<uint8_t> cached_mask_;
  ExpertHeat heat_;
  ExpertCacheStats stats_;
};

}  // namespace flashkv
