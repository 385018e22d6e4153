// Per-block helpers shared by quant.cpp, dot_ref.cpp and dot.cpp. Internal to tensor/: not
// part of the module's API. Must not: allocate or know about rows beyond one block.
#pragma once

#include <cstdint>
#include <cstring>

#include "tensor/dtype.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_lanes.h"

namespace flashkv::internal {

// Loads an f16 field through memcpy: blocks come from mmapped files at any even offset.
inline float LoadHalf(const void* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return F16ToF32(h);
}

inline float LoadFloat(const void* p) {
  float f;
  std::memcpy(&f, p, sizeof(f));
  return f;
}

// Block field readers shared with the GPU kernels (quant_lanes.h).
using lanes::Iq1mGroupScales;
using lanes::Iq1mRun;
using lanes::Q4KScaleMin;

// MXFP4's block scale halved, 2^(e - 128) exactly (kMxfp4Doubled holds twice the E2M1 values).
using lanes::Mxfp4HalfScale;

// Q3_K's 16 signed 6-bit group scales (already minus 32) from the packed 12 bytes.
inline void Q3KScales(const uint8_t* s, int* out) {
  for (int g = 0; g < 16; ++g) out[g] = lanes::Q3KScale(s, g);
}

// IQ1_M's block scale: the f16 assembled from the top nibbles of the four scale words.
inline float Iq1mScale(const uint8_t* scales) {
  return F16ToF32(lanes::Iq1mScaleBits(scales));
}

// One block -> its values, f32, in GGML's dequantization arithmetic (see quant_blocks.h).
void DequantBlockQ8_0(const uint8_t* block, float* out);     // [32]
void DequantBlockQ2_K(const uint8_t* block, float* out);     // [256]
void DequantBlockQ4_K(const uint8_t* block, float* out);     // [256]
void DequantBlockIQ2_XXS(const uint8_t* block, float* out);  // [256]
void DequantBlockQ8_K(const uint8_t* block, float* out);     // [256]
void DequantBlockQ3_K(const uint8_t* block, float* out);     // [256]
void DequantBlockQ5_K(const uint8_t* block, float* out);     // [256]
void DequantBlockQ6_K(const uint8_t* block, float* out);     // [256]
void DequantBlockMXFP4(const uint8_t* block, float* out);    // [32]
void DequantBlockIQ2_XS(const uint8_t* block, float* out);   // [256]
void DequantBlockIQ1_M(const uint8_t* block, float* out);    // [256]
void DequantBlockIQ3_XXS(const uint8_t* block, float* out);  // [256]
void DequantBlockIQ3_S(const uint8_t* block, float* out);    // [256]
void DequantBlockIQ2_S(const uint8_t* block, float* out);    // [256]
void DequantBlockIQ1_S(const uint8_t* block, float* out);    // [256]
void DequantBlockIQ4_NL(const uint8_t* block, float* out);   // [32]
void DequantBlockIQ4_XS(const uint8_t* block, float* out);   // [256]

// The scalar activation quantizers (quant.h's contracts); the public ones may be vectorized.
void QuantizeActQ8_0Scalar(const float* x, BlockQ8_0Act* out, int64_t n);
void QuantizeActQ8_KScalar(const float* x, BlockQ8_K* out, int64_t n);

using BlockDequantFn = void (*)(const uint8_t* block, float* out);
// The scalar block dequantizer for a block type (above); nullptr for other types.
BlockDequantFn ScalarBlockDequant(DType type);
// The fastest block dequantizer this build has (AVX2 or scalar), same results; nullptr for
// types without blocks or without a kernel.
BlockDequantFn FastBlockDequant(DType type);

}  // namespace flashkv::internal
