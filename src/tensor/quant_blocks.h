// GGML quant block structs, byte for byte as they sit in GGUF files, plus the int8 activation
// blocks the quantized dot products consume. Must not: know layer structure or hold kernels
// (those are quant.h / dot.h).
//
// Every field is little-endian; scales named `d`/`dmin` are IEEE half bits (see half.h) unless
// declared float. Blocks are read straight out of an mmapped file, so kernels load multi-byte
// fields with memcpy and never assume more than the struct's natural alignment.
#pragma once

#include <cstdint>

namespace flashkv {

inline constexpr int kQK8_0 = 32;  // values per Q8_0 block
inline constexpr int kQK_K = 256;  // values per k-quant / IQ super-block

// Q8_0 weights, 32 values: value[i] = f16(d) * qs[i].
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block is 34 bytes in GGUF");

// Q8_0-style activations as ds4's CPU path keeps them, 32 values: value[i] = d * qs[i] with d
// an fp32 scale (amax / 127). Not a GGUF type: ds4 never rounds the activation scale to f16,
// and reproducing its dot products bit for bit needs the fp32 scale.
struct BlockQ8_0Act {
  float d;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0Act) == 36, "Q8_0 activation block is 36 bytes");

// Q2_K, 256 values in 16 groups of 16, 2 bits each. scales[g] holds the group's 4-bit scale
// (low nibble) and 4-bit min (high nibble). The values form two halves h of 128; half h uses
// qs[32h .. 32h+31], and for shift s = 0..3 value 128h + 32s + l (l < 32) is the 2-bit quant
// q = (qs[32h + l] >> 2s) & 3 of group g = 8h + 2s + (l >= 16):
//   value = f16(d) * (scales[g] & 15) * q - f16(dmin) * (scales[g] >> 4).
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84, "Q2_K block is 84 bytes in GGUF");

// Q4_K, 256 values in 8 groups of 32, 4 bits each, with 6-bit scale sc(j) and min mn(j) per
// group packed into 12 bytes: for j < 4, sc = scales[j] & 63 and mn = scales[j+4] & 63; for
// j >= 4, sc = (scales[j+4] & 15) | (scales[j-4] >> 6) << 4 and
// mn = (scales[j+4] >> 4) | (scales[j] >> 6) << 4. For pair p = 0..3 the 32 bytes
// qs[32p .. 32p+31] hold group 2p in their low nibbles and group 2p+1 in their high nibbles:
//   value[64p + l]      = f16(d) * sc(2p)   * (qs[32p + l] & 15) - f16(dmin) * mn(2p)
//   value[64p + 32 + l] = f16(d) * sc(2p+1) * (qs[32p + l] >> 4) - f16(dmin) * mn(2p+1).
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block is 144 bytes in GGUF");

// IQ2_XXS, 256 values in 8 groups of 32. Group g reads qs[4g .. 4g+3] as two little-endian
// u32 words a (bytes) and b. Byte k of a (k = 0..3) indexes kIq2xxsGrid: 8 magnitudes from
// {8, 25, 43} for values 32g + 8k .. 32g + 8k + 7. Bits 7k .. 7k+6 of b index kIq2Signs, an
// 8-bit mask whose bit j negates value j of those 8. The top 4 bits of b are the group scale ls:
//   value = f16(d) * (0.5 + ls) * 0.25 * grid * sign.
struct BlockIQ2_XXS {
  uint16_t d;
  uint16_t qs[kQK_K / 8];
};
static_assert(sizeof(BlockIQ2_XXS) == 66, "IQ2_XXS block is 66 bytes in GGUF");

// Q8_K activations, 256 values: value[i] = d * qs[i], d fp32; bsums[k] = sum of qs[16k .. 16k+15]
// so k-quant mins can be applied without touching qs.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292, "Q8_K block is 292 bytes");

}  // namespace flashkv
