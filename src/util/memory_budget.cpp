#include "util/memory_budget.h"

#include "util/host_memory.h"

namespace flashkv {

ByteCount& ByteCount::Add(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t ab = 0;
  uint64_t abc = 0;
  uint64_t sum = 0;
  if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc) ||
      __builtin_add_overflow(bytes_, abc, &sum)) {
    overflowed_ = true;
  } else {
    bytes_ = sum;
  }
  return *this;
}

Status CheckFitsInMemory(std::string_view what, const ByteCount& size, uint64_t limit_bytes) {
  if (size.overflowed()) {
    return ResourceExhausted("{} needs more than 2^64 bytes", what);
  }
  const uint64_t limit = limit_bytes != 0 ? limit_bytes : PhysicalHostMemory();
  if (limit == 0 || size.bytes() <= limit) return Status::Ok();
  return ResourceExhausted("{} needs {} MiB, more than the {} MiB of memory this machine has", what,
                           (size.bytes() + (1 << 20) - 1) >> 20, limit >> 20);
}

}  // namespace flashkv
