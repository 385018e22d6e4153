#include "engine/memory_plan.h"

#include <algorithm>

#include <fmt/format.h>

namespace flashkv {
namespace {

double Gib(uint64_t bytes) {
  return double(bytes) / double(uint64_t(1) << 30);
}

}  // namespace

uint64_t ActivationReserveBytes(const Backend::MemoryInfo& device, int prefill_chunk) {
  const uint64_t by_chunk =
      (uint64_t(2) << 30) + uint64_t(std::max(prefill_chunk, 1)) * (uint64_t(1) << 20);
  return std::max(by_chunk, device.total_bytes / 20);
}

Expected<LivePoolPlan> PlanLivePool(const LivePoolInputs& in) {
  LivePoolPlan plan;
  if (!in.device) {
    plan.sessions = in.host_sessions;
    plan.explanation = fmt::format(
        "{} live sessions (the backend's memory is the host's; --kv-live-sessions N to change)",
        plan.sessions);
    return plan;
  }
  const uint64_t free_bytes = in.device->free_bytes;
  const uint64_t reserve = ActivationReserveBytes(*in.device, in.prefill_chunk);
  const uint64_t per = std::max<uint64_t>(in.session_bytes, 1);
  const uint64_t usable = free_bytes > reserve ? free_bytes - reserve : 0;
  const uint64_t fits = usable / per;
  if (fits == 0) {
    return ResourceExhausted(
        "one live session at --ctx {} needs {:.2f} GiB of KV, but the device has {:.2f} GiB free "
        "of {:.2f} GiB after loading the weights and {:.2f} GiB must stay free for activations; "
        "lower --ctx, --prefill-chunk or --prefill-chunk-solo",
        in.ctx, Gib(per), Gib(free_bytes), Gib(in.device->total_bytes), Gib(reserve));
  }
  plan.sessions = int(std::min<uint64_t>(fits, uint64_t(std::max(in.max_sessions, 1))));
  plan.explanation = fmt::format(
      "{} live sessions: {:.2f} GiB free of {:.2f} GiB after the weights, {:.2f} GiB kept for "
      "activations, {:.3f} GiB of KV per session at --ctx {} -> {} fit{}",
      plan.sessions, Gib(free_bytes), Gib(in.device->total_bytes), Gib(reserve), Gib(per), in.ctx,
      fits, uint64_t(plan.sessions) < fits ? fmt::format(" (capped at {})", plan.sessions) : "");
  return plan;
}

uint64_t DefaultRamBudgetBytes(uint64_t available_host_bytes) {
  return std::min(available_host_bytes / 4, uint64_t(64) << 30);
}

}  // namespace flashkv
