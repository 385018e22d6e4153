// How many live sessions the device holds and how much host RAM the snapshot tier gets,
// when the flags say "auto": the live pool is sized from the device memory left after the
// weights (each session costs its whole --ctx of KV up front, KvState::AllocatedBytes),
// minus a reserve for the forward pass's activations; the RAM tier from the host memory the
// kernel says is available. The explanation is the arithmetic, for the start-up log, so a
// user can see why a number came out as it did. Must not: allocate anything.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "util/status.h"

namespace flashkv {

struct LivePoolPlan {
  int sessions = 0;
  std::string explanation;
};

struct LivePoolInputs {
  // The backend's own memory now (weights loaded); nullopt when it allocates host memory
  // (the CPU backend), where the pool keeps `host_sessions`.
  std::optional<Backend::MemoryInfo> device;
  uint64_t session_bytes = 0;  // KV of one session at --ctx
  int ctx = 0;
  int prefill_chunk = 2048;
  int host_sessions = 4;
  int max_sessions = 256;
};

// Bytes kept free for activations and scratch: 2 GiB plus 1 MiB per prefill-chunk token
// (Flash's widest chunk buffers are ~0.6 MiB per token) or 5 % of the device, the larger.
uint64_t ActivationReserveBytes(const Backend::MemoryInfo& device, int prefill_chunk);

// kResourceExhausted, naming the numbers, when not even one session fits.
Expected<LivePoolPlan> PlanLivePool(const LivePoolInputs& in);

// The RAM tier's default budget: a quarter of the available host memory, at most 64 GiB
// (the rest stays for the page cache the disk tier reads through, and for the model's own
// mapped file on the CPU backend).
uint64_t DefaultRamBudgetBytes(uint64_t available_host_bytes);

}  // namespace flashkv
