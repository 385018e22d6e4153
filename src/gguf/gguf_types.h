// GGUF container constants: the magic, the version flashkv reads and writes, and the
// metadata value type ids. These numbers are on disk, so they never change.
// Must not: know any model's keys or tensor names.
#pragma once

#include <cstdint>
#include <string_view>

namespace flashkv {

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian u32
inline constexpr uint32_t kGgufVersion = 3;
inline constexpr uint64_t kGgufDefaultAlignment = 32;
inline constexpr std::string_view kGgufAlignmentKey = "general.alignment";
// GGML never builds tensors of more than 4 dimensions.
inline constexpr uint32_t kGgufMaxDims = 4;

enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// "u32", "string", "array", ...; "?" for an id outside the table.
std::string_view GgufTypeName(GgufType type);
// Whether `id` is one of the GgufType values above.
bool IsValidGgufType(uint32_t id);
// Bytes of one value for fixed-size types; 0 for string and array.
uint64_t GgufScalarSize(GgufType type);
bool IsGgufInteger(GgufType type);
bool IsGgufFloat(GgufType type);

}  // namespace flashkv
