// Activation quantizers (ds4's CPU path, bit for bit): the scalar transcriptions, and AVX2
// versions that give the same bytes. amax and the int8 sums are exact in any order; the one
// scale and its inverse are computed as in the scalar code; _mm256_cvtps_epi32 rounds half to
// even like lrintf in the default rounding mode; the int16/int8 packs saturate exactly as the
// [-128, 127] clamp does.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/quant.h"
#include "tensor/quant_internal.h"
#include "tensor/simd_avx2.h"

namespace flashkv {
namespace internal {

void QuantizeActQ8_0Scalar(const float* x, BlockQ8_0Act* out, int64_t n) {
  const int64_t blocks = (n + kQK8_0 - 1) / kQK8_0;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t i0 = b * kQK8_0;
    const int64_t bn = std::min<int64_t>(kQK8_0, n - i0);
    float amax = 0.0f;
    for (int64_t i = 0; i < bn; ++i) {
      const float ax = std::fabs(x[i0 + i]);
      if (ax > amax) amax = ax;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = d;
    for (int64_t i = 0; i < bn; ++i) {
      const long v = std::lrint(x[i0 + i] * id);
      out[b].qs[i] = static_cast<int8_t>(std::clamp<long>(v, -128, 127));
    }
    for (int64_t i = bn; i < kQK8_0; ++i) out[b].qs[i] = 0;
  }
}

void QuantizeActQ8_KScalar(const float* x, BlockQ8_K* out, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    BlockQ8_K& y = out[b];
    float max = 0.0f;
    float amax = 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y, 0, sizeof(y));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j) {
      const long v = std::lrint(iscale * x[j]);
      y.qs[j] = static_cast<int8_t>(std::clamp<long>(v, -128, 127));
    }
    for (int k = 0; k < kQK_K / 16; ++k) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += y.qs[16 * k + i];
      y.bsums[k] = static_cast<int16_t>(sum);
    }
    y.d = 1.0f / iscale;
  }
}

}  // namespace internal

#ifdef FLASHKV_TENSOR_AVX2
namespace {

inline __m256 Abs(__m256 v) {
  return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

// Running max of |x| that skips NaN like the scalar `if (ax > amax)`: maxps returns its
// second operand when either is NaN, so the accumulator goes second and never becomes NaN.
inline __m256 MaxAbs(const float* x, int n) {
  __m256 m = _mm256_setzero_ps();
  for (int k = 0; k < n; k += 8) m = _mm256_max_ps(Abs(_mm256_loadu_ps(x + k)), m);
  return m;
}

// max over 8 lanes, none NaN.
inline float HMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// 32 floats * scale -> 32 int8, rounded half to even, saturated to [-128, 127], in order.
inline __m256i Round32(const float* x, __m256 scale) {
  const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), scale));
  const __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), scale));
  const __m256i c = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), scale));
  const __m256i d = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), scale));
  // packs work per 128-bit lane: [a0 b0 a1 b1] then [a0 b0 c0 d0 a1 b1 c1 d1] in 32-bit units.
  const __m256i ab = _mm256_packs_epi32(a, b);
  const __m256i cd = _mm256_packs_epi32(c, d);
  const __m256i abcd = _mm256_packs_epi16(ab, cd);
  return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

}  // namespace

void QuantizeActQ8_0(const float* x, BlockQ8_0Act* out, int64_t n) {
  const int64_t full = n / kQK8_0;
  for (int64_t b = 0; b < full; ++b, x += kQK8_0) {
    const float amax = HMax(MaxAbs(x, kQK8_0));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = d;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs), Round32(x, _mm256_set1_ps(id)));
  }
  if (full * kQK8_0 < n) internal::QuantizeActQ8_0Scalar(x, out + full, n - full * kQK8_0);
}

void QuantizeActQ8_K(const float* x, BlockQ8_K* out, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    BlockQ8_K& y = out[b];
    const float amax = HMax(MaxAbs(x, kQK_K));
    if (amax == 0.0f) {  // as the scalar code: d = 0 and q = 0
      std::memset(&y, 0, sizeof(y));
      continue;
    }
    // The signed value of the first element whose |x| is amax, as the scalar scan picks it.
    int j = 0;
    while (!(std::fabs(x[j]) == amax)) ++j;
    const float iscale = -127.0f / x[j];
    const __m256 s = _mm256_set1_ps(iscale);
    const __m256i ones = _mm256_set1_epi8(1);
    for (int k = 0; k < kQK_K; k += 32) {
      const __m256i q = Round32(x + k, s);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y.qs + k), q);
      // Two bsums of 16: maddubs against 1 gives int16 pair sums, madd folds them to int32.
      const __m256i s32 = _mm256_madd_epi16(_mm256_maddubs_epi16(ones, q), _mm256_set1_epi16(1));
      // s32 lanes 0-3 belong to the first 16 values (low 128 bits), 4-7 to the second.
      alignas(32) int32_t lanes[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s32);
      y.bsums[k / 16] = static_cast<int16_t>(lanes[0] + lanes[1] + lanes[2] + lanes[3]);
      y.bsums[k / 16 + 1] = static_cast<int16_t>(lanes[4] + lanes[5] + lanes[6] + lanes[7]);
    }
    y.d = 1.0f / iscale;
  }
}

#else

void QuantizeActQ8_0(const float* x, BlockQ8_0Act* out, int64_t n) {
  internal::QuantizeActQ8_0Scalar(x, out, n);
}
void QuantizeActQ8_K(const float* x, BlockQ8_K* out, int64_t n) {
  internal::QuantizeActQ8_KScalar(x, out, n);
}

#endif

}  // namespace flashkv
