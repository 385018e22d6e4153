// Tensor element types with GGML's numeric ids and block geometry. The ids and names are
// written into GGUF files, so they never change. Must not: know layer structure.
//
// Geometry only lives here; the block structs are in quant_blocks.h, the (de)quantizers in
// quant.h, the dot kernels in dot.h and the threaded matvec/matmul in matmul.h. A type can be known
// (the GGUF reader accepts and sizes it) without flashkv being able to compute with it
// (`computable`).
#pragma once

#include <cstdint>
#include <string_view>

#include "util/status.h"

namespace flashkv {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

struct DTypeInfo {
  DType type;
  std::string_view name;  // GGML's spelling: "f32", "q8_0", "iq2_xxs", ...
  uint32_t block_size;    // values per block
  uint32_t block_bytes;   // bytes per block
  bool computable;        // flashkv can dequantize / dot it
};

// nullptr for an id GGML does not define.
const DTypeInfo* FindDTypeInfo(uint32_t ggml_id);
// Requires a valid DType.
const DTypeInfo& GetDTypeInfo(DType type);
// Case-insensitive lookup by name ("Q8_0", "f16").
const DTypeInfo* FindDTypeInfoByName(std::string_view name);

// Bytes of a row of n values; an error if n is not a whole number of blocks.
Expected<uint64_t> RowBytes(DType type, uint64_t n);
// Bytes of a tensor whose shape is ne[0..n_dims) (ne[0] contiguous), checked for overflow.
Expected<uint64_t> TensorBytes(DType type, const uint64_t* ne, int n_dims);

}  // namespace flashkv
