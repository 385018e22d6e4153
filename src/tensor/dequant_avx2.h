// AVX2 block decoders: each walks one block and hands its values, 8 at a time, to a sink
// `sink(int offset, __m256 values)`. DequantizeRow's sink stores them; DotF32's multiplies
// them into an accumulator, so the values never round-trip through memory. Internal to
// tensor/. Must not: be included where FLASHKV_TENSOR_AVX2 is not defined.
//
// The values equal the scalar internal::DequantBlock* bit for bit: the same operations per
// value (d * sc, then (d * sc) * q - dmin * m) and no fused multiply-add.
#pragma once

#include <cstring>

#include "tensor/quant_internal.h"
#include "tensor/simd_avx2.h"

#ifdef FLASHKV_TENSOR_AVX2

namespace flashkv::internal {

// 16 bytes of small unsigned ints -> 2 x 8 values dl * q - ml, at offsets off, off + 8.
template <typename Sink>
inline void EmitScaled16(__m128i q, __m256 dl, __m256 ml, int off, Sink& sink) {
  for (int k = 0; k < 2; ++k) {
    const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(k ? _mm_srli_si128(q, 8) : q));
    sink(off + 8 * k, _mm256_sub_ps(_mm256_mul_ps(dl, v), ml));
  }
}

template <typename Sink>
inline void DecodeQ8_0(const uint8_t* blk, Sink& sink) {
  const __m256 d = _mm256_set1_ps(LoadHalf(blk));
  for (int k = 0; k < 4; ++k) {
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 2 + 8 * k));
    sink(8 * k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
  }
}

template <typename Sink>
inline void DecodeQ2_K(const uint8_t* blk, Sink& sink) {
  const float d = LoadHalf(blk + 80), dmin = LoadHalf(blk + 82);
  const __m256i m3 = _mm256_set1_epi8(3);
  for (int h = 0; h < 2; ++h) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * h));
    for (int s = 0; s < 4; ++s) {
      const __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * s), m3);
      for (int part = 0; part < 2; ++part) {
        const uint8_t g = blk[8 * h + 2 * s + part];
        const __m256 dl = _mm256_set1_ps(d * static_cast<float>(g & 15));
        const __m256 ml = _mm256_set1_ps(dmin * static_cast<float>(g >> 4));
        const __m128i qq = part ? _mm256_extracti128_si256(q, 1) : _mm256_castsi256_si128(q);
        EmitScaled16(qq, dl, ml, 128 * h + 32 * s + 16 * part, sink);
      }
    }
  }
}

template <typename Sink>
inline void DecodeQ4_K(const uint8_t* blk, Sink& sink) {
  const float d = LoadHalf(blk), dmin = LoadHalf(blk + 2);
  const __m256i m15 = _mm256_set1_epi8(15);
  for (int p = 0; p < 4; ++p) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * p));
    const __m256i nib[2] = {_mm256_and_si256(bits, m15),
                            _mm256_and_si256(_mm256_srli_epi16(bits, 4), m15)};
    for (int k = 0; k < 2; ++k) {
      int sc, mn;
      Q4KScaleMin(blk + 4, 2 * p + k, &sc, &mn);
      const __m256 dl = _mm256_set1_ps(d * static_cast<float>(sc));
      const __m256 ml = _mm256_set1_ps(dmin * static_cast<float>(mn));
      EmitScaled16(_mm256_castsi256_si128(nib[k]), dl, ml, 64 * p + 32 * k, sink);
      EmitScaled16(_mm256_extracti128_si256(nib[k], 1), dl, ml, 64 * p + 32 * k + 16, sink);
    }
  }
}

template <typename Sink>
inline void DecodeIQ2_XXS(const uint8_t* blk, Sink& sink) {
  const float d = LoadHalf(blk);
  for (int g = 0; g < 8; ++g) {
    uint32_t a, b;
    std::memcpy(&a, blk + 2 + 8 * g, 4);
    std::memcpy(&b, blk + 2 + 8 * g + 4, 4);
    const __m256 db = _mm256_set1_ps(d * (0.5f + static_cast<float>(b >> 28)) * 0.25f);
    const __m256i v = _mm256_sign_epi8(Iq2GridBytes(a), Iq2SignBytes(b));
    const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
    const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    // db * (mag * sign) equals the reference's (db * mag) * sign: the sign is exact.
    for (int k = 0; k < 4; ++k)
      sink(32 * g + 8 * k, _mm256_mul_ps(db, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[k]))));
  }
}

}  // namespace flashkv::internal

#endif  // FLASHKV_TENSOR_AVX2
