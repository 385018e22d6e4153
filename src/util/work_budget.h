// WorkBudget: how much CPU time one piece of work may take on its thread, and a flag that
// ends it early. The server gives one to each request body (JSON parse, checks, prompt
// rendering, tokenization: work whose cost a client chooses), so a body that would take
// seconds of CPU — a 60 MB word the tokenizer's merge loop works through, say — ends with
// a clear error after a bound, and a server that is stopping (SIGTERM) does not wait for
// it. Loops that may run long on hostile input call Step() as they go; the clock is read
// only every kStride steps (it is a system call), so a step costs an add and a compare.
// Must not: know what the work is.
//
// Threading: one thread. The CPU clock is the calling thread's (CLOCK_THREAD_CPUTIME_ID):
// the budget is created, stepped and read on the thread doing the work. The stop flag may
// be set from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "util/status.h"

namespace flashkv {

class WorkBudget {
 public:
  // Steps between clock reads.
  static constexpr uint64_t kStride = 4096;

  // No limit, never stopped: Step() is always true.
  WorkBudget() = default;
  // `cpu` of this thread's CPU time from now (zero or less: no CPU limit); `stop`, when
  // given, ends the work once it reads true.
  WorkBudget(std::chrono::milliseconds cpu, const std::atomic<bool>* stop);

  // Counts `steps` of work; false once the budget is spent or the flag is set (and from
  // then on). Checks them every kStride steps, so a caller overshoots by at most that.
  bool Step(uint64_t steps = 1) {
    if (!ok_) return false;
    steps_ += steps;
    if (steps_ < next_check_) return true;
    return Check();
  }
  // Checks now, whatever the step count.
  bool Check();

  bool ok() const { return ok_; }
  // Ok, kResourceExhausted "... more than N ms of CPU time" or kCancelled "... stopping".
  Status status() const;
  std::chrono::milliseconds cpu_limit() const { return cpu_; }
  // CPU time this thread spent since the budget was made.
  std::chrono::milliseconds Spent() const;

 private:
  static int64_t ThreadCpuNs();

  std::chrono::milliseconds cpu_{0};
  const std::atomic<bool>* stop_ = nullptr;
  int64_t start_ns_ = 0;
  uint64_t steps_ = 0;
  uint64_t next_check_ = kStride;
  bool ok_ = true;
  bool stopped_ = false;  // why !ok_: the flag (else the CPU limit)
  bool limited_ = false;  // a CPU limit or a flag to check at all
};

}  // namespace flashkv
