#include "tensor/half.h"

#if defined(__F16C__) && defined(__AVX2__)
#include <immintrin.h>
#endif

namespace flashkv {

void F16ToF32Row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__) && defined(__AVX2__)
  // vcvtph2ps is exact, like the scalar widening.
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
  for (; i < n; ++i) dst[i] = F16ToF32(src[i]);
}

void F32ToF16Row(const float* src, uint16_t* dst, int64_t n) {
  // Scalar on purpose: vcvtps2ph rounds the same way, but NaN payload handling differs between
  // implementations and weight conversion is not a hot path.
  for (int64_t i = 0; i < n; ++i) dst[i] = F32ToF16(src[i]);
}

void BF16ToF32Row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX2__)
  for (; i + 8 <= n; i += 8) {
    const __m256i v =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
  }
#endif
  for (; i < n; ++i) dst[i] = BF16ToF32(src[i]);
}

void F32ToBF16Row(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = F32ToBF16(src[i]);
}

}  // namespace flashkv
