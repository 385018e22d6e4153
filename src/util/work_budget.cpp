#include "util/work_budget.h"

#include <time.h>

namespace flashkv {

WorkBudget::WorkBudget(std::chrono::milliseconds cpu, const std::atomic<bool>* stop)
    : cpu_(cpu), stop_(stop), start_ns_(ThreadCpuNs()), limited_(cpu.count() > 0 || stop) {}

int64_t WorkBudget::ThreadCpuNs() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

bool WorkBudget::Check() {
  next_check_ = steps_ + kStride;
  if (!ok_ || !limited_) return ok_;
  if (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) {
    ok_ = false;
    stopped_ = true;
  } else if (cpu_.count() > 0 && ThreadCpuNs() - start_ns_ > int64_t(cpu_.count()) * 1000000) {
    ok_ = false;
  }
  return ok_;
}

std::chrono::milliseconds WorkBudget::Spent() const {
  return std::chrono::milliseconds((ThreadCpuNs() - start_ns_) / 1000000);
}

Status WorkBudget::status() const {
  if (ok_) return Status::Ok();
  if (stopped_) return Cancelled("the server is stopping");
  return ResourceExhausted("the work took more than {} ms of CPU time", cpu_.count());
}

}  // namespace flashkv
