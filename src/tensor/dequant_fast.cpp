// Block dequantizers for DequantizeRow and DotF32: AVX2 versions where the build target
// has it, producing the same floats as the scalar internal::DequantBlock* (same operations per
// value: d * sc, then (d * sc) * q - dmin * m, no fused multiply-add).
#include <cstring>

#include "tensor/quant_blocks.h"
#include "tensor/quant_internal.h"
#include "tensor/simd_avx2.h"

namespace flashkv::internal {
#ifdef FLASHKV_TENSOR_AVX2
namespace {

// 32 bytes of small unsigned ints (< 128) -> 4 x 8 floats, scaled dl * q - ml.
inline void StoreScaled32(__m256i q, __m256 dl, __m256 ml, float* out) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
  for (int k = 0; k < 4; ++k) {
    const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(parts[k]));
    _mm256_storeu_ps(out + 8 * k, _mm256_sub_ps(_mm256_mul_ps(dl, v), ml));
  }
}
// 16 bytes -> 2 x 8 floats.
inline void StoreScaled16(__m128i q, __m256 dl, __m256 ml, float* out) {
  for (int k = 0; k < 2; ++k) {
    const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(k ? _mm_srli_si128(q, 8) : q));
    _mm256_storeu_ps(out + 8 * k, _mm256_sub_ps(_mm256_mul_ps(dl, v), ml));
  }
}

void DequantQ2_K(const uint8_t* blk, float* out) {
  const uint8_t* sc = blk;
  const float d = LoadHalf(blk + 80), dmin = LoadHalf(blk + 82);
  const __m256i m3 = _mm256_set1_epi8(3);
  for (int h = 0; h < 2; ++h) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * h));
    for (int s = 0; s < 4; ++s) {
      const __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * s), m3);
      for (int part = 0; part < 2; ++part) {
        const uint8_t g = sc[8 * h + 2 * s + part];
        const __m256 dl = _mm256_set1_ps(d * static_cast<float>(g & 15));
        const __m256 ml = _mm256_set1_ps(dmin * static_cast<float>(g >> 4));
        const __m128i qq = part ? _mm256_extracti128_si256(q, 1) : _mm256_castsi256_si128(q);
        StoreScaled16(qq, dl, ml, out + 128 * h + 32 * s + 16 * part);
      }
    }
  }
}

void DequantQ4_K(const uint8_t* blk, float* out) {
  const float d = LoadHalf(blk), dmin = LoadHalf(blk + 2);
  const __m256i m15 = _mm256_set1_epi8(15);
  for (int p = 0; p < 4; ++p) {
    int sc0, mn0, sc1, mn1;
    internal::Q4KScaleMin(blk + 4, 2 * p, &sc0, &mn0);
    internal::Q4KScaleMin(blk + 4, 2 * p + 1, &sc1, &mn1);
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * p));
    StoreScaled32(_mm256_and_si256(bits, m15), _mm256_set1_ps(d * static_cast<float>(sc0)),
                  _mm256_set1_ps(dmin * static_cast<float>(mn0)), out + 64 * p);
    StoreScaled32(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m15),
                  _mm256_set1_ps(d * static_cast<float>(sc1)),
                  _mm256_set1_ps(dmin * static_cast<float>(mn1)), out + 64 * p + 32);
  }
}

void DequantIQ2_XXS(const uint8_t* blk, float* out) {
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
      _mm256_storeu_ps(out + 32 * g + 8 * k,
                       _mm256_mul_ps(db, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[k]))));
  }
}

void DequantQ8_0(const uint8_t* blk, float* out) {
  const __m256 d = _mm256_set1_ps(LoadHalf(blk));
  for (int k = 0; k < 4; ++k) {
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 2 + 8 * k));
    _mm256_storeu_ps(out + 8 * k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
  }
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
