#include "util/memory_budget.h"

#include <unistd.h>

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

uint64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return uint64_t(pages) * uint64_t(page);
}

Status CheckFitsInMemory(std::string_view what, const ByteCount& size, uint64_t limit_bytes) {
  if (size.overflowed()) {
    return ResourceExhausted("{} needs more than 2^64 bytes", what);
  }
  const uint64_t limit = limit_bytes != 0 ? limit_bytes : PhysicalMemoryBytes();
  if (limit == 0 || size.bytes() <= limit) return Status::Ok();
  return ResourceExhausted("{} needs {} MiB, more than the {} MiB of memory this machine has", what,
                           (size.bytes() + (1 << 20) - 1) >> 20, limit >> 20);
}

}  // namespace flashkv
