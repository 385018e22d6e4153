// Small helpers the engine worker's files share: the clock the timings use and the final
// error event of a request. Must not: hold state.
#pragma once

#include <chrono>

#include "engine/generation.h"
#include "util/status.h"

namespace flashkv {

using WorkerClock = std::chrono::steady_clock;

inline double MsSince(WorkerClock::time_point t0) {
  return std::chrono::duration<double, std::milli>(WorkerClock::now() - t0).count();
}

inline GenerationEvent ErrorEvent(Status status) {
  GenerationEvent ev;
  ev.kind = GenerationEvent::Kind::kError;
  ev.error = std::move(status);
  return ev;
}

}  // namespace flashkv
