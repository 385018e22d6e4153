// When a long prefill logs its progress, and what the line says (engine_steps.cpp calls it
// after every chunk): the server log shows a busy worker and its rate rather than nothing
// until the request ends (issue 32). Pure: the caller passes the clock's readings.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "engine/worker_clock.h"

namespace flashkv {

inline constexpr std::chrono::seconds kPrefillLogInterval{5};

// Whether a prefill of `total` tokens with `done` finished, started at `t0` and last logged
// at `logged` (or never: a time before t0), logs a line at `now`: one every interval while
// unfinished, the first an interval after the start.
inline bool PrefillLogDue(WorkerClock::time_point now, WorkerClock::time_point t0,
                          WorkerClock::time_point logged, int64_t done, int64_t total) {
  return done < total && now - std::max(t0, logged) >= kPrefillLogInterval;
}

inline std::string PrefillProgressLine(int64_t done, int64_t total, double seconds, int slot) {
  return fmt::format("prefill: {}/{} tokens ({:.0f}%), {:.1f} tok/s, session {}", done, total,
                     total > 0 ? 100.0 * double(done) / double(total) : 0.0,
                     seconds > 0 ? double(done) / seconds : 0.0, slot);
}

}  // namespace flashkv
