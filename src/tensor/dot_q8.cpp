// DotQ8 kernels (ds4's CPU numerics), for 1..4 tokens per pass over a weight row.
//
// Bit-exactness with ref::DotQ8 is the contract: only integer sums (exact in any order) are
// vectorized, and every float operation happens in the reference's order and rounding — per
// block the same products, accumulated sequentially per token. Compiled with
// -ffp-contract=off so nothing is fused. Activation int8 values must lie in [-127, 127] (the
// sign trick negates them); QuantizeAct never produces -128.
#include <cstring>

#include "tensor/dot.h"
#include "tensor/dot_internal.h"
#include "tensor/dot_ref.h"
#include "tensor/iq1_tables.h"
#include "tensor/iq2_tables.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_internal.h"
#include "tensor/simd_avx2.h"

namespace flashkv::internal {

#ifdef FLASHKV_TENSOR_AVX2
namespace {

// Sum over 32 lanes of w * x (int8, x != -128), as 8 int32 partial sums.
inline __m256i DotI8x32(__m256i w, __m256i x) {
  const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

// [sum(v[0]), ..., sum(v[7])] for 8 vectors of 8 int32.
inline __m256i Reduce8(const __m256i* v) {
  const __m256i h01 = _mm256_hadd_epi32(v[0], v[1]);
  const __m256i h23 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i h45 = _mm256_hadd_epi32(v[4], v[5]);
  const __m256i h67 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i a = _mm256_hadd_epi32(h01, h23);  // lane halves: [0 1 2 3 | 0 1 2 3]
  const __m256i b = _mm256_hadd_epi32(h45, h67);  // [4 5 6 7 | 4 5 6 7]
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                          _mm256_permute2x128_si256(a, b, 0x31));
}

constexpr int kQ8_0Bytes = sizeof(BlockQ8_0);

// acc += (f16(d_w) * d_x) * (float)isum, block by block.
template <int NT>
void Q8_0Multi(const uint8_t* w, const void* const* xq, int64_t n, float* out) {
  const BlockQ8_0Act* x[NT];
  for (int t = 0; t < NT; ++t) x[t] = static_cast<const BlockQ8_0Act*>(xq[t]);
  const int64_t nb = n / kQK8_0;
  float acc[NT] = {};
  int64_t b = 0;
  for (; b + 8 <= nb; b += 8) {
    alignas(16) uint16_t dwh[8];
    for (int k = 0; k < 8; ++k) std::memcpy(&dwh[k], w + (b + k) * kQ8_0Bytes, 2);
    const __m256 dw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(dwh)));
    alignas(32) float p[NT][8];
    for (int t = 0; t < NT; ++t) {
      __m256i v[8];
      alignas(32) float dx[8];
      for (int k = 0; k < 8; ++k) {
        const uint8_t* blk = w + (b + k) * kQ8_0Bytes;
        const __m256i qw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
        const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t][b + k].qs));
        v[k] = DotI8x32(qw, qx);
        dx[k] = x[t][b + k].d;
      }
      const __m256 scale = _mm256_mul_ps(dw, _mm256_load_ps(dx));
      _mm256_store_ps(p[t], _mm256_mul_ps(scale, _mm256_cvtepi32_ps(Reduce8(v))));
    }
    for (int k = 0; k < 8; ++k)
      for (int t = 0; t < NT; ++t) acc[t] += p[t][k];
  }
  for (; b < nb; ++b) {
    const uint8_t* blk = w + b * kQ8_0Bytes;
    const __m256i qw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
    const float dw = LoadHalf(blk);
    for (int t = 0; t < NT; ++t) {
      const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t][b].qs));
      acc[t] += dw * x[t][b].d * static_cast<float>(HSumI32(DotI8x32(qw, qx)));
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = acc[t];
}

// pshufb controls that spread scale bytes g (low 128-bit lane) and g + 1 (high lane) over 8
// int16 each: one per (half, shift) step of a Q2_K block, g = 8h + 2s.
struct Q2ScaleShuffles {
  __m256i ctl[8];
  Q2ScaleShuffles() {
    for (int i = 0; i < 8; ++i) {
      alignas(32) uint8_t c[32];
      for (int k = 0; k < 16; ++k) {
        c[k] = k % 2 ? 0x80 : static_cast<uint8_t>(2 * i);
        c[16 + k] = k % 2 ? 0x80 : static_cast<uint8_t>(2 * i + 1);
      }
      ctl[i] = _mm256_load_si256(reinterpret_cast<const __m256i*>(c));
    }
  }
};

// Per block: isum = sum_g (sc_g & 15) * sum(q2 * q8), summs = sum_j bsums_j * (sc_j >> 4);
// acc += (d_x * f16(d)) * isum - (d_x * f16(dmin)) * summs.
template <int NT>
void Q2_KMulti(const uint8_t* w, const void* const* xq, int64_t n, float* out) {
  static const Q2ScaleShuffles shuffles;
  const BlockQ8_K* y[NT];
  for (int t = 0; t < NT; ++t) y[t] = static_cast<const BlockQ8_K*>(xq[t]);
  const __m256i m3 = _mm256_set1_epi8(3);
  float sumf[NT] = {};
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockQ2_K);
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk));
    const __m256i mins16 =
        _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(15)));
    const __m256i scales2 = _mm256_broadcastsi128_si256(_mm_and_si128(sc8, _mm_set1_epi8(15)));
    __m256i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * h));
      for (int s = 0; s < 4; ++s) {
        const __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * s), m3);
        const __m256i scale = _mm256_shuffle_epi8(scales2, shuffles.ctl[4 * h + s]);
        for (int t = 0; t < NT; ++t) {
          const __m256i qx =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].qs + 128 * h + 32 * s));
          isum[t] =
              _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q2, qx), scale));
        }
      }
    }
    const float dw = LoadHalf(blk + 80);
    const float dminw = LoadHalf(blk + 82);
    for (int t = 0; t < NT; ++t) {
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].bsums));
      const int summs = HSumI32(_mm256_madd_epi16(mins16, bsums));
      const float dall = y[t][b].d * dw;
      const float dmin = y[t][b].d * dminw;
      sumf[t] += dall * static_cast<float>(HSumI32(isum[t])) - dmin * static_cast<float>(summs);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = sumf[t];
}

// Per block: bsum = sum_groups (2 ls + 1) * sum(grid * sign * q8); acc += (f16(d) * d_x) * bsum;
// result 0.125 * acc.
template <int NT>
void IQ2_XXSMulti(const uint8_t* w, const void* const* xq, int64_t n, float* out) {
  const BlockQ8_K* y[NT];
  for (int t = 0; t < NT; ++t) y[t] = static_cast<const BlockQ8_K*>(xq[t]);
  float sumf[NT] = {};
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockIQ2_XXS);
    __m256i acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_si256();
    for (int g = 0; g < 8; g += 2) {
      uint32_t words[4];  // a, b of group g, then of group g + 1
      std::memcpy(words, blk + 2 + 8 * g, 16);
      __m256i sign[2];
      Iq2SignBytes2(words[1], words[3], &sign[0], &sign[1]);
      for (int k = 0; k < 2; ++k) {
        const __m256i grid = Iq2GridBytes(words[2 * k]);
        const __m256i ls =
            _mm256_set1_epi16(static_cast<int16_t>(2 * (words[2 * k + 1] >> 28) + 1));
        for (int t = 0; t < NT; ++t) {
          const __m256i qx = _mm256_sign_epi8(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].qs + 32 * (g + k))),
              sign[k]);
          // grid <= 43 and |qx| <= 127: the pair sums cannot saturate.
          acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(_mm256_maddubs_epi16(grid, qx), ls));
        }
      }
    }
    const float dw = LoadHalf(blk);
    for (int t = 0; t < NT; ++t) sumf[t] += dw * y[t][b].d * static_cast<float>(HSumI32(acc[t]));
  }
  for (int t = 0; t < NT; ++t) out[t] = 0.125f * sumf[t];
}

// The 32 sign bytes (+1 / -1) of four IQ2 sign masks (8 bits each, value 8k + j negated where
// bit j of masks byte k is set).
inline __m256i SignBytes32(uint32_t masks) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(masks)), spread);
  return _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit), _mm256_set1_epi8(1));
}

// IQ2_XS: per block bsum = sum over halves of (2 ls + 1) * sum(grid * sign * q8), exact in int32;
// sumf += (f16(d) * d_x) * bsum; result 0.125 * sumf (ref::DotQ8's order).
template <int NT>
void IQ2_XSMulti(const uint8_t* w, const void* const* xq, int64_t n, float* out) {
  const BlockQ8_K* y[NT];
  for (int t = 0; t < NT; ++t) y[t] = static_cast<const BlockQ8_K*>(xq[t]);
  float sumf[NT] = {};
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockIQ2_XS);
    __m256i acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_si256();
    for (int g = 0; g < 8; ++g) {
      uint16_t q[4];
      std::memcpy(q, blk + 2 + 8 * g, 8);
      const __m256i grid = _mm256_set_epi64x(static_cast<int64_t>(kIq2xsGrid[q[3] & 511]),
                                             static_cast<int64_t>(kIq2xsGrid[q[2] & 511]),
                                             static_cast<int64_t>(kIq2xsGrid[q[1] & 511]),
                                             static_cast<int64_t>(kIq2xsGrid[q[0] & 511]));
      const uint32_t masks = kIq2Signs[q[0] >> 9] | (kIq2Signs[q[1] >> 9] << 8) |
                             (kIq2Signs[q[2] >> 9] << 16) |
                             (static_cast<uint32_t>(kIq2Signs[q[3] >> 9]) << 24);
      const __m256i sign = SignBytes32(masks);
      const uint8_t sc = blk[66 + g];
      // Low 128-bit lane: values 0..15 (scale nibble 0); high lane: 16..31 (nibble 1).
      const __m256i ls = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(2 * (sc >> 4) + 1)),
                                          _mm_set1_epi16(static_cast<int16_t>(2 * (sc & 15) + 1)));
      for (int t = 0; t < NT; ++t) {
        const __m256i qx = _mm256_sign_epi8(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].qs + 32 * g)), sign);
        // grid <= 43 and |qx| <= 127: the pair sums cannot saturate.
        acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(_mm256_maddubs_epi16(grid, qx), ls));
      }
    }
    const float dw = LoadHalf(blk);
    for (int t = 0; t < NT; ++t) sumf[t] += dw * y[t][b].d * static_cast<float>(HSumI32(acc[t]));
  }
  for (int t = 0; t < NT; ++t) out[t] = 0.125f * sumf[t];
}

// IQ1_M: per block the exact sumi1 = sum (2s + 1) * sum(grid * q8) and sumi2 = sum (2s + 1) *
// (+-1) * sum(q8) (grid + 1 in {0, 1, 2} makes maddubs usable: grid * q8 = (grid + 1) * q8 -
// q8); sumf += (f16(scale) * d_x) * ((float)sumi1 + 0.125 * (float)sumi2) (ref::DotQ8's order).
template <int NT>
void IQ1_MMulti(const uint8_t* w, const void* const* xq, int64_t n, float* out) {
  const BlockQ8_K* y[NT];
  for (int t = 0; t < NT; ++t) y[t] = static_cast<const BlockQ8_K*>(xq[t]);
  const __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i plus1 = _mm256_set1_epi64x(0x0101010101010101ll);
  float sumf[NT] = {};
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockIQ1_M);
    __m256i s1[NT], s2[NT];
    for (int t = 0; t < NT; ++t) s1[t] = s2[t] = _mm256_setzero_si256();
    for (int g = 0; g < 8; ++g) {
      int ls[2];
      internal::Iq1mGroupScales(blk + 48, g, &ls[0], &ls[1]);
      int64_t grid[4];
      int16_t m1[4], m2[4];
      for (int k = 0; k < 4; ++k) {
        bool neg;
        grid[k] = static_cast<int64_t>(kIq1sGrid[internal::Iq1mRun(blk, g, k, &neg)]);
        m1[k] = static_cast<int16_t>(ls[k / 2]);
        m2[k] = static_cast<int16_t>(neg ? -ls[k / 2] : ls[k / 2]);
      }
      // Grid bytes -1 / 0 / +1 plus one per byte: no carries between bytes.
      const __m256i gp1 =
          _mm256_add_epi8(_mm256_set_epi64x(grid[3], grid[2], grid[1], grid[0]), plus1);
      // int16 pair k covers values 2k, 2k + 1: run k / 4.
      const __m256i w1 = _mm256_setr_epi16(m1[0], m1[0], m1[0], m1[0], m1[1], m1[1], m1[1], m1[1],
                                           m1[2], m1[2], m1[2], m1[2], m1[3], m1[3], m1[3], m1[3]);
      const __m256i w2 = _mm256_setr_epi16(m2[0], m2[0], m2[0], m2[0], m2[1], m2[1], m2[1], m2[1],
                                           m2[2], m2[2], m2[2], m2[2], m2[3], m2[3], m2[3], m2[3]);
      for (int t = 0; t < NT; ++t) {
        const __m256i qx =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].qs + 32 * g));
        const __m256i sq = _mm256_maddubs_epi16(ones8, qx);  // pair sums of q8
        // (grid + 1) <= 2, |q8| <= 127: no saturation; minus the q8 pair sums: grid * q8.
        const __m256i gq = _mm256_sub_epi16(_mm256_maddubs_epi16(gp1, qx), sq);
        s1[t] = _mm256_add_epi32(s1[t], _mm256_madd_epi16(gq, w1));
        s2[t] = _mm256_add_epi32(s2[t], _mm256_madd_epi16(sq, w2));
      }
    }
    const float dw = internal::Iq1mScale(blk + 48);
    for (int t = 0; t < NT; ++t) {
      const float inner =
          static_cast<float>(HSumI32(s1[t])) + kIq1Delta * static_cast<float>(HSumI32(s2[t]));
      sumf[t] += dw * y[t][b].d * inner;
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = sumf[t];
}

// MXFP4: per block the doubled E2M1 values (a pshufb of the nibbles into kMxfp4Doubled) times
// q8, summed exactly in int32; acc += (2^(e-128) * d_x) * isum, blocks in order per token.
template <int NT>
void MXFP4Multi(const uint8_t* w, const void* const* xq, int64_t n, float* out) {
  const BlockQ8_0Act* x[NT];
  for (int t = 0; t < NT; ++t) x[t] = static_cast<const BlockQ8_0Act*>(xq[t]);
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Doubled));
  const __m128i m15 = _mm_set1_epi8(15);
  float acc[NT] = {};
  for (int64_t b = 0; b < n / kQKMxfp4; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockMXFP4);
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 1));
    const __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(q, m15));                     // 0..15
    const __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q, 4), m15));  // 16..31
    const __m256i wv = _mm256_set_m128i(hi, lo);
    const float dw = Mxfp4HalfScale(blk[0]);
    for (int t = 0; t < NT; ++t) {
      const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t][b].qs));
      acc[t] += dw * x[t][b].d * static_cast<float>(HSumI32(DotI8x32(wv, qx)));
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = acc[t];
}

// GGML's generic Q4_K order: per block 8 int32 lanes (value index mod 8) of sc * q4 * q8, then
// sums[l] += (f16(d) * d_x) * lane[l]; acc -= (f16(dmin) * d_x) * sum(bsums * mins); finally
// acc += sums[0] + ... + sums[7] in lane order.
template <int NT>
void Q4_KMulti(const uint8_t* w, const void* const* xq, int64_t n, float* out) {
  const BlockQ8_K* y[NT];
  for (int t = 0; t < NT; ++t) y[t] = static_cast<const BlockQ8_K*>(xq[t]);
  const __m256i m15 = _mm256_set1_epi8(15);
  const __m256i pair_lanes =
      _mm256_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15,  //
                       0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  __m256 sums[NT];
  float sumf[NT] = {};
  for (int t = 0; t < NT; ++t) sums[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockQ4_K);
    int sc[8], mn[8];
    for (int g = 0; g < 8; ++g) Q4KScaleMin(blk + 4, g, &sc[g], &mn[g]);
    alignas(32) int16_t mn16[16];
    for (int j = 0; j < 16; ++j) mn16[j] = static_cast<int16_t>(mn[j / 2]);
    const __m256i mins = _mm256_load_si256(reinterpret_cast<const __m256i*>(mn16));
    __m128i lo[NT], hi[NT];
    for (int t = 0; t < NT; ++t) lo[t] = hi[t] = _mm_setzero_si128();
    for (int p = 0; p < 4; ++p) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * p));
      const __m256i nib_lo = _mm256_and_si256(bits, m15);
      const __m256i nib_hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m15);
      // Interleave bytes j and j + 8 of every 16 so maddubs pairs values of the same lane
      // (index mod 8); the activations get the same shuffle.
      const __m256i q[2] = {_mm256_shuffle_epi8(nib_lo, pair_lanes),
                            _mm256_shuffle_epi8(nib_hi, pair_lanes)};
      const int16_t s0 = static_cast<int16_t>(sc[2 * p]), s1 = static_cast<int16_t>(sc[2 * p + 1]);
      const __m128i scl = _mm_set_epi16(s1, s0, s1, s0, s1, s0, s1, s0);
      for (int t = 0; t < NT; ++t) {
        const int8_t* x8 = y[t][b].qs + 64 * p;
        __m128i group[2];
        for (int k = 0; k < 2; ++k) {
          const __m256i xs = _mm256_shuffle_epi8(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x8 + 32 * k)), pair_lanes);
          // q4 <= 15: each int16 is two products of one lane, |.| <= 2 * 15 * 128.
          const __m256i s = _mm256_maddubs_epi16(q[k], xs);
          group[k] = _mm_add_epi16(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        }
        lo[t] = _mm_add_epi32(lo[t], _mm_madd_epi16(_mm_unpacklo_epi16(group[0], group[1]), scl));
        hi[t] = _mm_add_epi32(hi[t], _mm_madd_epi16(_mm_unpackhi_epi16(group[0], group[1]), scl));
      }
    }
    const float dw = LoadHalf(blk);
    const float dminw = LoadHalf(blk + 2);
    for (int t = 0; t < NT; ++t) {
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].bsums));
      const int sumi = HSumI32(_mm256_madd_epi16(bsums, mins));
      const __m256 lanes = _mm256_cvtepi32_ps(_mm256_set_m128i(hi[t], lo[t]));
      sums[t] = _mm256_add_ps(sums[t], _mm256_mul_ps(_mm256_set1_ps(dw * y[t][b].d), lanes));
      sumf[t] -= dminw * y[t][b].d * static_cast<float>(sumi);
    }
  }
  for (int t = 0; t < NT; ++t) {
    alignas(32) float s8[8];
    _mm256_store_ps(s8, sums[t]);
    for (int l = 0; l < 8; ++l) sumf[t] += s8[l];
    out[t] = sumf[t];
  }
}

// ds4's F16 (and our BF16) dot: acc += f32(w[i]) * x[i] sequentially, in fp32. The products
// are computed 8 at a time (same rounding); the adds stay in order, tokens interleaved.
template <int NT, __m256 (*Load8)(const uint8_t*), float (*Load1)(const uint8_t*)>
void HalfMulti(const uint8_t* w, const void* const* xq, int64_t n, float* out) {
  const float* x[NT];
  for (int t = 0; t < NT; ++t) x[t] = static_cast<const float*>(xq[t]);
  float acc[NT] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 wv = Load8(w + 2 * i);
    alignas(32) float p[NT][8];
    for (int t = 0; t < NT; ++t)
      _mm256_store_ps(p[t], _mm256_mul_ps(wv, _mm256_loadu_ps(x[t] + i)));
    for (int k = 0; k < 8; ++k)
      for (int t = 0; t < NT; ++t) acc[t] += p[t][k];
  }
  for (; i < n; ++i) {
    const float wi = Load1(w + 2 * i);
    for (int t = 0; t < NT; ++t) acc[t] += wi * x[t][i];
  }
  for (int t = 0; t < NT; ++t) out[t] = acc[t];
}

float LoadF16(const uint8_t* p) {
  return LoadHalf(p);
}

float LoadBF16(const uint8_t* p) {
  uint16_t b;
  std::memcpy(&b, p, 2);
  return BF16ToF32(b);
}

// 8x8 transpose of 16-bit values: r[k] holds row k, c[k] comes out as column k.
inline void Transpose8x16(const __m128i* r, __m128i* c) {
  const __m128i t0 = _mm_unpacklo_epi16(r[0], r[1]), t1 = _mm_unpackhi_epi16(r[0], r[1]);
  const __m128i t2 = _mm_unpacklo_epi16(r[2], r[3]), t3 = _mm_unpackhi_epi16(r[2], r[3]);
  const __m128i t4 = _mm_unpacklo_epi16(r[4], r[5]), t5 = _mm_unpackhi_epi16(r[4], r[5]);
  const __m128i t6 = _mm_unpacklo_epi16(r[6], r[7]), t7 = _mm_unpackhi_epi16(r[6], r[7]);
  const __m128i u0 = _mm_unpacklo_epi32(t0, t2), u1 = _mm_unpackhi_epi32(t0, t2);
  const __m128i u2 = _mm_unpacklo_epi32(t1, t3), u3 = _mm_unpackhi_epi32(t1, t3);
  const __m128i u4 = _mm_unpacklo_epi32(t4, t6), u5 = _mm_unpackhi_epi32(t4, t6);
  const __m128i u6 = _mm_unpacklo_epi32(t5, t7), u7 = _mm_unpackhi_epi32(t5, t7);
  c[0] = _mm_unpacklo_epi64(u0, u4);
  c[1] = _mm_unpackhi_epi64(u0, u4);
  c[2] = _mm_unpacklo_epi64(u1, u5);
  c[3] = _mm_unpackhi_epi64(u1, u5);
  c[4] = _mm_unpacklo_epi64(u2, u6);
  c[5] = _mm_unpackhi_epi64(u2, u6);
  c[6] = _mm_unpacklo_epi64(u3, u7);
  c[7] = _mm_unpackhi_epi64(u3, u7);
}

inline __m256 WidenF16(__m128i h) {
  return _mm256_cvtph_ps(h);
}
inline __m256 WidenBF16(__m128i h) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// Eight F16/BF16 rows against one token, the rows in the 8 lanes of one accumulator: lane r
// runs exactly row r's sequential chain acc += f32(w[r][i]) * x[i], so the result is the
// single-row kernel's, with 8 chains in flight instead of one.
template <__m256 (*Widen)(__m128i), float (*Load1)(const uint8_t*)>
void HalfRows8(const uint8_t* w, int64_t row_bytes, const float* x, int64_t n, float* out) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i r[8], c[8];
    for (int k = 0; k < 8; ++k)
      r[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + k * row_bytes + 2 * i));
    Transpose8x16(r, c);
    for (int k = 0; k < 8; ++k)
      acc = _mm256_add_ps(acc, _mm256_mul_ps(Widen(c[k]), _mm256_set1_ps(x[i + k])));
  }
  _mm256_storeu_ps(out, acc);
  for (; i < n; ++i)
    for (int r = 0; r < 8; ++r) out[r] += Load1(w + r * row_bytes + 2 * i) * x[i];
}

using MultiFn = void (*)(const uint8_t*, const void* const*, int64_t, float*);

template <int NT>
MultiFn KernelFor(DType t) {
  switch (t) {
    case DType::kQ8_0:
      return Q8_0Multi<NT>;
    case DType::kQ2_K:
      return Q2_KMulti<NT>;
    case DType::kQ4_K:
      return Q4_KMulti<NT>;
    case DType::kIQ2_XXS:
      return IQ2_XXSMulti<NT>;
    case DType::kIQ2_XS:
      return IQ2_XSMulti<NT>;
    case DType::kIQ1_M:
      return IQ1_MMulti<NT>;
    case DType::kMXFP4:
      return MXFP4Multi<NT>;
    case DType::kF16:
      return HalfMulti<NT, LoadF16x8, LoadF16>;
    case DType::kBF16:
      return HalfMulti<NT, LoadBF16x8, LoadBF16>;
    default:
      return nullptr;
  }
}

}  // namespace

void DotQ8Multi(DType wtype, const void* wrow, const void* const* xq, int n_tok, int64_t n,
                float* out) {
  MultiFn fn = nullptr;
  switch (n_tok) {
    case 1:
      fn = KernelFor<1>(wtype);
      break;
    case 2:
      fn = KernelFor<2>(wtype);
      break;
    case 3:
      fn = KernelFor<3>(wtype);
      break;
    case 4:
      fn = KernelFor<4>(wtype);
      break;
    default:
      break;
  }
  if (fn) {
    fn(static_cast<const uint8_t*>(wrow), xq, n, out);
    return;
  }
  for (int t = 0; t < n_tok; ++t) out[t] = ref::DotQ8(wtype, wrow, xq[t], n);
}

bool HasDotQ8Rows8(DType wtype) {
  return wtype == DType::kF16 || wtype == DType::kBF16;
}

void DotQ8Rows8(DType wtype, const void* w, int64_t row_bytes, const void* xq, int64_t n,
                float* out) {
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const float* x = static_cast<const float*>(xq);
  if (wtype == DType::kF16) {
    HalfRows8<WidenF16, LoadF16>(wb, row_bytes, x, n, out);
  } else if (wtype == DType::kBF16) {
    HalfRows8<WidenBF16, LoadBF16>(wb, row_bytes, x, n, out);
  }
}

#else  // no AVX2: the scalar references are the kernels

bool HasDotQ8Rows8(DType) {
  return false;
}
void DotQ8Rows8(DType, const void*, int64_t, const void*, int64_t, float*) {}

void DotQ8Multi(DType wtype, const void* wrow, const void* const* xq, int n_tok, int64_t n,
                float* out) {
  for (int t = 0; t < n_tok; ++t) out[t] = ref::DotQ8(wtype, wrow, xq[t], n);
}

#endif

}  // namespace flashkv::internal
