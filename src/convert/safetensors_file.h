// One `.safetensors` file opened for reading: the 8-byte header length, the JSON header
// (dtype, shape, data_offsets per tensor, optional `__metadata__`) validated up front, the
// tensor bytes left in a read-only mmap. Used only by `flashkv convert`.
// Must not: know model structure or GGUF names (convert_plan does the mapping).
//
// Validation: the header fits in the file, every entry is well-formed, every
// data_offsets range lies inside the data section and has exactly product(shape) x element
// size bytes, and no two ranges overlap. Anything else is a Corrupt/Unsupported status that
// names the tensor and the problem.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/mapped_file.h"
#include "util/status.h"

namespace flashkv {

// The safetensors dtypes flashkv converts from. F8_E8M0 (power-of-two scales) appears in
// DeepSeek's FP8 checkpoints next to F8_E4M3 weights; I8 (or U8) holds their FP4-packed
// routed experts, two E2M1 codes a byte (hf_dequant.h).
enum class StDType { kF32, kF16, kBF16, kI64, kI32, kI8, kU8, kF8_E4M3, kF8_E8M0 };

std::string_view StDTypeName(StDType t);  // the safetensors spelling: "F32", "BF16", ...
uint64_t StDTypeSize(StDType t);

struct SafetensorsTensor {
  std::string name;
  StDType dtype;
  std::vector<uint64_t> shape;  // PyTorch order: shape[0] outermost, e.g. [out, in]
  uint64_t nbytes;
  const uint8_t* data;  // into the mapping; may be unaligned for its dtype

  uint64_t numel() const;
  // The values as f32: exact for F32/F16/BF16/F8_*; an error for integer dtypes.
  Expected<std::vector<float>> ToF32() const;
  // The values as int64: I64/I32 only.
  Expected<std::vector<int64_t>> ToI64() const;
  // A typed view without copying. Fails unless `dtype` matches T's dtype (float: F32,
  // int64_t: I64, int32_t: I32, uint16_t: F16/BF16) and the data is aligned for T.
  template <typename T>
  Expected<std::span<const T>> View() const;
};

class SafetensorsFile {
 public:
  static Expected<SafetensorsFile> Open(const std::string& path);
  static Expected<SafetensorsFile> FromBytes(std::vector<uint8_t> bytes);

  SafetensorsFile(SafetensorsFile&&) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // Sorted by name.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* Find(std::string_view name) const;
  // `__metadata__` (string to string), empty when absent.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  Status Parse();
  Status ParseHeader();

  MappedFile map_;
  std::vector<uint8_t> owned_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// ---- implementation of the template ----

namespace safetensors_internal {
template <typename T>
bool DTypeMatches(StDType d);
template <>
inline bool DTypeMatches<float>(StDType d) {
  return d == StDType::kF32;
}
template <>
inline bool DTypeMatches<int64_t>(StDType d) {
  return d == StDType::kI64;
}
template <>
inline bool DTypeMatches<int32_t>(StDType d) {
  return d == StDType::kI32;
}
template <>
inline bool DTypeMatches<uint16_t>(StDType d) {
  return d == StDType::kF16 || d == StDType::kBF16;
}
template <>
inline bool DTypeMatches<uint8_t>(StDType d) {
  return d == StDType::kF8_E4M3 || d == StDType::kF8_E8M0 || d == StDType::kI8 || d == StDType::kU8;
}
}  // namespace safetensors_internal

template <typename T>
Expected<std::span<const T>> SafetensorsTensor::View() const {
  if (!safetensors_internal::DTypeMatches<T>(dtype))
    return InvalidArgument("tensor '{}' is {}; the requested view has another element type", name,
                           StDTypeName(dtype));
  if (reinterpret_cast<uintptr_t>(data) % alignof(T) != 0)
    return Unsupported("tensor '{}': data is not aligned for a {}-byte view; use ToF32/ToI64", name,
                       sizeof(T));
  return std::span<const T>(reinterpret_cast<const T*>(data), numel());
}

}  // namespace flashkv
