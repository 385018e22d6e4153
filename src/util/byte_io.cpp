#include "util/byte_io.h"

#include <cstring>

namespace flashkv {

Status StringSink::Write(const void* src, size_t n) {
  out_->append(static_cast<const char*>(src), n);
  return Status::Ok();
}

Status MemorySource::ReadAt(uint64_t offset, void* dst, size_t n) const {
  const uint64_t size = bytes_.size();
  if (offset > size || n > size - offset) {
    // The message File::ReadAt gives a file that ends early.
    return Corrupt("{}: truncated: wanted {} bytes at offset {}, the file ends at {}", name_, n,
                   offset, offset > size ? offset : size);
  }
  if (n > 0) std::memcpy(dst, bytes_.data() + offset, n);
  return Status::Ok();
}

}  // namespace flashkv
