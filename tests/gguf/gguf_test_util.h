// Helpers shared by the GGUF tests: a raw little-endian byte builder for hand-made
// (possibly malformed) files, and the path of the ds4-tiny fixture.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace flashkv::testing {

inline std::string Ds4TinyPath() {
  return std::string(FLASHKV_FIXTURES_DIR) + "/ds4-tiny/ds4-tiny.gguf";
}

// Appends raw GGUF primitives; no validation, so tests can build broken files.
class RawBuilder {
 public:
  RawBuilder& U32(uint32_t v) { return Raw(&v, 4); }
  RawBuilder& U64(uint64_t v) { return Raw(&v, 8); }
  RawBuilder& F32(float v) { return Raw(&v, 4); }
  RawBuilder& Str(const std::string& s) {
    U64(s.size());
    return Raw(s.data(), s.size());
  }
  RawBuilder& Raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
    return *this;
  }
  RawBuilder& PadTo(size_t align) {
    while (bytes.size() % align) bytes.push_back(0);
    return *this;
  }
  RawBuilder& Header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    Raw("GGUF", 4);
    U32(version);
    U64(n_tensors);
    return U64(n_kv);
  }
  // A tensor info record: name, dims, type, offset.
  RawBuilder& TensorInfo(const std::string& name, const std::vector<uint64_t>& ne, uint32_t type,
                         uint64_t offset) {
    Str(name);
    U32(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) U64(n);
    U32(type);
    return U64(offset);
  }
  std::vector<uint8_t> bytes;
};

}  // namespace flashkv::testing
