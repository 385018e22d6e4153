// Device-side GGUF block decoding (layouts: src/tensor/quant_blocks.h) and the per-lane
// pieces of the quantized dot products. Two numerics, as on the CPU (tensor/dot.h):
// - fp32 activations: a lane dequantizes a "unit" of a weight row exactly as DequantizeRow
//   does and multiply-adds it into per-token fp32 accumulators;
// - q8 activations: integer block sums (dp4a) combined into ds4's per-block float terms,
//   which the caller folds in block order with unfused adds, so the result has the bits of
//   ref::DotQ8 (ds4's CPU kernels) for Q8_0, Q2_K, Q4_K and IQ2_XXS.
// Must not: know rows, tokens or warps (device/matvec.cuh arranges lanes).
#pragma once

#include <cstdint>

#include "backend/cuda/device/common.cuh"
#include "tensor/dtype.h"

namespace flashkv::cuda {

// Geometry of the lane work unit per type. kUnit values per unit; K-quant super-blocks
// (256 values) are split into 8 units of 32, one per lane of an 8-lane group.
template <DType T>
struct Unit;
template <>
struct Unit<DType::kF32> {
  static constexpr int kValues = 4;
};
template <>
struct Unit<DType::kF16> {
  static constexpr int kValues = 8;
};
template <>
struct Unit<DType::kBF16> {
  static constexpr int kValues = 8;
};
template <>
struct Unit<DType::kQ8_0> {
  static constexpr int kValues = 32;
  static constexpr int kBlockBytes = 34;
};
template <>
struct Unit<DType::kQ2_K> {
  static constexpr int kValues = 32;
  static constexpr int kBlockBytes = 84;
};
template <>
struct Unit<DType::kQ4_K> {
  static constexpr int kValues = 32;
  static constexpr int kBlockBytes = 144;
};
template <>
struct Unit<DType::kIQ2_XXS> {
  static constexpr int kValues = 32;
  static constexpr int kBlockBytes = 66;
};

// q8 activations on the GPU hold ds4's values (BlockQ8_0Act / BlockQ8_K: the same int8
// quants, fp32 scales and bsums) in a split row layout, so quants load 16 bytes at a time:
//   Q8_0: qs [n] int8, then d [n/32] f32;
//   Q8_K: qs [n] int8, then d [n/256] f32, then bsums [n/16] int16.
// Rows are padded to 16 bytes (Q8ActRowBytes), so every quant group is 16-byte aligned.
struct Q8Row {
  const int8_t* qs;
  const float* d;
  const int16_t* bsums;  // Q8_K only
};
__device__ __forceinline__ Q8Row Q8_0RowOf(const uint8_t* row, int n) {
  return Q8Row{reinterpret_cast<const int8_t*>(row), reinterpret_cast<const float*>(row + n),
               nullptr};
}
__device__ __forceinline__ Q8Row Q8_KRowOf(const uint8_t* row, int n) {
  const float* d = reinterpret_cast<const float*>(row + n);
  return Q8Row{reinterpret_cast<const int8_t*>(row), d,
               reinterpret_cast<const int16_t*>(d + n / 256)};
}

// The 8-bit sign mask of an IQ2 7-bit index (the 8th bit makes the parity even), spread
// to bytes: 0x01 for a negated value, 0x00 otherwise. lo covers values 0..3, hi 4..7.
__device__ __forceinline__ void Iq2SignBits(uint32_t idx7, uint32_t* lo, uint32_t* hi) {
  const uint32_t s = idx7 | ((__popc(idx7) & 1u) << 7);
  *lo = ((s & 0x0fu) * 0x00204081u) & 0x01010101u;
  *hi = (((s >> 4) & 0x0fu) * 0x00204081u) & 0x01010101u;
}
// … and as masks: 0xff for a negated value.
__device__ __forceinline__ void Iq2SignBytes(uint32_t idx7, uint32_t* lo, uint32_t* hi) {
  Iq2SignBits(idx7, lo, hi);
  *lo *= 0xffu;
  *hi *= 0xffu;
}

// Grid magnitudes g (bytes of 8, 25 or 43) negated where the sign mask m (Iq2SignBytes) is
// 0xff: ~g + 1 = −g in each byte, and no byte carries into the next (~g + 1 <= 248) — the bytes
// __vsub4(g ^ m, m) gives, in two instructions instead of the ~4 of its emulation (sm_90 has
// no SIMD byte subtract). Only for IQ2 magnitudes: a zero byte would carry.
__device__ __forceinline__ uint32_t Iq2Signed(uint32_t g, uint32_t m) {
  return (g ^ m) + (m & 0x01010101u);
}
// The same bytes from Iq2SignBits's c (m = c · 0xff, so m & 0x01010101 = c): one
// instruction fewer where the caller has c.
__device__ __forceinline__ uint32_t Iq2SignedBits(uint32_t g, uint32_t c) {
  return (g ^ (c * 0xffu)) + c;
}

__device__ __forceinline__ void Q4KScaleMin(const uint8_t* scales, int j, int* sc, int* mn) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *mn = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 15) | ((scales[j - 4] >> 6) << 4);
    *mn = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// ---- fp32 path: unit u of a row -> v[Unit<T>::kValues] ------------------------------
template <DType T>
__device__ __forceinline__ void DequantUnit(const uint8_t* row, int u, float* v,
                                            const uint64_t* iq2_grid);

template <>
__device__ __forceinline__ void DequantUnit<DType::kF32>(const uint8_t* row, int u, float* v,
                                                         const uint64_t*) {
  const float4 q = *reinterpret_cast<const float4*>(row + 16 * size_t(u));
  v[0] = q.x;
  v[1] = q.y;
  v[2] = q.z;
  v[3] = q.w;
}
template <>
__device__ __forceinline__ void DequantUnit<DType::kF16>(const uint8_t* row, int u, float* v,
                                                         const uint64_t*) {
  const uint4 q = *reinterpret_cast<const uint4*>(row + 16 * size_t(u));
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = HalfBitsToFloat(uint16_t(w[i] & 0xffffu));
    v[2 * i + 1] = HalfBitsToFloat(uint16_t(w[i] >> 16));
  }
}
template <>
__device__ __forceinline__ void DequantUnit<DType::kBF16>(const uint8_t* row, int u, float* v,
                                                          const uint64_t*) {
  const uint4 q = *reinterpret_cast<const uint4*>(row + 16 * size_t(u));
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = __uint_as_float(w[i] << 16);
    v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
template <>
__device__ __forceinline__ void DequantUnit<DType::kQ8_0>(const uint8_t* row, int u, float* v,
                                                          const uint64_t*) {
  const uint8_t* blk = row + 34 * size_t(u);
  const float d = LoadHalfDev(blk);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const uint32_t q = LoadU32Align2(blk + 2 + 4 * k);
#pragma unroll
    for (int j = 0; j < 4; ++j) v[4 * k + j] = __fmul_rn(d, float(int8_t(q >> (8 * j))));
  }
}
template <>
__device__ __forceinline__ void DequantUnit<DType::kQ2_K>(const uint8_t* row, int u, float* v,
                                                          const uint64_t*) {
  const uint8_t* blk = row + 84 * size_t(u >> 3);
  const int w = u & 7;
  const int h = w >> 2, s = w & 3;
  const float d = LoadHalfDev(blk + 80);
  const float dmin = LoadHalfDev(blk + 82);
  const uint8_t* qs = blk + 16 + 32 * h;
#pragma unroll
  for (int part = 0; part < 2; ++part) {
    const uint8_t sc = blk[8 * h + 2 * s + part];
    const float dl = __fmul_rn(d, float(sc & 15));
    const float ml = __fmul_rn(dmin, float(sc >> 4));
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t q = LoadU32(qs + 16 * part + 4 * k);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int qv = (q >> (8 * j + 2 * s)) & 3;
        v[16 * part + 4 * k + j] = __fsub_rn(__fmul_rn(dl, float(qv)), ml);
      }
    }
  }
}
template <>
__device__ __forceinline__ void DequantUnit<DType::kQ4_K>(const uint8_t* row, int u, float* v,
                                                          const uint64_t*) {
  const uint8_t* blk = row + 144 * size_t(u >> 3);
  const int g = u & 7;
  const float d = LoadHalfDev(blk);
  const float dmin = LoadHalfDev(blk + 2);
  int sc, mn;
  Q4KScaleMin(blk + 4, g, &sc, &mn);
  const float d1 = __fmul_rn(d, float(sc));
  const float m1 = __fmul_rn(dmin, float(mn));
  const uint8_t* qs = blk + 16 + 32 * (g >> 1);
  const int shift = (g & 1) * 4;
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const uint32_t q = LoadU32(qs + 4 * k);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[4 * k + j] = __fsub_rn(__fmul_rn(d1, float((q >> (8 * j + shift)) & 15)), m1);
    }
  }
}
template <>
__device__ __forceinline__ void DequantUnit<DType::kIQ2_XXS>(const uint8_t* row, int u, float* v,
                                                             const uint64_t* iq2_grid) {
  const uint8_t* blk = row + 66 * size_t(u >> 3);
  const int g = u & 7;
  const float d = LoadHalfDev(blk);
  const uint32_t a = LoadU32Align2(blk + 2 + 8 * g);
  const uint32_t b = LoadU32Align2(blk + 2 + 8 * g + 4);
  const float db = __fmul_rn(__fmul_rn(d, __fadd_rn(0.5f, float(b >> 28))), 0.25f);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint64_t grid = __ldg(iq2_grid + ((a >> (8 * k)) & 0xffu));
    const uint32_t s7 = (b >> (7 * k)) & 127u;
    const uint32_t signs = s7 | ((__popc(s7) & 1u) << 7);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float mag = float((grid >> (8 * j)) & 0xffu);
      v[8 * k + j] = __fmul_rn(__fmul_rn(db, mag), ((signs >> j) & 1u) ? -1.0f : 1.0f);
    }
  }
}

// ---- q8 path: integer sums of one unit against its activation block ------------------
// Q8_0: the whole block against 32 activation quants (16-byte aligned); Σ w·x.
__device__ __forceinline__ int Q8_0BlockIsum(const uint8_t* wblk, const int8_t* xq) {
  const int4 x0 = *reinterpret_cast<const int4*>(xq);
  const int4 x1 = *reinterpret_cast<const int4*>(xq + 16);
  const int xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
  int s = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) s = __dp4a(int(LoadU32Align2(wblk + 2 + 4 * k)), xv[k], s);
  return s;
}
// The same from 32 weight quants already in registers (wq) — the staged-weight paths.
__device__ __forceinline__ int Q8_0BlockIsumRegs(const int (&wq)[8], const int8_t* xq) {
  const int4 x0 = *reinterpret_cast<const int4*>(xq);
  const int4 x1 = *reinterpret_cast<const int4*>(xq + 16);
  const int xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
  int s = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) s = __dp4a(wq[k], xv[k], s);
  return s;
}

// Q2_K unit w (values 32w..32w+31) against a Q8_K super-block (q8: its 256 quants,
// bsums: its 16 sums): isum part (scaled by the two 4-bit group scales) and the mins part
// (bsums · group mins).
// The same from unit w's 32 activation quants (xv) and its two bsums (bs: bsums[2w] in the
// low, bsums[2w + 1] in the high 16 bits) already in registers — the tile paths, which keep a
// thread's activations across the rows it takes.
__device__ __forceinline__ void Q2KUnitIsumRegs(const uint8_t* wblk, int w, const int (&xv)[8],
                                                uint32_t bs, int* isum, int* summs) {
  const int h = w >> 2, s = w & 3;
  uint32_t wq[8];  // Q2_K blocks are 84 bytes: 4-byte aligned words
#pragma unroll
  for (int k = 0; k < 8; ++k) wq[k] = LoadU32(wblk + 16 + 32 * h + 4 * k);
  int sub[2] = {0, 0};
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int q = int((wq[k] >> (2 * s)) & 0x03030303u);
    sub[k >> 2] = __dp4a(q, xv[k], sub[k >> 2]);
  }
  const uint32_t sc = LoadU16(wblk + 2 * w);  // the two group bytes: 2w in the low 8 bits
  *isum = int(sc & 15) * sub[0] + int((sc >> 8) & 15) * sub[1];
  *summs =
      int(int16_t(bs & 0xffffu)) * int((sc >> 4) & 15) + int(int16_t(bs >> 16)) * int(sc >> 12);
}
__device__ __forceinline__ void Q2KUnitIsum(const uint8_t* wblk, int w, const int8_t* q8,
                                            const int16_t* bsums, int* isum, int* summs) {
  const int4 x0 = *reinterpret_cast<const int4*>(q8 + 32 * w);
  const int4 x1 = *reinterpret_cast<const int4*>(q8 + 32 * w + 16);
  const int xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
  Q2KUnitIsumRegs(wblk, w, xv, LoadU32(reinterpret_cast<const uint8_t*>(bsums + 2 * w)), isum,
                  summs);
}

// IQ2_XXS unit g against a Q8_K block: Σ ±grid·q8 times the group scale 2·ls + 1.
__device__ __forceinline__ int Iq2xxsUnitIsum(const uint8_t* wblk, int g, const int8_t* q8_sb,
                                              const uint64_t* iq2_grid) {
  const uint32_t a = LoadU32Align2(wblk + 2 + 8 * g);
  const uint32_t b = LoadU32Align2(wblk + 2 + 8 * g + 4);
  const uint8_t* q8 = reinterpret_cast<const uint8_t*>(q8_sb) + 32 * g;
  int sumi = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint64_t grid = __ldg(iq2_grid + ((a >> (8 * k)) & 0xffu));
    uint32_t m_lo, m_hi;
    Iq2SignBytes((b >> (7 * k)) & 127u, &m_lo, &m_hi);
    const uint32_t g_lo = uint32_t(grid);
    const uint32_t g_hi = uint32_t(grid >> 32);
    const int v_lo = int(Iq2Signed(g_lo, m_lo));
    const int v_hi = int(Iq2Signed(g_hi, m_hi));
    sumi = __dp4a(v_lo, int(LoadU32(q8 + 8 * k)), sumi);
    sumi = __dp4a(v_hi, int(LoadU32(q8 + 8 * k + 4)), sumi);
  }
  return sumi * int(2 * (b >> 28) + 1);
}

// Q4_K unit g against a Q8_K block: the 8 lane sums of GGML's generic kernel restricted
// to this group (lane l = value index mod 8), times the group scale; and the mins part.
__device__ __forceinline__ void Q4KUnitIsum(const uint8_t* wblk, int g, const int8_t* q8_sb,
                                            const int16_t* bsums, int lanes[8], int* summ) {
  int sc, mn;
  Q4KScaleMin(wblk + 4, g, &sc, &mn);
  const uint8_t* qs = wblk + 16 + 32 * (g >> 1);
  const int shift = (g & 1) * 4;
  const int8_t* q8 = q8_sb + 32 * g;
#pragma unroll
  for (int l = 0; l < 8; ++l) lanes[l] = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const uint32_t q = LoadU32(qs + 4 * k);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      lanes[(4 * k + j) & 7] += int(q8[4 * k + j]) * int((q >> (8 * j + shift)) & 15);
    }
  }
#pragma unroll
  for (int l = 0; l < 8; ++l) lanes[l] *= sc;
  *summ = (int(bsums[2 * g]) + int(bsums[2 * g + 1])) * mn;
}

}  // namespace flashkv::cuda
