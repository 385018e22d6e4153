// Sizes computed from untrusted numbers (a model file's hyperparameters, a requested
// context) and checked against the machine before anything is allocated: ByteCount adds
// element counts × element sizes in 64 bits and remembers an overflow instead of wrapping,
// and CheckFitsInMemory refuses a total above the machine's physical memory with the
// numbers, so a hostile or mistaken file gets an error instead of swapping the machine to
// death or overflowing a size. Must not: allocate or know what is being sized.
#pragma once

#include <cstdint>
#include <string_view>

#include "util/status.h"

namespace flashkv {

class ByteCount {
 public:
  // += a · b · c (elements × floats per element × bytes per float, say).
  ByteCount& Add(uint64_t a, uint64_t b, uint64_t c = 1);
  bool overflowed() const { return overflowed_; }
  uint64_t bytes() const { return bytes_; }  // meaningless once overflowed

 private:
  uint64_t bytes_ = 0;
  bool overflowed_ = false;
};

// ResourceExhausted "`what` needs N MiB, more than the M MiB of memory this machine has"
// (or "... needs more than 2^64 bytes"), using `limit_bytes` (PhysicalHostMemory() when 0).
Status CheckFitsInMemory(std::string_view what, const ByteCount& size, uint64_t limit_bytes = 0);

}  // namespace flashkv
