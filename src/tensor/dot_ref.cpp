// Scalar reference kernels. DotQ8 transcribes the arithmetic of ds4.c's x86 (non-NEON) CPU
// kernels and GGML's generic Q4_K kernel; this file is compiled with -ffp-contract=off (see
// CMakeLists.txt) so no multiply-add is fused, as in ds4's strict IEEE reference build.
#include "tensor/dot_ref.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "tensor/half.h"
#include "tensor/iq1_tables.h"
#include "tensor/iq2_tables.h"
#include "tensor/iq3_tables.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_internal.h"

namespace flashkv::ref {
namespace {

using internal::LoadFloat;
using internal::LoadHalf;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

float DotQ8_0(const uint8_t* w, const BlockQ8_0Act* x, int64_t n) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockQ8_0);
    const int8_t* qs = reinterpret_cast<const int8_t*>(blk + 2);
    int32_t isum = 0;
    for (int i = 0; i < kQK8_0; ++i) isum += static_cast<int32_t>(qs[i]) * x[b].qs[i];
    acc += LoadHalf(blk) * x[b].d * static_cast<float>(isum);
  }
  return acc;
}

float DotQ2_K(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockQ2_K);
    const uint8_t* sc = blk;
    const uint8_t* q2 = blk + 16;
    const int8_t* q8 = y[b].qs;
    int summs = 0;
    for (int j = 0; j < 16; ++j) summs += y[b].bsums[j] * (sc[j] >> 4);
    const float dall = y[b].d * LoadHalf(blk + 80);
    const float dmin = y[b].d * LoadHalf(blk + 82);
    int isum = 0;
    int is = 0;
    for (int h = 0; h < 2; ++h) {
      for (int s = 0; s < 4; ++s) {
        for (int part = 0; part < 2; ++part) {
          int sub = 0;
          for (int l = 0; l < 16; ++l)
            sub += q8[16 * part + l] * ((q2[16 * part + l] >> (2 * s)) & 3);
          isum += (sc[is++] & 15) * sub;
        }
        q8 += 32;
      }
      q2 += 32;
    }
    sumf += dall * static_cast<float>(isum) - dmin * static_cast<float>(summs);
  }
  return sumf;
}

float DotIQ2_XXS(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockIQ2_XXS);
    const float d = LoadHalf(blk) * y[b].d;
    const int8_t* q8 = y[b].qs;
    int32_t bsum = 0;
    for (int g = 0; g < 8; ++g) {
      uint32_t a, s;
      std::memcpy(&a, blk + 2 + 8 * g, 4);
      std::memcpy(&s, blk + 2 + 8 * g + 4, 4);
      const int32_t ls = static_cast<int32_t>(2 * (s >> 28) + 1);
      int32_t sumi = 0;
      for (int k = 0; k < 4; ++k) {
        const uint64_t grid = kIq2xxsGrid[(a >> (8 * k)) & 0xff];
        const uint8_t signs = kIq2Signs[(s >> (7 * k)) & 127];
        for (int j = 0; j < 8; ++j) {
          const int32_t mag = static_cast<int32_t>((grid >> (8 * j)) & 0xff);
          sumi += ((signs >> j) & 1 ? -mag : mag) * q8[j];
        }
        q8 += 8;
      }
      bsum += sumi * ls;
    }
    sumf += d * static_cast<float>(bsum);
  }
  return 0.125f * sumf;
}

// The part Q4_K and Q5_K share once a block's quants are unpacked into `a`: ggml's order —
// 8 int32 lanes (lane i % 8) of group scale × q × q8, then sums[l] += (f16(d) · d_x) · lane[l];
// returns the block's mins term (f16(dmin) · d_x) · Σ bsums · min, which the caller subtracts.
float ScaleMinBlock(const uint8_t* blk, const int8_t* a, const BlockQ8_K& y, float* sums) {
  int sc[8], mn[8];
  for (int g = 0; g < 8; ++g) internal::Q4KScaleMin(blk + 4, g, &sc[g], &mn[g]);
  int sumi = 0;
  for (int j = 0; j < 16; ++j) sumi += y.bsums[j] * mn[j / 2];
  int32_t lanes[8] = {};
  for (int i = 0; i < kQK_K; ++i) lanes[i % 8] += sc[i / 32] * (y.qs[i] * a[i]);
  const float d = LoadHalf(blk) * y.d;
  for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(lanes[l]);
  const float dmin = LoadHalf(blk + 2) * y.d;
  return dmin * static_cast<float>(sumi);
}

float DotQ4_K(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  float sums[8] = {};
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockQ4_K);
    const uint8_t* q4 = blk + 16;
    int8_t a[kQK_K];
    for (int p = 0; p < 4; ++p)
      for (int l = 0; l < 32; ++l) {
        a[64 * p + l] = static_cast<int8_t>(q4[32 * p + l] & 15);
        a[64 * p + 32 + l] = static_cast<int8_t>(q4[32 * p + l] >> 4);
      }
    sumf -= ScaleMinBlock(blk, a, y[b], sums);
  }
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

// GGML's ggml_vec_dot_q3_K_q8_K_generic order: signed 3-bit quants times q8 into 8 int32
// lanes (lane i % 8) weighted by the group scale, then per block sums[l] += (f16(d) * d_x) *
// lane[l], the 8 lane sums added at the end.
float DotQ3_K(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  float sums[8] = {};
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockQ3_K);
    const uint8_t* hmask = blk;
    const uint8_t* qs = blk + 32;
    int sc[16];
    internal::Q3KScales(blk + 96, sc);
    int32_t lanes[8] = {};
    for (int i = 0; i < kQK_K; ++i) {
      const int h = i / 128, s = (i % 128) / 32, l = i % 32;
      const int q = ((qs[32 * h + l] >> (2 * s)) & 3) - ((hmask[l] >> (4 * h + s)) & 1 ? 0 : 4);
      lanes[i % 8] += sc[i / 16] * (y[b].qs[i] * q);
    }
    const float d = LoadHalf(blk + 108) * y[b].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(lanes[l]);
  }
  float sumf = 0.0f;
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

// GGML's ggml_vec_dot_q5_K_q8_K_generic order, as Q4_K with the fifth bit.
float DotQ5_K(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  float sums[8] = {};
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockQ5_K);
    const uint8_t* qh = blk + 16;
    const uint8_t* q5 = blk + 48;
    int8_t a[kQK_K];
    for (int p = 0; p < 4; ++p)
      for (int l = 0; l < 32; ++l) {
        a[64 * p + l] = static_cast<int8_t>((q5[32 * p + l] & 15) + ((qh[l] >> (2 * p)) & 1) * 16);
        a[64 * p + 32 + l] =
            static_cast<int8_t>((q5[32 * p + l] >> 4) + ((qh[l] >> (2 * p + 1)) & 1) * 16);
      }
    sumf -= ScaleMinBlock(blk, a, y[b], sums);
  }
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

// GGML's ggml_vec_dot_q6_K_q8_K_generic order: (q - 32) times q8 into 8 int32 lanes weighted by
// the int8 group scale, then per block sums[l] += (f16(d) * d_x) * lane[l].
float DotQ6_K(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  float sums[8] = {};
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockQ6_K);
    const int8_t* scales = reinterpret_cast<const int8_t*>(blk + 192);
    int8_t a[kQK_K];
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = blk + 64 * h;
      const uint8_t* qh = blk + 128 + 32 * h;
      for (int l = 0; l < 32; ++l) {
        a[128 * h + l] = static_cast<int8_t>(((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32);
        a[128 * h + 32 + l] =
            static_cast<int8_t>(((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32);
        a[128 * h + 64 + l] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        a[128 * h + 96 + l] =
            static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
      }
    }
    int32_t lanes[8] = {};
    for (int i = 0; i < kQK_K; ++i) lanes[i % 8] += scales[i / 16] * (y[b].qs[i] * a[i]);
    const float d = LoadHalf(blk + 208) * y[b].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(lanes[l]);
  }
  float sumf = 0.0f;
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

// MXFP4 x Q8_0Act: GGML's ggml_vec_dot_mxfp4_q8_0 order with ds4's fp32 activation scale (ds4
// itself has no MXFP4 kernel): per block acc += (2^(e-128) * d_x) * sum(doubled e2m1 * q8),
// block order, fp32.
float DotMXFP4(const uint8_t* w, const BlockQ8_0Act* x, int64_t n) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQKMxfp4; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockMXFP4);
    int32_t isum = 0;
    for (int j = 0; j < kQKMxfp4 / 2; ++j) {
      isum += kMxfp4Doubled[blk[1 + j] & 15] * x[b].qs[j];
      isum += kMxfp4Doubled[blk[1 + j] >> 4] * x[b].qs[j + kQKMxfp4 / 2];
    }
    acc += internal::Mxfp4HalfScale(blk[0]) * x[b].d * static_cast<float>(isum);
  }
  return acc;
}

// GGML's ggml_vec_dot_iq2_xs_q8_K_generic: per block bsum = sum over halves of (2 ls + 1) *
// sum(grid * sign * q8), exact; sumf += (f16(d) * d_x) * bsum; result 0.125 * sumf.
float DotIQ2_XS(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockIQ2_XS);
    const float d = LoadHalf(blk) * y[b].d;
    const uint8_t* scales = blk + 66;
    const int8_t* q8 = y[b].qs;
    int32_t bsum = 0;
    for (int g = 0; g < 8; ++g) {
      for (int half = 0; half < 2; ++half) {
        const int32_t ls = 2 * ((scales[g] >> (4 * half)) & 15) + 1;
        int32_t sumi = 0;
        for (int k = 2 * half; k < 2 * half + 2; ++k) {
          uint16_t q;
          std::memcpy(&q, blk + 2 + 2 * (4 * g + k), 2);
          const uint64_t grid = kIq2xsGrid[q & 511];
          const uint8_t signs = kIq2Signs[q >> 9];
          for (int j = 0; j < 8; ++j) {
            const int32_t mag = static_cast<int32_t>((grid >> (8 * j)) & 0xff);
            sumi += ((signs >> j) & 1 ? -mag : mag) * q8[j];
          }
          q8 += 8;
        }
        bsum += sumi * ls;
      }
    }
    sumf += d * static_cast<float>(bsum);
  }
  return 0.125f * sumf;
}

// GGML's ggml_vec_dot_iq1_m_q8_K_generic: per block the exact integers sumi1 = sum (2s + 1) *
// sum(grid * q8) and sumi2 = sum (2s + 1) * (±1) * sum(q8); sumf += (f16(scale) * d_x) *
// ((float)sumi1 + 0.125 * (float)sumi2), fp32, blocks in order.
float DotIQ1_M(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockIQ1_M);
    const int8_t* q8 = y[b].qs;
    int32_t sumi1 = 0, sumi2 = 0;
    for (int g = 0; g < 8; ++g) {
      int ls[2];
      internal::Iq1mGroupScales(blk + 48, g, &ls[0], &ls[1]);
      for (int k = 0; k < 4; ++k) {
        bool neg;
        const uint64_t grid = kIq1sGrid[internal::Iq1mRun(blk, g, k, &neg)];
        int32_t s1 = 0, s2 = 0;
        for (int j = 0; j < 8; ++j) {
          s1 += q8[j] * static_cast<int8_t>((grid >> (8 * j)) & 0xff);
          s2 += q8[j];
        }
        q8 += 8;
        sumi1 += s1 * ls[k / 2];
        sumi2 += (neg ? -s2 : s2) * ls[k / 2];
      }
    }
    const float d = internal::Iq1mScale(blk + 48) * y[b].d;
    sumf += d * (static_cast<float>(sumi1) + kIq1Delta * static_cast<float>(sumi2));
  }
  return sumf;
}

uint32_t U32At(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint16_t U16At(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Signed sum of the magnitudes (bytes of grid, lowest first) times q8, bit j of signs
// negating byte j; `count` values.
int32_t SignedGridSum(uint64_t grid, unsigned signs, const int8_t* q8, int count) {
  int32_t sum = 0;
  for (int j = 0; j < count; ++j) {
    const int32_t mag = static_cast<int32_t>((grid >> (8 * j)) & 0xff);
    sum += ((signs >> j) & 1 ? -mag : mag) * q8[j];
  }
  return sum;
}

// GGML's ggml_vec_dot_iq3_xxs_q8_K_generic: per block bsum = sum over groups of (2 ls + 1) *
// sum(grid * sign * q8), exact; sumf += (f16(d) * d_x) * bsum; result 0.25 * sumf.
float DotIQ3_XXS(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockIQ3_XXS);
    const float d = LoadHalf(blk) * y[b].d;
    const int8_t* q8 = y[b].qs;
    int32_t bsum = 0;
    for (int g = 0; g < 8; ++g) {
      const uint32_t aux = U32At(blk + 66 + 4 * g);
      int32_t sumi = 0;
      for (int l = 0; l < 4; ++l) {
        const unsigned signs = kIq2Signs[(aux >> (7 * l)) & 127];
        sumi += SignedGridSum(kIq3xxsGrid[blk[2 + 8 * g + 2 * l]], signs, q8, 4);
        sumi += SignedGridSum(kIq3xxsGrid[blk[3 + 8 * g + 2 * l]], signs >> 4, q8 + 4, 4);
        q8 += 8;
      }
      bsum += sumi * static_cast<int32_t>(2 * (aux >> 28) + 1);
    }
    sumf += d * static_cast<float>(bsum);
  }
  return 0.25f * sumf;
}

// GGML's ggml_vec_dot_iq3_s_q8_K_generic: bsum = sum over groups of (2 s + 1) * sum(grid *
// sign * q8), exact; sumf += (f16(d) * d_x) * bsum.
float DotIQ3_S(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockIQ3_S);
    const float d = LoadHalf(blk) * y[b].d;
    const uint8_t* qh = blk + 66;
    const uint8_t* signs = blk + 74;
    const int8_t* q8 = y[b].qs;
    int32_t bsum = 0;
    for (int g = 0; g < 8; ++g) {
      const int32_t ls = 2 * ((blk[106 + g / 2] >> (4 * (g % 2))) & 15) + 1;
      int32_t sumi = 0;
      for (int l = 0; l < 4; ++l) {
        const int i1 = blk[2 + 8 * g + 2 * l] | ((qh[g] << (8 - 2 * l)) & 256);
        const int i2 = blk[3 + 8 * g + 2 * l] | ((qh[g] << (7 - 2 * l)) & 256);
        sumi += SignedGridSum(kIq3sGrid[i1], signs[4 * g + l], q8, 4);
        sumi += SignedGridSum(kIq3sGrid[i2], signs[4 * g + l] >> 4, q8 + 4, 4);
        q8 += 8;
      }
      bsum += sumi * ls;
    }
    sumf += d * static_cast<float>(bsum);
  }
  return sumf;
}

// GGML's ggml_vec_dot_iq2_s_q8_K_generic: bsum = sum of ls1 * sumi1 + ls2 * sumi2 per group,
// exact; sumf += (f16(d) * d_x) * bsum; result 0.125 * sumf.
float DotIQ2_S(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockIQ2_S);
    const float d = LoadHalf(blk) * y[b].d;
    const uint8_t* qh = blk + 66;
    const int8_t* q8 = y[b].qs;
    int32_t bsum = 0;
    for (int g = 0; g < 8; ++g) {
      int32_t sumi[2] = {0, 0};
      for (int l = 0; l < 4; ++l) {
        const uint64_t grid = kIq2sGrid[blk[2 + 4 * g + l] | ((qh[g] << (8 - 2 * l)) & 0x300)];
        sumi[l / 2] += SignedGridSum(grid, blk[34 + 4 * g + l], q8, 8);
        q8 += 8;
      }
      const uint8_t sc = blk[74 + g];
      bsum += (2 * (sc & 15) + 1) * sumi[0] + (2 * (sc >> 4) + 1) * sumi[1];
    }
    sumf += d * static_cast<float>(bsum);
  }
  return 0.125f * sumf;
}

// GGML's ggml_vec_dot_iq1_s_q8_K_generic: the exact integers sumi = sum (2s + 1) * sum(grid *
// q8) and sumi1 = sum (2s + 1) * (±1) * sum(q8) (through bsums); sumf += (f16(d) * d_x) *
// ((float)sumi + 0.125 * (float)sumi1).
float DotIQ1_S(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockIQ1_S);
    const int8_t* q8 = y[b].qs;
    int32_t sumi = 0, sumi1 = 0;
    for (int g = 0; g < 8; ++g) {
      const uint16_t qh = U16At(blk + 34 + 2 * g);
      const int32_t ls = 2 * ((qh >> 12) & 7) + 1;
      const int32_t delta = qh & 0x8000 ? -1 : 1;
      int32_t lsum = 0;
      for (int l = 0; l < 4; ++l) {
        const uint64_t grid = kIq1sGrid[blk[2 + 4 * g + l] | (((qh >> (3 * l)) & 7) << 8)];
        for (int j = 0; j < 8; ++j) lsum += q8[j] * static_cast<int8_t>((grid >> (8 * j)) & 0xff);
        q8 += 8;
      }
      sumi += ls * lsum;
      sumi1 += ls * delta * (y[b].bsums[2 * g] + y[b].bsums[2 * g + 1]);
    }
    sumf +=
        LoadHalf(blk) * y[b].d * (static_cast<float>(sumi) + kIq1Delta * static_cast<float>(sumi1));
  }
  return sumf;
}

// GGML's ggml_vec_dot_iq4_nl_q8_0_generic with ds4's fp32 activation scale (as MXFP4): per
// block acc += (f16(d) * d_x) * sum(kvalues * q8), blocks in order, fp32.
float DotIQ4_NL(const uint8_t* w, const BlockQ8_0Act* x, int64_t n) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK4_NL; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockIQ4_NL);
    int32_t isum = 0;
    for (int j = 0; j < kQK4_NL / 2; ++j) {
      isum += kIq4nlValues[blk[2 + j] & 15] * x[b].qs[j];
      isum += kIq4nlValues[blk[2 + j] >> 4] * x[b].qs[j + kQK4_NL / 2];
    }
    acc += LoadHalf(blk) * x[b].d * static_cast<float>(isum);
  }
  return acc;
}

// GGML's ggml_vec_dot_iq4_xs_q8_K_generic: per group g sumf += ((f16(d) * d_x) * (ls - 32)) *
// sum(kvalues * q8), groups and blocks in order, fp32.
float DotIQ4_XS(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockIQ4_XS);
    const float d4d8 = LoadHalf(blk) * y[b].d;
    const uint16_t scales_h = U16At(blk + 2);
    const int8_t* q8 = y[b].qs;
    for (int g = 0; g < 8; ++g) {
      const int ls = ((blk[4 + g / 2] >> (4 * (g % 2))) & 15) | (((scales_h >> (2 * g)) & 3) << 4);
      const float dg = d4d8 * static_cast<float>(ls - 32);
      const uint8_t* qs = blk + 8 + 16 * g;
      int32_t sumi = 0;
      for (int j = 0; j < 16; ++j) {
        sumi += q8[j] * kIq4nlValues[qs[j] & 15];
        sumi += q8[j + 16] * kIq4nlValues[qs[j] >> 4];
      }
      sumf += dg * static_cast<float>(sumi);
      q8 += 32;
    }
  }
  return sumf;
}

float DotQ8_K(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockQ8_K);
    const int8_t* qs = reinterpret_cast<const int8_t*>(blk + 4);
    int32_t isum = 0;
    for (int i = 0; i < kQK_K; ++i) isum += static_cast<int32_t>(qs[i]) * y[b].qs[i];
    acc += LoadFloat(blk) * y[b].d * static_cast<float>(isum);
  }
  return acc;
}

}  // namespace

float DotF32(DType wtype, const void* wrow, const float* x, int64_t n) {
  const uint8_t* w = static_cast<const uint8_t*>(wrow);
  double acc = 0.0;
  switch (wtype) {
    case DType::kF32:
      for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(LoadFloat(w + 4 * i)) * x[i];
      return static_cast<float>(acc);
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(LoadHalf(w + 2 * i)) * x[i];
      return static_cast<float>(acc);
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, w + 2 * i, 2);
        acc += static_cast<double>(BF16ToF32(b)) * x[i];
      }
      return static_cast<float>(acc);
    default:
      break;
  }
  const internal::BlockDequantFn fn = internal::ScalarBlockDequant(wtype);
  if (fn == nullptr) return kNaN;
  const int bs = static_cast<int>(GetDTypeInfo(wtype).block_size);
  const int bb = static_cast<int>(GetDTypeInfo(wtype).block_bytes);
  float buf[kQK_K];
  for (int64_t b = 0; b < n / bs; ++b) {
    fn(w + b * bb, buf);
    for (int i = 0; i < bs; ++i) acc += static_cast<double>(buf[i]) * x[b * bs + i];
  }
  return static_cast<float>(acc);
}

float DotQ8(DType wtype, const void* wrow, const void* xq, int64_t n) {
  const uint8_t* w = static_cast<const uint8_t*>(wrow);
  switch (wtype) {
    case DType::kF32: {  // ds4 matvec_f32: double, sequential
      const float* x = static_cast<const float*>(xq);
      double acc = 0.0;
      for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(LoadFloat(w + 4 * i)) * x[i];
      return static_cast<float>(acc);
    }
    case DType::kF16: {  // ds4 dot_f16_row: fp32, sequential
      const float* x = static_cast<const float*>(xq);
      float acc = 0.0f;
      for (int64_t i = 0; i < n; ++i) acc += LoadHalf(w + 2 * i) * x[i];
      return acc;
    }
    case DType::kBF16: {
      const float* x = static_cast<const float*>(xq);
      float acc = 0.0f;
      for (int64_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, w + 2 * i, 2);
        acc += BF16ToF32(b) * x[i];
      }
      return acc;
    }
    case DType::kQ8_0:
      return DotQ8_0(w, static_cast<const BlockQ8_0Act*>(xq), n);
    case DType::kQ2_K:
      return DotQ2_K(w, static_cast<const BlockQ8_K*>(xq), n);
    case DType::kQ4_K:
      return DotQ4_K(w, static_cast<const BlockQ8_K*>(xq), n);
    case DType::kIQ2_XXS:
      return DotIQ2_XXS(w, static_cast<const BlockQ8_K*>(xq), n);
    case DType::kQ8_K:
      return DotQ8_K(w, static_cast<const BlockQ8_K*>(xq), n);
    case DType::kQ3_K:
      return DotQ3_K(w, static_cast<const BlockQ8_K*>(xq), n);
    case DType::kQ5_K:
      return DotQ5_K(w, static_cast<const BlockQ8_K*>(xq), n);
    case DType::kQ6_K:
      return DotQ6_K(w, static_cast<const BlockQ8_K*>(xq), n);
    case DType::kMXFP4:
      return DotMXFP4(w, static_cast<const BlockQ8_0Act*>(xq), n);
    case DType::kIQ2_XS:
      return DotIQ2_XS(w, static_cast<const BlockQ8_K*>(xq), n);
    case DType::kIQ1_M:
      return DotIQ1_M(w, static_cast<const BlockQ8_K*>(xq), n);
    case DType::kIQ3_XXS:
      return DotIQ3_XXS(w, static_cast<const BlockQ8_K*>(xq), n);
    case DType::kIQ3_S:
      return DotIQ3_S(w, static_cast<const BlockQ8_K*>(xq), n);
    case DType::kIQ2_S:
      return DotIQ2_S(w, static_cast<const BlockQ8_K*>(xq), n);
    case DType::kIQ1_S:
      return DotIQ1_S(w, static_cast<const BlockQ8_K*>(xq), n);
    case DType::kIQ4_NL:
      return DotIQ4_NL(w, static_cast<const BlockQ8_0Act*>(xq), n);
    case DType::kIQ4_XS:
      return DotIQ4_XS(w, static_cast<const BlockQ8_K*>(xq), n);
    default:
      return kNaN;
  }
}

}  // namespace flashkv::ref
