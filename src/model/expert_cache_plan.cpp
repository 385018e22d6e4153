#include "model/expert_cache_plan.h"

#include <algorithm>

#include <fmt/format.h>

namespace flashkv {
namespace {

double Gib(uint64_t bytes) {
  return double(bytes) / double(uint64_t(1) << 30);
}

uint64_t AlignUp(uint64_t v) {
  return (v + kExpertSlotAlign - 1) / kExpertSlotAlign * kExpertSlotAlign;
}

}  // namespace

Expected<ExpertCachePlan> PlanExpertCache(const ExpertCacheInputs& in) {
  ExpertCachePlan plan;
  const uint64_t all = in.resident_bytes + in.routed_bytes;
  if (!in.force && all + in.keep_free_bytes <= in.budget_bytes) {
    plan.explanation = fmt::format(
        "every weight on the device: {:.2f} GiB of weights + {:.2f} GiB kept free <= {:.2f} GiB",
        Gib(all), Gib(in.keep_free_bytes), Gib(in.budget_bytes));
    return plan;
  }
  if (in.resident_bytes + in.keep_free_bytes > in.budget_bytes) {
    return ResourceExhausted(
        "{:.2f} GiB of weights besides the routed experts and {:.2f} GiB kept free for "
        "activations and KV do not fit the {:.2f} GiB the device may use (--gpu-memory, or what "
        "the device has free); lower --ctx or the live sessions, or use a larger GPU",
        Gib(in.resident_bytes), Gib(in.keep_free_bytes), Gib(in.budget_bytes));
  }
  if (in.slot_bytes == 0 || in.n_experts_total <= 0) {
    return InvalidArgument("expert cache: no routed experts to place");
  }
  const uint64_t left = in.budget_bytes - in.resident_bytes - in.keep_free_bytes;
  const int64_t fit = int64_t(left / in.slot_bytes);
  int64_t slots = std::min<int64_t>(fit, in.n_experts_total);
  if (in.max_slots >= 0) slots = std::min(slots, in.max_slots);
  // Two staging buffers of a layer's uncached experts (+ kStageSpare) come out of the slots
  // when they must: the slots shrink until both fit beside them.
  int64_t stage = 0;
  if (in.n_layer > 0 && in.n_expert > 0) {
    auto stage_for = [&](int64_t s) {
      const int64_t uncached = int64_t(in.n_expert) - s / in.n_layer;
      return uncached <= 0 ? int64_t(0) : std::min<int64_t>(in.n_expert, uncached + kStageSpare);
    };
    for (int i = 0; i < 3; ++i) {
      stage = stage_for(slots);
      slots = std::max<int64_t>(0, std::min(slots, fit - 2 * stage));
    }
    stage = std::min(stage, std::max<int64_t>(0, (fit - slots) / 2));
  }
  plan.offload = true;
  plan.slots = slots;
  plan.stage_experts = stage;
  plan.explanation = fmt::format(
      "routed experts in host memory ({:.2f} GiB) behind a device cache of {} of {} experts "
      "({:.1f} %, {:.2f} GiB) and 2 prefill staging buffers of {} experts ({:.2f} GiB): budget "
      "{:.2f} GiB - {:.2f} GiB resident weights - {:.2f} GiB kept free for activations and KV = "
      "{:.2f} GiB, {:.2f} MiB an expert{}",
      Gib(in.routed_bytes), slots, in.n_experts_total,
      100.0 * double(slots) / double(in.n_experts_total), Gib(uint64_t(slots) * in.slot_bytes),
      stage, Gib(2 * uint64_t(stage) * in.slot_bytes), Gib(in.budget_bytes), Gib(in.resident_bytes),
      Gib(in.keep_free_bytes), Gib(left), double(in.slot_bytes) / double(1 << 20),
      in.max_slots >= 0 && slots == in.max_slots ? " (slots capped by the caller)" : "");
  return plan;
}

Expected<ExpertHostMode> ParseExpertHostMode(std::string_view s) {
  if (s == "auto") return ExpertHostMode::kAuto;
  if (s == "pin") return ExpertHostMode::kPinned;
  if (s == "pageable") return ExpertHostMode::kPageable;
  return InvalidArgument("--expert-host: expected auto, pin or pageable, got '{}'", s);
}

Expected<ExpertHostChoice> ChooseExpertHost(const ExpertHostInputs& in) {
  const std::string no_pageable =
      "this device cannot read pageable host memory (no HMM or ATS; the NVIDIA open kernel "
      "modules give it HMM)";
  switch (in.mode) {
    case ExpertHostMode::kPinned:
      return ExpertHostChoice{false, "page-locked host memory (--expert-host pin)"};
    case ExpertHostMode::kPageable:
      if (!in.device_reads_pageable) {
        return FailedPrecondition("--expert-host pageable: {}", no_pageable);
      }
      return ExpertHostChoice{
          true,
          "the GGUF's pages through the page cache, read from disk when evicted "
          "(--expert-host pageable)"};
    case ExpertHostMode::kAuto:
      break;
  }
  // A file in tmpfs is RAM already: pinning its pages takes no more of it.
  if (in.on_memory_filesystem) {
    return ExpertHostChoice{false, "page-locked host memory (the GGUF is on a memory filesystem)"};
  }
  if (!in.available_known) {
    return ExpertHostChoice{false, "page-locked host memory (host memory unknown)"};
  }
  if (in.routed_bytes + kHostPinSpare <= in.available_bytes) {
    return ExpertHostChoice{
        false, fmt::format("page-locked host memory ({:.2f} GiB of experts + {:.0f} GiB spare <= "
                           "{:.2f} GiB available)",
                           Gib(in.routed_bytes), Gib(kHostPinSpare), Gib(in.available_bytes))};
  }
  if (!in.device_reads_pageable) {
    return ResourceExhausted(
        "the routed experts ({:.2f} GiB) left in host memory must be page-locked, but only "
        "{:.2f} GiB of host memory is available ({:.0f} GiB kept spare) and {}; free host "
        "memory, or raise --gpu-memory on a larger GPU",
        Gib(in.routed_bytes), Gib(in.available_bytes), Gib(kHostPinSpare), no_pageable);
  }
  return ExpertHostChoice{
      true, fmt::format("the GGUF's pages through the page cache, read from disk when evicted "
                        "({:.2f} GiB of experts + {:.0f} GiB spare > {:.2f} GiB available)",
                        Gib(in.routed_bytes), Gib(kHostPinSpare), Gib(in.available_bytes))};
}

namespace {

// 0 gate, 1 up, 2 down for a routed-expert stack's name; -1 for any other tensor.
int RoutedStack(std::string_view name) {
  if (!name.starts_with("blk.")) return -1;
  if (name.ends_with(".ffn_gate_exps.weight")) return 0;
  if (name.ends_with(".ffn_up_exps.weight")) return 1;
  if (name.ends_with(".ffn_down_exps.weight")) return 2;
  return -1;
}

}  // namespace

bool IsRoutedExpertTensor(std::string_view name) {
  return RoutedStack(name) >= 0;
}

GgufWeightTally TallyGgufWeights(const GgufFile& file) {
  GgufWeightTally t;
  for (const GgufTensorInfo& info : file.tensors()) {
    const int stack = RoutedStack(info.name);
    if (stack < 0) {
      t.other_bytes += info.nbytes;
      continue;
    }
    t.routed_bytes += info.nbytes;
    if (info.ne.size() >= 3 && info.ne[2] > 0) {
      uint64_t& most = t.expert_matrix_bytes[stack];
      most = std::max(most, info.nbytes / info.ne[2]);
    }
  }
  return t;
}

uint64_t ExpertSlotBytes(uint64_t gate_bytes, uint64_t up_bytes, uint64_t down_bytes) {
  return AlignUp(gate_bytes) + AlignUp(up_bytes) + AlignUp(down_bytes);
}

}  // namespace flashkv
