// Optimized dot kernels. Where the build target has AVX2+FMA+F16C the integer parts of the Q8
// kernels and the whole DotF32 are vectorized; everything else (and every non-x86 or sanitizer
// build, which has no -march=native) uses the scalar references in dot_ref.cpp.
//
// DotQ8 must match ref::DotQ8 bit for bit: only exact integer sums are vectorized, every float
// operation is done in the reference's order. This file is compiled with -ffp-contract=off.
#include "tensor/dot.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "tensor/dot_ref.h"
#include "tensor/half.h"
#include "tensor/iq2_tables.h"
#include "tensor/quant.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define FLASHKV_DOT_AVX2 1
#include <immintrin.h>
#endif

namespace flashkv {

ActQuant ActQuantFor(DType wtype) {
  switch (wtype) {
    case DType::kQ8_0:
      return ActQuant::kQ8_0;
    case DType::kQ2_K:
    case DType::kQ4_K:
    case DType::kIQ2_XXS:
    case DType::kQ8_K:
      return ActQuant::kQ8_K;
    default:
      return ActQuant::kNone;
  }
}

int64_t ActQuantBytes(ActQuant q, int64_t n) {
  switch (q) {
    case ActQuant::kQ8_0:
      return (n + kQK8_0 - 1) / kQK8_0 * static_cast<int64_t>(sizeof(BlockQ8_0Act));
    case ActQuant::kQ8_K:
      return n / kQK_K * static_cast<int64_t>(sizeof(BlockQ8_K));
    case ActQuant::kNone:
      break;
  }
  return n * static_cast<int64_t>(sizeof(float));
}

void QuantizeAct(ActQuant q, const float* x, void* out, int64_t n) {
  switch (q) {
    case ActQuant::kQ8_0:
      QuantizeActQ8_0(x, static_cast<BlockQ8_0Act*>(out), n);
      return;
    case ActQuant::kQ8_K:
      QuantizeActQ8_K(x, static_cast<BlockQ8_K*>(out), n);
      return;
    case ActQuant::kNone:
      break;
  }
  std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
}

#ifdef FLASHKV_DOT_AVX2
namespace {

using internal::LoadFloat;
using internal::LoadHalf;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

inline float HSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int32_t HSumI32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

inline __m256 LoadF16x8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 LoadBF16x8(const uint8_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

// ---- DotF32 -------------------------------------------------------------------------------

// Dense types: fp32 FMA lanes over chunks of 256 values, chunk sums added in double.
// load8 widens 8 weights to floats, load1 one weight.
template <int kElemBytes, typename Load8, typename Load1>
float DotDense(const uint8_t* w, const float* x, int64_t n, Load8 load8, Load1 load1) {
  double total = 0.0;
  const int64_t n32 = n & ~int64_t{31};
  int64_t i = 0;
  while (i < n32) {
    const int64_t end = std::min<int64_t>(n32, i + 256);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    for (; i < end; i += 32) {
      a0 = _mm256_fmadd_ps(load8(w + (i + 0) * kElemBytes), _mm256_loadu_ps(x + i + 0), a0);
      a1 = _mm256_fmadd_ps(load8(w + (i + 8) * kElemBytes), _mm256_loadu_ps(x + i + 8), a1);
      a2 = _mm256_fmadd_ps(load8(w + (i + 16) * kElemBytes), _mm256_loadu_ps(x + i + 16), a2);
      a3 = _mm256_fmadd_ps(load8(w + (i + 24) * kElemBytes), _mm256_loadu_ps(x + i + 24), a3);
    }
    total += HSum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  }
  for (; i < n; ++i) total += static_cast<double>(load1(w + kElemBytes * i)) * x[i];
  return static_cast<float>(total);
}

inline __m256 LoadF32x8(const uint8_t* p) {
  return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}
inline float LoadBF16(const uint8_t* p) {
  uint16_t b;
  std::memcpy(&b, p, 2);
  return BF16ToF32(b);
}

// Dot of 256 dequantized values with x [256] in fp32 lanes.
inline float Dot256(const float* v, const float* x) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  for (int i = 0; i < 256; i += 32) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(v + i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(v + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(v + i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(v + i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  return HSum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

float DotF32Q8_0(const uint8_t* w, const float* x, int64_t n) {
  const int64_t nb = n / kQK8_0;
  double total = 0.0;
  for (int64_t b0 = 0; b0 < nb; b0 += 8) {
    const int64_t b1 = std::min(nb, b0 + 8);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* blk = w + b * sizeof(BlockQ8_0);
      const float* xb = x + b * kQK8_0;
      const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
      const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 18));
      __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q0)), _mm256_loadu_ps(xb));
      s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q0, 8))),
                          _mm256_loadu_ps(xb + 8), s);
      s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q1)), _mm256_loadu_ps(xb + 16),
                          s);
      s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q1, 8))),
                          _mm256_loadu_ps(xb + 24), s);
      acc = _mm256_fmadd_ps(_mm256_set1_ps(LoadHalf(blk)), s, acc);
    }
    total += HSum(acc);
  }
  return static_cast<float>(total);
}

// ---- Block dequantizers (AVX2), same values as internal::DequantBlock* ---------------------

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

// kIq2Signs expanded to 8 bytes of +1 / -1, for _mm256_sign_epi8 and for multiplying floats.
struct SignTables {
  uint64_t pm1[128];
  SignTables() {
    for (int i = 0; i < 128; ++i) {
      uint64_t v = 0;
      for (int j = 0; j < 8; ++j)
        v |= static_cast<uint64_t>((kIq2Signs[i] >> j) & 1 ? 0xffu : 0x01u) << (8 * j);
      pm1[i] = v;
    }
  }
};
const SignTables& Signs() {
  static const SignTables t;
  return t;
}

// The 32 signed int8 values (grid * sign) of IQ2_XXS group words a, b.
inline __m256i Iq2Group(uint32_t a, uint32_t b, const uint64_t* pm1) {
  const __m256i grid = _mm256_set_epi64x(static_cast<int64_t>(kIq2xxsGrid[a >> 24]),
                                         static_cast<int64_t>(kIq2xxsGrid[(a >> 16) & 0xff]),
                                         static_cast<int64_t>(kIq2xxsGrid[(a >> 8) & 0xff]),
                                         static_cast<int64_t>(kIq2xxsGrid[a & 0xff]));
  const __m256i sign = _mm256_set_epi64x(
      static_cast<int64_t>(pm1[(b >> 21) & 127]), static_cast<int64_t>(pm1[(b >> 14) & 127]),
      static_cast<int64_t>(pm1[(b >> 7) & 127]), static_cast<int64_t>(pm1[b & 127]));
  return _mm256_sign_epi8(grid, sign);
}

void DequantIQ2_XXS(const uint8_t* blk, float* out) {
  const float d = LoadHalf(blk);
  const uint64_t* pm1 = Signs().pm1;
  for (int g = 0; g < 8; ++g) {
    uint32_t a, b;
    std::memcpy(&a, blk + 2 + 8 * g, 4);
    std::memcpy(&b, blk + 2 + 8 * g + 4, 4);
    const __m256 db = _mm256_set1_ps(d * (0.5f + static_cast<float>(b >> 28)) * 0.25f);
    const __m256i v = Iq2Group(a, b, pm1);
    const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
    const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    // db * (mag * sign) equals the reference's (db * mag) * sign: the sign is exact.
    for (int k = 0; k < 4; ++k)
      _mm256_storeu_ps(out + 32 * g + 8 * k,
                       _mm256_mul_ps(db, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[k]))));
  }
}

template <void (*Dequant)(const uint8_t*, float*), int kBlockBytes>
float DotF32Blocks(const uint8_t* w, const float* x, int64_t n) {
  alignas(32) float buf[kQK_K];
  double total = 0.0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    Dequant(w + b * kBlockBytes, buf);
    total += Dot256(buf, x + b * kQK_K);
  }
  return static_cast<float>(total);
}

// ---- DotQ8 --------------------------------------------------------------------------------

// Sum over 32 lanes of w * x for int8 w and int8 x in [-127, 127] (x never -128, which our
// activation quantizers guarantee), as 8 int32 partial sums.
inline __m256i DotI8x32(__m256i w, __m256i x) {
  const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

float DotQ8Q8_0(const uint8_t* w, const BlockQ8_0Act* x, int64_t n) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockQ8_0);
    const __m256i qw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
    const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
    const int32_t isum = HSumI32(DotI8x32(qw, qx));
    acc += LoadHalf(blk) * x[b].d * static_cast<float>(isum);
  }
  return acc;
}

float DotQ8Q2_K(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  const __m256i m3 = _mm256_set1_epi8(3);
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockQ2_K);
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk));
    // summs = sum_j bsums[j] * (sc[j] >> 4)
    const __m256i mins16 =
        _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(15)));
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].bsums));
    const int summs = HSumI32(_mm256_madd_epi16(mins16, bsums));
    // Scales (low nibbles) as int16, two groups per 32 values: lanes 0-7 group A, 8-15 group B.
    alignas(16) uint8_t scl[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(scl), _mm_and_si128(sc8, _mm_set1_epi8(15)));
    __m256i isum_v = _mm256_setzero_si256();
    const int8_t* q8 = y[b].qs;
    for (int h = 0; h < 2; ++h) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * h));
      for (int s = 0; s < 4; ++s) {
        const __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * s), m3);
        const __m256i qx =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 128 * h + 32 * s));
        const __m256i p16 = _mm256_maddubs_epi16(q2, qx);
        const int g = 8 * h + 2 * s;
        const __m256i scale = _mm256_set_m128i(_mm_set1_epi16(scl[g + 1]), _mm_set1_epi16(scl[g]));
        isum_v = _mm256_add_epi32(isum_v, _mm256_madd_epi16(p16, scale));
      }
    }
    const int isum = HSumI32(isum_v);
    const float dall = y[b].d * LoadHalf(blk + 80);
    const float dmin = y[b].d * LoadHalf(blk + 82);
    sumf += dall * static_cast<float>(isum) - dmin * static_cast<float>(summs);
  }
  return sumf;
}

float DotQ8IQ2_XXS(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  const uint64_t* pm1 = Signs().pm1;
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockIQ2_XXS);
    const float d = LoadHalf(blk) * y[b].d;
    __m256i acc = _mm256_setzero_si256();
    for (int g = 0; g < 8; ++g) {
      uint32_t a, s;
      std::memcpy(&a, blk + 2 + 8 * g, 4);
      std::memcpy(&s, blk + 2 + 8 * g + 4, 4);
      const __m256i grid = _mm256_set_epi64x(static_cast<int64_t>(kIq2xxsGrid[a >> 24]),
                                             static_cast<int64_t>(kIq2xxsGrid[(a >> 16) & 0xff]),
                                             static_cast<int64_t>(kIq2xxsGrid[(a >> 8) & 0xff]),
                                             static_cast<int64_t>(kIq2xxsGrid[a & 0xff]));
      const __m256i sign = _mm256_set_epi64x(
          static_cast<int64_t>(pm1[(s >> 21) & 127]), static_cast<int64_t>(pm1[(s >> 14) & 127]),
          static_cast<int64_t>(pm1[(s >> 7) & 127]), static_cast<int64_t>(pm1[s & 127]));
      const __m256i qx = _mm256_sign_epi8(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs + 32 * g)), sign);
      const __m256i p16 = _mm256_maddubs_epi16(grid, qx);  // grid <= 43: no saturation
      const int16_t ls = static_cast<int16_t>(2 * (s >> 28) + 1);
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(ls)));
    }
    sumf += d * static_cast<float>(HSumI32(acc));
  }
  return 0.125f * sumf;
}

float DotQ8Q4_K(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  __m256 sums = _mm256_setzero_ps();
  float sumf = 0.0f;
  const __m256i m15 = _mm256_set1_epi8(15);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockQ4_K);
    int sc[8], mn[8];
    for (int g = 0; g < 8; ++g) internal::Q4KScaleMin(blk + 4, g, &sc[g], &mn[g]);
    int sumi = 0;
    for (int j = 0; j < 16; ++j) sumi += y[b].bsums[j] * mn[j / 2];
    // lanes[l] = sum over i = l mod 8 of sc[i/32] * q8[i] * q4[i]
    __m128i lanes_lo = _mm_setzero_si128(), lanes_hi = _mm_setzero_si128();
    const int8_t* q8 = y[b].qs;
    for (int p = 0; p < 4; ++p) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * p));
      const __m256i nib[2] = {_mm256_and_si256(bits, m15),
                              _mm256_and_si256(_mm256_srli_epi16(bits, 4), m15)};
      __m128i group[2];
      for (int k = 0; k < 2; ++k) {
        const int8_t* xk = q8 + 64 * p + 32 * k;
        const __m256i pa = _mm256_mullo_epi16(
            _mm256_cvtepu8_epi16(_mm256_castsi256_si128(nib[k])),
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xk))));
        const __m256i pb = _mm256_mullo_epi16(
            _mm256_cvtepu8_epi16(_mm256_extracti128_si256(nib[k], 1)),
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xk + 16))));
        const __m256i s = _mm256_add_epi16(pa, pb);  // |.| <= 2 * 15 * 128
        group[k] = _mm_add_epi16(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
      }
      const __m128i scl =
          _mm_set_epi16(static_cast<int16_t>(sc[2 * p + 1]), static_cast<int16_t>(sc[2 * p]),
                        static_cast<int16_t>(sc[2 * p + 1]), static_cast<int16_t>(sc[2 * p]),
                        static_cast<int16_t>(sc[2 * p + 1]), static_cast<int16_t>(sc[2 * p]),
                        static_cast<int16_t>(sc[2 * p + 1]), static_cast<int16_t>(sc[2 * p]));
      lanes_lo =
          _mm_add_epi32(lanes_lo, _mm_madd_epi16(_mm_unpacklo_epi16(group[0], group[1]), scl));
      lanes_hi =
          _mm_add_epi32(lanes_hi, _mm_madd_epi16(_mm_unpackhi_epi16(group[0], group[1]), scl));
    }
    const __m256 lanes = _mm256_cvtepi32_ps(_mm256_set_m128i(lanes_hi, lanes_lo));
    const float d = LoadHalf(blk) * y[b].d;
    sums = _mm256_add_ps(sums, _mm256_mul_ps(_mm256_set1_ps(d), lanes));
    const float dmin = LoadHalf(blk + 2) * y[b].d;
    sumf -= dmin * static_cast<float>(sumi);
  }
  alignas(32) float s8[8];
  _mm256_store_ps(s8, sums);
  for (int l = 0; l < 8; ++l) sumf += s8[l];
  return sumf;
}

// ds4's F16 dot: sequential fp32 sum of products. Only the conversion is vectorized.
float DotQ8F16(const uint8_t* w, const float* x, int64_t n) {
  float acc = 0.0f;
  int64_t i = 0;
  alignas(32) float tmp[8];
  for (; i + 8 <= n; i += 8) {
    _mm256_store_ps(tmp, _mm256_mul_ps(LoadF16x8(w + 2 * i), _mm256_loadu_ps(x + i)));
    for (int k = 0; k < 8; ++k) acc += tmp[k];
  }
  for (; i < n; ++i) acc += LoadHalf(w + 2 * i) * x[i];
  return acc;
}

}  // namespace

float DotF32(DType wtype, const void* wrow, const float* x, int64_t n) {
  const uint8_t* w = static_cast<const uint8_t*>(wrow);
  switch (wtype) {
    case DType::kF32:
      return DotDense<4>(w, x, n, LoadF32x8, LoadFloat);
    case DType::kF16:
      return DotDense<2>(w, x, n, LoadF16x8, LoadHalf);
    case DType::kBF16:
      return DotDense<2>(w, x, n, LoadBF16x8, LoadBF16);
    case DType::kQ8_0:
      return DotF32Q8_0(w, x, n);
    case DType::kQ2_K:
      return DotF32Blocks<DequantQ2_K, sizeof(BlockQ2_K)>(w, x, n);
    case DType::kQ4_K:
      return DotF32Blocks<DequantQ4_K, sizeof(BlockQ4_K)>(w, x, n);
    case DType::kIQ2_XXS:
      return DotF32Blocks<DequantIQ2_XXS, sizeof(BlockIQ2_XXS)>(w, x, n);
    default:
      return ref::DotF32(wtype, wrow, x, n);
  }
}

float DotQ8(DType wtype, const void* wrow, const void* xq, int64_t n) {
  const uint8_t* w = static_cast<const uint8_t*>(wrow);
  switch (wtype) {
    case DType::kF16:
      return DotQ8F16(w, static_cast<const float*>(xq), n);
    case DType::kQ8_0:
      return DotQ8Q8_0(w, static_cast<const BlockQ8_0Act*>(xq), n);
    case DType::kQ2_K:
      return DotQ8Q2_K(w, static_cast<const BlockQ8_K*>(xq), n);
    case DType::kQ4_K:
      return DotQ8Q4_K(w, static_cast<const BlockQ8_K*>(xq), n);
    case DType::kIQ2_XXS:
      return DotQ8IQ2_XXS(w, static_cast<const BlockQ8_K*>(xq), n);
    default:
      return ref::DotQ8(wtype, wrow, xq, n);
  }
}

#else  // no AVX2: the references are the kernels

float DotF32(DType wtype, const void* wrow, const float* x, int64_t n) {
  return ref::DotF32(wtype, wrow, x, n);
}
float DotQ8(DType wtype, const void* wrow, const void* xq, int64_t n) {
  return ref::DotQ8(wtype, wrow, xq, n);
}

#endif

}  // namespace flashkv
