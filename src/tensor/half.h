// IEEE binary16 (F16) and bfloat16 (BF16) <-> float conversions, scalar and per row.
// Must not: know about blocks or layers (tensor/ row in DESIGN.md: dtypes and kernels only).
//
// The scalar functions are bit manipulation only, so they give the same answer on every
// compiler and target (no F16C, no fast-math dependence). Narrowing rounds to nearest, ties to
// even, keeps subnormals, overflows to infinity and turns every NaN into a quiet NaN with its
// sign and top payload bits. Widening is exact (NaNs come out quiet, as with F16C).
#pragma once

#include <cstdint>
#include <cstring>

namespace flashkv {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in float.
    const float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  if (exp == 31) {  // infinity, or NaN made quiet as the hardware conversion does
    return BitsToFloat(sign | 0x7f800000u | (mant ? 0x400000u | (mant << 13) : 0u));
  }
  return BitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline uint16_t F32ToF16(float f) {
  const uint32_t bits = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) {  // NaN: keep the top payload bits, force quiet.
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs & 0x7fffffu) >> 13));
  }
  // 65520 is halfway between the largest half (65504, odd mantissa) and 65536: ties to even
  // round it up, so everything from there on is infinity.
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs < 0x38800000u) {  // below 2^-14: a half subnormal (or zero)
    const uint32_t e = abs >> 23;
    const uint32_t shift = 126u - e;        // value * 2^24 = m >> shift
    if (e == 0 || shift > 24) return sign;  // < 2^-25 (or a float subnormal): rounds to 0
    const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;  // may carry into the min normal
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t h = ((abs >> 23) - 112u) << 10 | ((abs & 0x7fffffu) >> 13);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carries into the exponent
  return static_cast<uint16_t>(sign | h);
}

inline float BF16ToF32(uint16_t b) {
  return BitsToFloat(static_cast<uint32_t>(b) << 16);
}

inline uint16_t F32ToBF16(float f) {
  const uint32_t bits = FloatBits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN, sign and payload kept
  }
  // Round to nearest even; a carry out of the mantissa correctly bumps the exponent, up to
  // infinity.
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// Row conversions, [n] each; vectorized where the build target allows, same results as the
// scalar functions.
void F16ToF32Row(const uint16_t* src, float* dst, int64_t n);
void F32ToF16Row(const float* src, uint16_t* dst, int64_t n);
void BF16ToF32Row(const uint16_t* src, float* dst, int64_t n);
void F32ToBF16Row(const float* src, uint16_t* dst, int64_t n);

}  // namespace flashkv
