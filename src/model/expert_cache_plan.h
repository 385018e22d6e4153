// Where the routed experts go under a device-memory budget (--gpu-memory): all on the device
// when the weights fit beside what must stay free (activations, the KV the caller plans
// for), else in host memory behind a device cache of whole experts (model/expert_cache.h),
// which takes what the budget leaves after everything else. The explanation is the
// arithmetic, for the start-up log, so a user can see why a number came out as it did.
// Must not: allocate or touch a backend (pure arithmetic, tested on the CPU).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "gguf/gguf_file.h"
#include "util/status.h"

namespace flashkv {

// What the planner weighs, in bytes.
struct ExpertCacheInputs {
  uint64_t budget_bytes = 0;     // device memory flashkv may use now (free, or --gpu-memory)
  uint64_t resident_bytes = 0;   // every weight but the routed experts
  uint64_t routed_bytes = 0;     // every layer's routed-expert stacks
  uint64_t slot_bytes = 0;       // one cache slot: one expert's gate, up and down (aligned)
  uint64_t keep_free_bytes = 0;  // activations and KV, left free after the weights
  int64_t n_experts_total = 0;   // layers × experts per layer
  bool force = false;            // offload even when everything fits (tests, benchmarks)
  int64_t max_slots = -1;        // >= 0: at most this many slots (tests, benchmarks)
  // Prefill staging (model/expert_cache.h): two buffers that take a layer's uncached experts
  // ahead of its MoE block. 0 layers: none.
  int n_layer = 0;
  int n_expert = 0;
};

struct ExpertCachePlan {
  bool offload = false;  // false: every weight on the device, as without a budget
  int64_t slots = 0;     // offload: experts the device holds (0..n_experts_total)
  // offload: experts each of the two staging buffers holds (a layer's uncached experts, and
  // kStageSpare more for the layers the heat leaves with more than their share); 0: none.
  int64_t stage_experts = 0;
  std::string explanation;
};

// kResourceExhausted, naming the numbers, when not even the resident weights fit beside
// keep_free_bytes.
Expected<ExpertCachePlan> PlanExpertCache(const ExpertCacheInputs& in);

// How the device reads the routed experts left in host memory (--expert-host): page-locked
// and mapped (kPinned: the fastest reads, but every expert byte must sit in RAM), or the
// file's own pages through the page cache (kPageable: what RAM cannot hold is read back from
// disk; needs a device that reads pageable memory, Backend::ReadsPageableHost). kAuto pins
// when host memory holds the experts with kHostPinSpare to spare, else reads them pageable.
enum class ExpertHostMode { kAuto, kPinned, kPageable };
// "auto" | "pin" | "pageable"; kInvalidArgument naming the value otherwise.
Expected<ExpertHostMode> ParseExpertHostMode(std::string_view s);
inline constexpr uint64_t kHostPinSpare = uint64_t(4) << 30;

struct ExpertHostInputs {
  ExpertHostMode mode = ExpertHostMode::kAuto;
  uint64_t routed_bytes = 0;          // the experts the device reads from host memory
  bool available_known = false;       // MemAvailable could be read (util/host_memory.h)
  uint64_t available_bytes = 0;       // MemAvailable
  bool on_memory_filesystem = false;  // the GGUF is in tmpfs/ramfs: its pages are RAM already
  bool device_reads_pageable = false;
};
struct ExpertHostChoice {
  bool pageable = false;
  std::string explanation;  // for the start-up log: which way and why
};
// kFailedPrecondition for kPageable on a device that cannot read pageable memory;
// kResourceExhausted when kAuto finds too little RAM to pin and no pageable reads.
Expected<ExpertHostChoice> ChooseExpertHost(const ExpertHostInputs& in);

// The routed-expert tensors of a DS4 GGUF (blk.N.ffn_{gate,up,down}_exps.weight) and the rest,
// in bytes, from the tensor table alone (no weight byte is read).
struct GgufWeightTally {
  uint64_t routed_bytes = 0;
  uint64_t other_bytes = 0;
  // The largest one-expert matrix of the gate, up and down stacks (for ExpertSlotBytes).
  uint64_t expert_matrix_bytes[3] = {0, 0, 0};
};
GgufWeightTally TallyGgufWeights(const GgufFile& file);
bool IsRoutedExpertTensor(std::string_view name);

// Bytes of one cache slot for these stack sizes (each part aligned to 256 bytes, where the
// kernels' 16-byte loads need at least 16).
uint64_t ExpertSlotBytes(uint64_t gate_bytes, uint64_t up_bytes, uint64_t down_bytes);
inline constexpr uint64_t kExpertSlotAlign = 256;
inline constexpr int64_t kStageSpare = 16;

}  // namespace flashkv
