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

// IQ2_XS, 256 values in 8 groups of 32, each two halves of 16 with a 4-bit scale. Word qs[4g + k]
// (k = 0..3) covers values 32g + 8k .. 32g + 8k + 7: its low 9 bits index kIq2xsGrid (8
// magnitudes from {8, 25, 43}), its top 7 bits index kIq2Signs (bit j negates value j). The
// scale of half k / 2 is ls = scales[g] & 15 (k < 2) or scales[g] >> 4 (k >= 2):
//   value = f16(d) * (0.5 + ls) * 0.25 * grid * sign.
struct BlockIQ2_XS {
  uint16_t d;
  uint16_t qs[kQK_K / 8];
  uint8_t scales[kQK_K / 32];
};
static_assert(sizeof(BlockIQ2_XS) == 74, "IQ2_XS block is 74 bytes in GGUF");

// IQ1_M, 256 values in 8 groups of 32, each four runs of 8 and two halves of 16. No f16 field:
// the block scale's 16 bits are the top nibbles of the four little-endian u16 words of
// `scales`, word 0 holding bits 0..3. Group g's halves have the 3-bit scales
// s1 = (w[g / 2] >> 6(g % 2)) & 7 and s2 = (w[g / 2] >> (6(g % 2) + 3)) & 7. Run k (k = 0..3,
// values 32g + 8k ..) reads the 11-bit kIq1sGrid index qs[4g + k] | ((qh[2g + k / 2] >> 4(k % 2))
// & 7) << 8 and the shift sign bit 3 of that nibble (set: -delta):
//   value = (f16(scale) * (2 s + 1)) * (grid + (±kIq1Delta)), s = s1 for k < 2, s2 otherwise.
struct BlockIQ1_M {
  uint8_t qs[kQK_K / 8];
  uint8_t qh[kQK_K / 16];
  uint8_t scales[kQK_K / 32];
};
static_assert(sizeof(BlockIQ1_M) == 56, "IQ1_M block is 56 bytes in GGUF");

// Q3_K, 256 values in 16 groups of 16, 3 bits each: the low 2 bits in qs, the third in hmask,
// a 6-bit signed group scale (stored + 32) packed into 12 bytes: scale byte g (g < 16) has its
// low 4 bits in scales[g % 8] (its low nibble for g < 8, its high nibble for g >= 8) and its
// top 2 bits in scales[8 + g % 4] at bits 2(g / 4) and 2(g / 4) + 1. For half h and shift s = 0..3,
// value 128h + 32s + l (l < 32) has q = (qs[32h + l] >> 2s) & 3, high bit (hmask[l] >> (4h + s)) &
// 1, group g = 8h + 2s + (l >= 16):
//   value = (f16(d) * (sc(g) - 32)) * (q - (high ? 0 : 4)).
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110, "Q3_K block is 110 bytes in GGUF");

// Q5_K, Q4_K with a fifth bit: scales/mins and the nibble layout as Q4_K; the high bit of value
// 64p + l is (qh[l] >> 2p) & 1 and of value 64p + 32 + l is (qh[l] >> (2p + 1)) & 1 (l < 32):
//   value[64p + l] = f16(d) * sc(2p) * ((qs[32p + l] & 15) + 16 * high) - f16(dmin) * mn(2p).
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176, "Q5_K block is 176 bytes in GGUF");

// Q6_K, 256 values in 16 groups of 16, 6 bits each (4 in ql, 2 in qh), an int8 scale per group.
// For half h (values 128h ..) and l < 32, with L = ql + 64h, H = qh + 32h, S = scales + 8h:
//   q0 = (L[l] & 15)      | ((H[l] >> 0) & 3) << 4   -> value 128h + l
//   q1 = (L[l + 32] & 15) | ((H[l] >> 2) & 3) << 4   -> value 128h + 32 + l
//   q2 = (L[l] >> 4)      | ((H[l] >> 4) & 3) << 4   -> value 128h + 64 + l
//   q3 = (L[l + 32] >> 4) | ((H[l] >> 6) & 3) << 4   -> value 128h + 96 + l
//   value = (f16(d) * S[l / 16 + 2k]) * (q_k - 32).
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block is 210 bytes in GGUF");

// MXFP4 (OCP microscaling FP4), 32 values: one E8M0 scale byte e (2^(e - 127), no sign or
// mantissa) and 16 bytes of E2M1 nibbles; byte j holds value j in its low nibble and value
// j + 16 in its high nibble. E2M1: bit 3 sign, then magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}.
// As GGML computes it, value = kMxfp4Doubled[nibble] * 2^(e - 128) (the table holds twice the
// E2M1 magnitudes, so every product is an integer times a power of two); e = 255 is not a NaN
// and nibble 8 (E2M1's -0) gives +0.
inline constexpr int kQKMxfp4 = 32;
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[kQKMxfp4 / 2];
};
static_assert(sizeof(BlockMXFP4) == 17, "MXFP4 block is 17 bytes in GGUF");
inline constexpr int8_t kMxfp4Doubled[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                             0, -1, -2, -3, -4, -6, -8, -12};

// IQ3_XXS, 256 values in 8 groups of 32: f16 d, 64 grid bytes, 8 little-endian u32 words w[g].
// Byte qs[2t] / qs[2t + 1] (t = 0..31) index kIq3xxsGrid (4 magnitudes from {4, 12, .., 52, 62})
// for values 8t .. 8t+3 / 8t+4 .. 8t+7; bits 7k .. 7k+6 of w[t / 4] (k = t % 4) index
// kIq2Signs for those 8, the top 4 bits of w[g] are the group scale ls:
//   value = (f16(d) * (0.5 + ls) * 0.5) * grid * sign.
struct BlockIQ3_XXS {
  uint16_t d;
  uint8_t qs[3 * kQK_K / 8];
};
static_assert(sizeof(BlockIQ3_XXS) == 98, "IQ3_XXS block is 98 bytes in GGUF");

// IQ3_S, 256 values in 8 groups of 32: f16 d, qs[64], qh[8], signs[32], scales[4]. Values
// 8t .. 8t+3 / 8t+4 .. 8t+7 (t = 0..31, g = t / 4, l = t % 4) read the 9-bit kIq3sGrid indices
// qs[2t] | bit 2l of qh[g] << 8 and qs[2t + 1] | bit 2l + 1 of qh[g] << 8 (4 magnitudes from
// {1, 3, .., 15} each); signs[t] bit j negates value 8t + j; the group's 4-bit scale s is the
// low (even g) or high (odd g) nibble of scales[g / 2]:
//   value = (f16(d) * (1 + 2 s)) * grid * sign.
struct BlockIQ3_S {
  uint16_t d;
  uint8_t qs[kQK_K / 4];
  uint8_t qh[kQK_K / 32];
  uint8_t signs[kQK_K / 8];
  uint8_t scales[kQK_K / 64];
};
static_assert(sizeof(BlockIQ3_S) == 110, "IQ3_S block is 110 bytes in GGUF");

// IQ2_S, 256 values in 8 groups of 32: f16 d, qs[64] (32 grid bytes, then 32 sign bytes),
// qh[8], scales[8]. Values 8t .. 8t+7 (g = t / 4, l = t % 4) read the 10-bit kIq2sGrid index
// qs[t] | ((qh[g] >> 2l) & 3) << 8 (8 magnitudes from {8, 25, 43}); byte qs[32 + t] bit j
// negates value 8t + j; the scale of half l / 2 is ls = (scales[g] >> 4(l / 2)) & 15:
//   value = (f16(d) * (0.5 + ls) * 0.25) * grid * sign.
struct BlockIQ2_S {
  uint16_t d;
  uint8_t qs[kQK_K / 4];
  uint8_t qh[kQK_K / 32];
  uint8_t scales[kQK_K / 32];
};
static_assert(sizeof(BlockIQ2_S) == 82, "IQ2_S block is 82 bytes in GGUF");

// IQ1_S, 256 values in 8 groups of 32: f16 d, qs[32], 8 little-endian u16 words qh[g]. Values
// 8t .. 8t+7 (g = t / 4, l = t % 4) read the 11-bit kIq1sGrid index qs[t] | ((qh[g] >> 3l) & 7)
// << 8; bits 12..14 of qh[g] are the group scale s, bit 15 the sign of the shift:
//   value = (f16(d) * (2 s + 1)) * (grid + (±kIq1Delta)).
struct BlockIQ1_S {
  uint16_t d;
  uint8_t qs[kQK_K / 8];
  uint16_t qh[kQK_K / 32];
};
static_assert(sizeof(BlockIQ1_S) == 50, "IQ1_S block is 50 bytes in GGUF");

// IQ4_NL, 32 values: f16 d and 16 bytes of 4-bit indices into the non-linear kIq4nlValues;
// byte j holds value j in its low nibble and value j + 16 in its high nibble:
//   value = f16(d) * kIq4nlValues[nibble].
inline constexpr int kQK4_NL = 32;
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK4_NL / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18, "IQ4_NL block is 18 bytes in GGUF");
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// IQ4_XS, 256 values in 8 groups of 32, IQ4_NL's values with a 6-bit scale per group: f16 d,
// u16 scales_h, scales_l[4], qs[128]. Group g's scale is ls = ((scales_l[g / 2] >> 4(g % 2)) &
// 15) | ((scales_h >> 2g) & 3) << 4; its 16 bytes qs[16g ..] hold value 32g + j in the low
// nibble of byte j and 32g + 16 + j in the high one:
//   value = (f16(d) * (ls - 32)) * kIq4nlValues[nibble].
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136, "IQ4_XS block is 136 bytes in GGUF");

// Q8_K activations, 256 values: value[i] = d * qs[i], d fp32; bsums[k] = sum of qs[16k .. 16k+15]
// so k-quant mins can be applied without touching qs.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292, "Q8_K block is 292 bytes");

}  // namespace flashkv
