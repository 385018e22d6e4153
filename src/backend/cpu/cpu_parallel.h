// CpuBackend::Parallel, shared by the op_*.cpp files. The lambda is wrapped by reference
// so the std::function ThreadPool takes stays within its small-buffer storage and the
// hot path does not allocate. Must not: be included outside backend/cpu/.
#pragma once

#include <functional>

#include "backend/cpu/cpu_backend.h"

namespace flashkv {

template <typename Fn>
void CpuBackend::Parallel(size_t n, size_t grain, const Fn& fn) {
  if (n == 0) return;
  if (pool_ == nullptr || pool_->size() <= 1 || n <= grain) {
    fn(size_t{0}, n, 0);
    return;
  }
  const Fn* f = &fn;
  pool_->ParallelFor(n, grain, [f](size_t begin, size_t end, int t) { (*f)(begin, end, t); });
}

}  // namespace flashkv
