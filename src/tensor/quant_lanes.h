// The DotQ8 of the K-quants and IQ types split the way a GPU warp computes it: 32 workers per
// 256-value block, worker t owning values 8t .. 8t+7, each forming exact integer terms that
// are summed over the workers (any order: integers), then one float fold per block in the
// reference's order (ref::DotQ8, dot_ref.cpp). Compiled both by the host compiler (the CPU
// twin internal::DotQ8ByLanes, dot_lanes.cpp, held to ref::DotQ8 bit for bit by dot_test) and
// by nvcc (backend/cuda/products/kquant_matvec.cu), so the device kernels and the reference meet in
// one place. Must not: know rows, tokens or threads; use anything but plain C++17 and, under nvcc,
// CUDA intrinsics.
//
// The block layouts are quant_blocks.h's; Q8_K activations are BlockQ8_K (d, qs, bsums).
// Multi-byte fields are read a byte at a time: blocks of 110, 210, 74 and 56 bytes sit at any
// even offset, and the same code runs on mmapped host memory.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/half.h"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#define FLASHKV_HD __host__ __device__ __forceinline__
#else
#define FLASHKV_HD inline
#endif

namespace flashkv::lanes {

// Unfused fp32 operations: the host side is compiled with -ffp-contract=off, the device side
// uses the round-to-nearest intrinsics, which nvcc never fuses.
FLASHKV_HD float Mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
FLASHKV_HD float Add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
FLASHKV_HD float Sub(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
FLASHKV_HD float HalfToFloat(uint16_t h) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(h));
#else
  return F16ToF32(h);
#endif
}

FLASHKV_HD uint16_t U16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
FLASHKV_HD uint32_t U32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
FLASHKV_HD float Half(const uint8_t* p) {
  return HalfToFloat(U16(p));
}
// MXFP4's halved block scale 2^(e - 128) from its bits (a subnormal for e < 2), as GGML
// builds it.
FLASHKV_HD float Mxfp4HalfScale(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float f;
  __builtin_memcpy(&f, &bits, sizeof(f));
  return f;
#endif
}

// Q4_K / Q5_K: 6-bit scale and min of group j (0..7) from the packed 12 bytes.
FLASHKV_HD void Q4KScaleMin(const uint8_t* s, int j, int* sc, int* mn) {
  if (j < 4) {
    *sc = s[j] & 63;
    *mn = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q3_K: signed 6-bit scale of group g (0..15), already minus 32.
FLASHKV_HD int Q3KScale(const uint8_t* s, int g) {
  const int lo = g < 8 ? s[g] & 15 : s[g - 8] >> 4;
  const int hi = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

// IQ2_XS / IQ2_XXS sign masks: 7 stored bits, the 8th making the count even (ksigns_iq2xs).
FLASHKV_HD unsigned Iq2Signs8(unsigned s7) {
  unsigned p = s7 ^ (s7 >> 4);
  p ^= p >> 2;
  p ^= p >> 1;
  return s7 | ((p & 1u) << 7);
}

// IQ1_M: the block scale's f16 bits from the top nibbles of the four scale words.
FLASHKV_HD uint16_t Iq1mScaleBits(const uint8_t* scales) {
  return static_cast<uint16_t>((U16(scales) >> 12) | ((U16(scales + 2) >> 8) & 0x00f0) |
                               ((U16(scales + 4) >> 4) & 0x0f00) | (U16(scales + 6) & 0xf000));
}
// IQ1_M group g's two 3-bit half scales as the odd multipliers 2s + 1.
FLASHKV_HD void Iq1mGroupScales(const uint8_t* scales, int g, int* ls1, int* ls2) {
  const uint16_t w = U16(scales + 2 * (g / 2));
  *ls1 = 2 * ((w >> (6 * (g % 2))) & 7) + 1;
  *ls2 = 2 * ((w >> (6 * (g % 2) + 3)) & 7) + 1;
}
// IQ1_M run k (0..3) of group g: its kIq1sGrid index and whether its shift is negative.
FLASHKV_HD int Iq1mRun(const uint8_t* block, int g, int k, bool* neg) {
  const int nib = (block[32 + 2 * g + k / 2] >> (4 * (k % 2))) & 15;
  *neg = (nib & 8) != 0;
  return block[4 * g + k] | ((nib & 7) << 8);
}

// IQ4_NL / IQ4_XS: the non-linear value of a 4-bit index (kIq4nlValues, quant_blocks.h), from
// the table packed into four words: selects and a shift, where an indexed local array would
// live in a GPU thread's local memory.
FLASHKV_HD int Iq4nlValue(int nib) {
  const uint32_t w = nib < 8 ? (nib < 4 ? 0xBFAD9881u : 0xF6EADDCFu)    // -127 .. -65, -49 .. -10
                             : (nib < 12 ? 0x26190D01u : 0x71594535u);  // 1 .. 38, 53 .. 113
  return static_cast<int8_t>(static_cast<uint8_t>(w >> (8 * (nib & 3))));
}
// MXFP4: GGML's doubled E2M1 value of a 4-bit code (kMxfp4Doubled), the same way.
FLASHKV_HD int Mxfp4DoubledValue(int nib) {
  const uint32_t w = (nib & 7) < 4 ? 0x03020100u : 0x0C080604u;  // 0, 1, 2, 3 | 4, 6, 8, 12
  const int mag = static_cast<int>((w >> (8 * (nib & 3))) & 0xff);
  return nib & 8 ? -mag : mag;
}
// IQ4_XS / IQ4_NL: index k (0..7) of worker t's values in a 32-value group starting at qs:
// parts 0, 1 are low nibbles of bytes 8p .., parts 2, 3 the high nibbles of bytes 8(p - 2) ..
FLASHKV_HD int Iq4Nibble(const uint8_t* qs, int part, int k) {
  return part < 2 ? qs[8 * part + k] & 15 : qs[8 * (part - 2) + k] >> 4;
}
// IQ4_XS group g's 6-bit scale (not yet minus 32).
FLASHKV_HD int Iq4xsScale(const uint8_t* blk, int g) {
  return ((blk[4 + g / 2] >> (4 * (g % 2))) & 15) | (((U16(blk + 2) >> (2 * g)) & 3) << 4);
}
// IQ3_S: the two 9-bit grid indices of worker t (values 8t .. 8t+3 and 8t+4 .. 8t+7).
FLASHKV_HD void Iq3sIndices(const uint8_t* blk, int t, int* i1, int* i2) {
  const int qh = blk[66 + t / 4], l = t % 4;
  *i1 = blk[2 + 2 * t] | ((qh << (8 - 2 * l)) & 256);
  *i2 = blk[3 + 2 * t] | ((qh << (7 - 2 * l)) & 256);
}

// Whether this file splits a type's DotQ8.
FLASHKV_HD constexpr bool HasLanes(DType t) {
  return t == DType::kQ3_K || t == DType::kQ5_K || t == DType::kQ6_K || t == DType::kIQ2_XS ||
         t == DType::kIQ1_M || t == DType::kIQ3_XXS || t == DType::kIQ3_S || t == DType::kIQ2_S ||
         t == DType::kIQ1_S || t == DType::kIQ4_XS;
}
// Whether DequantValues8 takes the type: the split ones, IQ4_NL and MXFP4 (eight 32-value
// blocks per 256 values; their DotQ8 is a per-block fold, not a lane split).
FLASHKV_HD constexpr bool HasDequantLanes(DType t) {
  return HasLanes(t) || t == DType::kIQ4_NL || t == DType::kMXFP4;
}
// Bytes of 256 values of a type DequantValues8 takes (one block; IQ4_NL, MXFP4: eight).
FLASHKV_HD constexpr int LanesBlockBytes(DType t) {
  return t == DType::kQ3_K      ? 110
         : t == DType::kQ5_K    ? 176
         : t == DType::kQ6_K    ? 210
         : t == DType::kIQ2_XS  ? 74
         : t == DType::kIQ1_M   ? 56
         : t == DType::kIQ3_XXS ? 98
         : t == DType::kIQ3_S   ? 110
         : t == DType::kIQ2_S   ? 82
         : t == DType::kIQ1_S   ? 50
         : t == DType::kIQ4_XS  ? 136
         : t == DType::kIQ4_NL  ? 8 * 18
         : t == DType::kMXFP4   ? 8 * 17
                                : 0;
}

// Signed sum of 4 grid magnitudes (bytes of g) times x, bit j of signs negating byte j.
FLASHKV_HD int32_t SignedSum4(uint32_t g, unsigned signs, const int8_t* x) {
  int32_t sum = 0;
  for (int k = 0; k < 4; ++k) {
    const int mag = static_cast<int>((g >> (8 * k)) & 0xff);
    sum += ((signs >> k) & 1 ? -mag : mag) * x[k];
  }
  return sum;
}
FLASHKV_HD int32_t SignedSum8(uint64_t g, unsigned signs, const int8_t* x) {
  return SignedSum4(static_cast<uint32_t>(g), signs, x) +
         SignedSum4(static_cast<uint32_t>(g >> 32), signs >> 4, x + 4);
}

// Worker t's (0..31) exact terms of one block against the block's 256 activation quants q8.
// K-quants: c[k] = group scale * q * q8 of value 8t + k, i.e. its share of int lane k (the
// reference's lanes[i % 8]). IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S: c[0] = its share of bsum. IQ1_M,
// IQ1_S: c[0], c[1] = its shares of sumi1, sumi2. IQ4_XS: c[g] = its share of group g's sum (g =
// t / 4). Unused entries are 0. `grid`: the type's codebook (iq*_tables.h, or a device copy).
template <DType T>
FLASHKV_HD void BlockTerms(const uint8_t* blk, const int8_t* q8, int t, const void* gridp,
                           int32_t c[8]) {
  const int8_t* x = q8 + 8 * t;
  const uint64_t* grid = static_cast<const uint64_t*>(gridp);
  for (int k = 0; k < 8; ++k) c[k] = 0;
  if constexpr (T == DType::kQ3_K) {
    const int h = t / 16, s = (t % 16) / 4;
    const int sc = Q3KScale(blk + 96, t / 2);
    for (int k = 0; k < 8; ++k) {
      const int l = 8 * (t % 4) + k;
      const int q = ((blk[32 + 32 * h + l] >> (2 * s)) & 3) - ((blk[l] >> (4 * h + s)) & 1 ? 0 : 4);
      c[k] = sc * (x[k] * q);
    }
  } else if constexpr (T == DType::kQ5_K) {
    const int p = t / 8, half = (t % 8) / 4;
    int sc, mn;
    Q4KScaleMin(blk + 4, t / 4, &sc, &mn);
    for (int k = 0; k < 8; ++k) {
      const int l = 8 * (t % 4) + k;
      const int q =
          ((blk[48 + 32 * p + l] >> (4 * half)) & 15) + ((blk[16 + l] >> (2 * p + half)) & 1) * 16;
      c[k] = sc * (x[k] * q);
    }
  } else if constexpr (T == DType::kQ6_K) {
    const int h = t / 16, j = (t % 16) / 4;
    const int sc = static_cast<int8_t>(blk[192 + t / 2]);
    for (int k = 0; k < 8; ++k) {
      const int l = 8 * (t % 4) + k;
      const int lo = (blk[64 * h + l + 32 * (j & 1)] >> (4 * (j >> 1))) & 15;
      const int hi = (blk[128 + 32 * h + l] >> (2 * j)) & 3;
      c[k] = sc * (x[k] * ((lo | (hi << 4)) - 32));
    }
  } else if constexpr (T == DType::kIQ2_XS) {
    const uint16_t w = U16(blk + 2 + 2 * t);
    const uint64_t g = grid[w & 511];
    const unsigned signs = Iq2Signs8(w >> 9u);
    const int ls = 2 * ((blk[66 + t / 4] >> (4 * ((t % 4) / 2))) & 15) + 1;
    int32_t sum = 0;
    for (int k = 0; k < 8; ++k) {
      const int mag = static_cast<int>((g >> (8 * k)) & 0xff);
      sum += ((signs >> k) & 1 ? -mag : mag) * x[k];
    }
    c[0] = sum * ls;
  } else if constexpr (T == DType::kIQ1_M) {
    int ls[2];
    Iq1mGroupScales(blk + 48, t / 4, &ls[0], &ls[1]);
    bool neg;
    const uint64_t g = grid[Iq1mRun(blk, t / 4, t % 4, &neg)];
    int32_t s1 = 0, s2 = 0;
    for (int k = 0; k < 8; ++k) {
      s1 += x[k] * static_cast<int8_t>((g >> (8 * k)) & 0xff);
      s2 += x[k];
    }
    const int m = ls[(t % 4) / 2];
    c[0] = s1 * m;
    c[1] = (neg ? -s2 : s2) * m;
  } else if constexpr (T == DType::kIQ3_XXS) {
    const uint32_t* g3 = static_cast<const uint32_t*>(gridp);
    const uint32_t w = U32(blk + 66 + 4 * (t / 4));
    const unsigned signs = Iq2Signs8((w >> (7 * (t % 4))) & 127);
    const int32_t sum = SignedSum4(g3[blk[2 + 2 * t]], signs, x) +
                        SignedSum4(g3[blk[3 + 2 * t]], signs >> 4, x + 4);
    c[0] = sum * static_cast<int32_t>(2 * (w >> 28) + 1);
  } else if constexpr (T == DType::kIQ3_S) {
    const uint32_t* g3 = static_cast<const uint32_t*>(gridp);
    int i1, i2;
    Iq3sIndices(blk, t, &i1, &i2);
    const unsigned signs = blk[74 + t];
    const int g = t / 4;
    const int ls = 2 * ((blk[106 + g / 2] >> (4 * (g % 2))) & 15) + 1;
    c[0] = (SignedSum4(g3[i1], signs, x) + SignedSum4(g3[i2], signs >> 4, x + 4)) * ls;
  } else if constexpr (T == DType::kIQ2_S) {
    const int g = t / 4, l = t % 4;
    const int idx = blk[2 + t] | ((blk[66 + g] << (8 - 2 * l)) & 0x300);
    const int ls = 2 * ((blk[74 + g] >> (4 * (l / 2))) & 15) + 1;
    c[0] = SignedSum8(grid[idx], blk[34 + t], x) * ls;
  } else if constexpr (T == DType::kIQ1_S) {
    const uint16_t qh = U16(blk + 34 + 2 * (t / 4));
    const uint64_t g = grid[blk[2 + t] | (((qh >> (3 * (t % 4))) & 7) << 8)];
    int32_t s1 = 0, s2 = 0;
    for (int k = 0; k < 8; ++k) {
      s1 += x[k] * static_cast<int8_t>((g >> (8 * k)) & 0xff);
      s2 += x[k];
    }
    const int ls = 2 * ((qh >> 12) & 7) + 1;
    c[0] = s1 * ls;
    c[1] = (qh & 0x8000 ? -s2 : s2) * ls;
  } else if constexpr (T == DType::kIQ4_XS) {
    const uint8_t* qs = blk + 8 + 16 * (t / 4);
    int32_t sum = 0;
    for (int k = 0; k < 8; ++k) sum += x[k] * Iq4nlValue(Iq4Nibble(qs, t % 4, k));
    c[t / 4] = sum;
  }
}

// Values 8t .. 8t+7 of one block (t = 0..31), in the dequantizers' arithmetic (quant.cpp,
// GGML's dequantize_row_*): the GPU's embedding rows, DequantizeRow's bits.
template <DType T>
FLASHKV_HD void DequantValues8(const uint8_t* blk, int t, const void* gridp, float out[8]) {
  const uint64_t* grid = static_cast<const uint64_t*>(gridp);
  if constexpr (T == DType::kQ3_K) {
    const int h = t / 16, s = (t % 16) / 4;
    const float dl = Mul(Half(blk + 108), static_cast<float>(Q3KScale(blk + 96, t / 2)));
    for (int k = 0; k < 8; ++k) {
      const int l = 8 * (t % 4) + k;
      const int q = ((blk[32 + 32 * h + l] >> (2 * s)) & 3) - ((blk[l] >> (4 * h + s)) & 1 ? 0 : 4);
      out[k] = Mul(dl, static_cast<float>(q));
    }
  } else if constexpr (T == DType::kQ5_K) {
    const int p = t / 8, half = (t % 8) / 4;
    int sc, mn;
    Q4KScaleMin(blk + 4, t / 4, &sc, &mn);
    const float dl = Mul(Half(blk), static_cast<float>(sc));
    const float ml = Mul(Half(blk + 2), static_cast<float>(mn));
    for (int k = 0; k < 8; ++k) {
      const int l = 8 * (t % 4) + k;
      const int q =
          ((blk[48 + 32 * p + l] >> (4 * half)) & 15) + ((blk[16 + l] >> (2 * p + half)) & 1) * 16;
      out[k] = Sub(Mul(dl, static_cast<float>(q)), ml);
    }
  } else if constexpr (T == DType::kQ6_K) {
    const int h = t / 16, j = (t % 16) / 4;
    const float dl =
        Mul(Half(blk + 208), static_cast<float>(static_cast<int8_t>(blk[192 + t / 2])));
    for (int k = 0; k < 8; ++k) {
      const int l = 8 * (t % 4) + k;
      const int lo = (blk[64 * h + l + 32 * (j & 1)] >> (4 * (j >> 1))) & 15;
      const int hi = (blk[128 + 32 * h + l] >> (2 * j)) & 3;
      out[k] = Mul(dl, static_cast<float>((lo | (hi << 4)) - 32));
    }
  } else if constexpr (T == DType::kIQ2_XS) {
    const uint16_t w = U16(blk + 2 + 2 * t);
    const uint64_t g = grid[w & 511];
    const unsigned signs = Iq2Signs8(w >> 9u);
    const int ls = (blk[66 + t / 4] >> (4 * ((t % 4) / 2))) & 15;
    const float db = Mul(Mul(Half(blk), Add(0.5f, static_cast<float>(ls))), 0.25f);
    for (int k = 0; k < 8; ++k) {
      const float mag = static_cast<float>((g >> (8 * k)) & 0xff);
      out[k] = Mul(Mul(db, mag), (signs >> k) & 1 ? -1.0f : 1.0f);
    }
  } else if constexpr (T == DType::kIQ1_M) {
    int ls[2];
    Iq1mGroupScales(blk + 48, t / 4, &ls[0], &ls[1]);
    bool neg;
    const uint64_t g = grid[Iq1mRun(blk, t / 4, t % 4, &neg)];
    const float dl = Mul(HalfToFloat(Iq1mScaleBits(blk + 48)), static_cast<float>(ls[(t % 4) / 2]));
    const float delta = neg ? -0.125f : 0.125f;  // IQ1M_DELTA
    for (int k = 0; k < 8; ++k) {
      const auto v = static_cast<int8_t>((g >> (8 * k)) & 0xff);
      out[k] = Mul(dl, Add(static_cast<float>(v), delta));
    }
  } else if constexpr (T == DType::kIQ3_XXS || T == DType::kIQ3_S) {
    const uint32_t* g3 = static_cast<const uint32_t*>(gridp);
    uint32_t g[2];
    unsigned signs;
    float db;
    if constexpr (T == DType::kIQ3_XXS) {
      const uint32_t w = U32(blk + 66 + 4 * (t / 4));
      signs = Iq2Signs8((w >> (7 * (t % 4))) & 127);
      db = Mul(Mul(Half(blk), Add(0.5f, static_cast<float>(w >> 28))), 0.5f);
      g[0] = g3[blk[2 + 2 * t]];
      g[1] = g3[blk[3 + 2 * t]];
    } else {
      int i1, i2;
      Iq3sIndices(blk, t, &i1, &i2);
      signs = blk[74 + t];
      const int gr = t / 4;
      db = Mul(Half(blk), static_cast<float>(1 + 2 * ((blk[106 + gr / 2] >> (4 * (gr % 2))) & 15)));
      g[0] = g3[i1];
      g[1] = g3[i2];
    }
    for (int k = 0; k < 8; ++k) {
      const float mag = static_cast<float>((g[k / 4] >> (8 * (k % 4))) & 0xff);
      out[k] = Mul(Mul(db, mag), (signs >> k) & 1 ? -1.0f : 1.0f);
    }
  } else if constexpr (T == DType::kIQ2_S) {
    const int gr = t / 4, l = t % 4;
    const uint64_t g = grid[blk[2 + t] | ((blk[66 + gr] << (8 - 2 * l)) & 0x300)];
    const unsigned signs = blk[34 + t];
    const int ls = (blk[74 + gr] >> (4 * (l / 2))) & 15;
    const float db = Mul(Mul(Half(blk), Add(0.5f, static_cast<float>(ls))), 0.25f);
    for (int k = 0; k < 8; ++k) {
      const float mag = static_cast<float>((g >> (8 * k)) & 0xff);
      out[k] = Mul(Mul(db, mag), (signs >> k) & 1 ? -1.0f : 1.0f);
    }
  } else if constexpr (T == DType::kIQ1_S) {
    const uint16_t qh = U16(blk + 34 + 2 * (t / 4));
    const uint64_t g = grid[blk[2 + t] | (((qh >> (3 * (t % 4))) & 7) << 8)];
    const float dl = Mul(Half(blk), static_cast<float>(2 * ((qh >> 12) & 7) + 1));
    const float delta = qh & 0x8000 ? -0.125f : 0.125f;  // IQ1S_DELTA
    for (int k = 0; k < 8; ++k) {
      const auto v = static_cast<int8_t>((g >> (8 * k)) & 0xff);
      out[k] = Mul(dl, Add(static_cast<float>(v), delta));
    }
  } else if constexpr (T == DType::kIQ4_XS) {
    const float dl = Mul(Half(blk), static_cast<float>(Iq4xsScale(blk, t / 4) - 32));
    const uint8_t* qs = blk + 8 + 16 * (t / 4);
    for (int k = 0; k < 8; ++k)
      out[k] = Mul(dl, static_cast<float>(Iq4nlValue(Iq4Nibble(qs, t % 4, k))));
  } else if constexpr (T == DType::kMXFP4) {
    const uint8_t* b = blk + 17 * (t / 4);
    const float d = Mxfp4HalfScale(b[0]);
    for (int k = 0; k < 8; ++k)
      out[k] = Mul(static_cast<float>(Mxfp4DoubledValue(Iq4Nibble(b + 1, t % 4, k))), d);
  } else if constexpr (T == DType::kIQ4_NL) {
    const uint8_t* b = blk + 18 * (t / 4);
    const float d = Half(b);
    for (int k = 0; k < 8; ++k)
      out[k] = Mul(d, static_cast<float>(Iq4nlValue(Iq4Nibble(b + 2, t % 4, k))));
  }
}

// The float state the reference carries across blocks: the 8 lane sums and sumf.
struct Fold {
  float sums[8] = {};
  float sumf = 0.0f;
};

// One block's fold, the reference's float operations in its order; tot = the terms summed
// over the 32 workers; yd, bsums: the activation block's scale and 16 sums.
template <DType T>
FLASHKV_HD void FoldBlock(Fold& f, const uint8_t* blk, float yd, const int16_t* bsums,
                          const int32_t tot[8]) {
  if constexpr (T == DType::kQ3_K || T == DType::kQ5_K || T == DType::kQ6_K) {
    const int off = T == DType::kQ3_K ? 108 : T == DType::kQ6_K ? 208 : 0;
    const float d = Mul(Half(blk + off), yd);
    for (int l = 0; l < 8; ++l) f.sums[l] = Add(f.sums[l], Mul(d, static_cast<float>(tot[l])));
    if constexpr (T == DType::kQ5_K) {
      int sumi = 0;
      for (int j = 0; j < 16; ++j) {
        int sc, mn;
        Q4KScaleMin(blk + 4, j / 2, &sc, &mn);
        sumi += bsums[j] * mn;
      }
      f.sumf = Sub(f.sumf, Mul(Mul(Half(blk + 2), yd), static_cast<float>(sumi)));
    }
  } else if constexpr (T == DType::kIQ2_XS || T == DType::kIQ2_S || T == DType::kIQ3_XXS ||
                       T == DType::kIQ3_S) {
    f.sumf = Add(f.sumf, Mul(Mul(Half(blk), yd), static_cast<float>(tot[0])));
  } else if constexpr (T == DType::kIQ4_XS) {
    const float d4d8 = Mul(Half(blk), yd);
    for (int g = 0; g < 8; ++g) {
      const float dg = Mul(d4d8, static_cast<float>(Iq4xsScale(blk, g) - 32));
      f.sumf = Add(f.sumf, Mul(dg, static_cast<float>(tot[g])));
    }
  } else if constexpr (T == DType::kIQ1_M || T == DType::kIQ1_S) {
    const float d = Mul(T == DType::kIQ1_M ? HalfToFloat(Iq1mScaleBits(blk + 48)) : Half(blk), yd);
    const float inner =
        Add(static_cast<float>(tot[0]), Mul(0.125f, static_cast<float>(tot[1])));  // IQ1M_DELTA
    f.sumf = Add(f.sumf, Mul(d, inner));
  }
}

// The row's result once every block is folded.
template <DType T>
FLASHKV_HD float FinishFold(const Fold& f) {
  if constexpr (T == DType::kIQ2_XS || T == DType::kIQ2_S) {
    return Mul(0.125f, f.sumf);
  } else if constexpr (T == DType::kIQ3_XXS) {
    return Mul(0.25f, f.sumf);
  } else if constexpr (T == DType::kIQ1_M || T == DType::kIQ1_S || T == DType::kIQ3_S ||
                       T == DType::kIQ4_XS) {
    return f.sumf;
  } else {
    float s = f.sumf;
    for (int l = 0; l < 8; ++l) s = Add(s, f.sums[l]);
    return s;
  }
}

}  // namespace flashkv::lanes
