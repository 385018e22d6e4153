// Block dequantizers for DequantizeRow: the AVX2 decoders of dequant_avx2.h storing their
// values, or the scalar ones where the build has no AVX2. Same floats either way.
#include "tensor/dequant_avx2.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_internal.h"

namespace flashkv::internal {
#ifdef FLASHKV_TENSOR_AVX2
namespace {

struct Store {
  float* out;
  void operator()(int off, __m256 v) const { _mm256_storeu_ps(out + off, v); }
};

void DequantQ8_0(const uint8_t* blk, float* out) {
  Store s{out};
  DecodeQ8_0(blk, s);
}
void DequantQ2_K(const uint8_t* blk, float* out) {
  Store s{out};
  DecodeQ2_K(blk, s);
}
void DequantQ4_K(const uint8_t* blk, float* out) {
  Store s{out};
  DecodeQ4_K(blk, s);
}
void DequantIQ2_XXS(const uint8_t* blk, float* out) {
  Store s{out};
  DecodeIQ2_XXS(blk, s);
}

}  // namespace

BlockDequantFn FastBlockDequant(DType type) {
  switch (type) {
    case DType::kQ8_0:
      return DequantQ8_0;
    case DType::kQ2_K:
      return DequantQ2_K;
    case DType::kQ4_K:
      return DequantQ4_K;
    case DType::kIQ2_XXS:
      return DequantIQ2_XXS;
    default:
      return ScalarBlockDequant(type);
  }
}

#else

BlockDequantFn FastBlockDequant(DType type) {
  return ScalarBlockDequant(type);
}

#endif
}  // namespace flashkv::internal
