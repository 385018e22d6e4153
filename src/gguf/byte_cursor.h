// A bounds-checked little-endian reader over a byte span, shared by the GGUF and
// safetensors parsers. Every read either succeeds inside the span or returns a Corrupt
// status naming what was being read and at which byte offset; nothing ever reads past the
// end. Must not: own the bytes or know any file format.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "util/status.h"

namespace flashkv {

static_assert(std::endian::native == std::endian::little,
              "GGUF and safetensors are little-endian; flashkv reads them in place");

class ByteCursor {
 public:
  ByteCursor(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  uint64_t remaining() const { return size_ - pos_; }

  Expected<uint8_t> U8(std::string_view what) { return Read<uint8_t>(what); }
  Expected<uint16_t> U16(std::string_view what) { return Read<uint16_t>(what); }
  Expected<uint32_t> U32(std::string_view what) { return Read<uint32_t>(what); }
  Expected<uint64_t> U64(std::string_view what) { return Read<uint64_t>(what); }

  // Advances over n bytes; fails without moving if fewer remain.
  Status Skip(uint64_t n, std::string_view what) {
    if (n > remaining())
      return Corrupt("truncated: {} needs {} bytes at offset {} but only {} remain", what, n, pos_,
                     remaining());
    pos_ += n;
    return Status::Ok();
  }

  // A GGUF string: u64 length, then that many bytes (not NUL-terminated). The view points
  // into the span.
  Expected<std::string_view> String(std::string_view what) {
    uint64_t at = pos_;
    FLASHKV_ASSIGN_OR_RETURN(uint64_t n, U64(what));
    if (n > remaining()) {
      uint64_t left = remaining();
      pos_ = at;
      return Corrupt("{} at offset {}: length {} is longer than the {} bytes left in the file",
                     what, at, n, left);
    }
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += n;
    return s;
  }

 private:
  template <typename T>
  Expected<T> Read(std::string_view what) {
    if (sizeof(T) > remaining())
      return Corrupt("truncated: {} ({} bytes) at offset {} but only {} remain", what, sizeof(T),
                     pos_, remaining());
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

}  // namespace flashkv
