// Token-parallel q8 products for prefill: one warp per weight row (or gate/up row pair),
// one lane per activation row (token or expert slot), 32 per tile. The warp decodes each
// block or super-block of its row once into shared memory as int8 words (Q8_0 quants,
// Q2_K 2-bit quants, IQ2_XXS signed grid magnitudes) and every lane runs dp4a against its
// own activations, folding the block terms in block order. The integer sums are exact and
// each term is formed as in device/matvec.cuh's BlockTerm, so a token's value has the same bits
// as the one-token decode kernel: which kernel runs may depend on the batch, the result
// may not. Must not: serve Q4_K or fp32 activations (those stay on device/matvec.cuh).
#pragma once

#include "backend/cuda/device/quant.cuh"
#include "backend/cuda/products/launch.h"

namespace flashkv::cuda {

inline constexpr int kTpTokens = 32;
inline constexpr int kTpWarps = 4;
// Shared words per warp per weight row: Q8_0 32 blocks × (8 quant words + d), padded to
// 12 words per block for 16-byte reads; K-quants 64 words + 16 scale/aux words.
inline constexpr int kTpWords = 32 * 12;

// Q8_0: blocks base..base+31 of the row decoded by lane = block; returns the count.
__device__ __forceinline__ int TpDecodeQ8_0(const uint8_t* wrow, int base, int nblk, int* ws) {
  const int lane = threadIdx.x & 31;
  const int b = base + lane;
  if (b < nblk) {
    const uint8_t* blk = wrow + 34 * size_t(b);
    int* o = ws + 12 * lane;
#pragma unroll
    for (int k = 0; k < 8; ++k) o[k] = int(LoadU32Align2(blk + 2 + 4 * k));
    o[8] = __float_as_int(LoadHalfDev(blk));
  }
  return min(32, nblk - base);
}

// Q2_K super-block: words 8w + k = the 2-bit quants of values 32w + 4k … (as bytes), then
// ws[64 + j] = scales[j] for j < 16.
__device__ __forceinline__ void TpDecodeQ2_K(const uint8_t* blk, int* ws) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int j = lane + 32 * r;
    const int w = j >> 3, k = j & 7;
    const int h = w >> 2, s = w & 3;
    ws[j] = int((LoadU32(blk + 16 + 32 * h + 4 * k) >> (2 * s)) & 0x03030303u);
  }
  if (lane < 16) ws[64 + lane] = blk[lane];
}

// IQ2_XXS super-block: words 8g + 2k + half = signed magnitudes of values 32g + 8k + 4half…,
// then ws[64 + g] = the group scale 2·ls + 1.
__device__ __forceinline__ void TpDecodeIQ2(const uint8_t* blk, int* ws, const uint64_t* grid) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int j = lane + 32 * r;
    const int g = j >> 3, k = (j >> 1) & 3, half = j & 1;
    const uint32_t a = LoadU32Align2(blk + 2 + 8 * g);
    const uint32_t b = LoadU32Align2(blk + 2 + 8 * g + 4);
    const uint64_t gv = __ldg(grid + ((a >> (8 * k)) & 0xffu));
    uint32_t m_lo, m_hi;
    Iq2SignBytes((b >> (7 * k)) & 127u, &m_lo, &m_hi);
    const uint32_t mag = half ? uint32_t(gv >> 32) : uint32_t(gv);
    const uint32_t m = half ? m_hi : m_lo;
    ws[j] = int(Iq2Signed(mag, m));
    if (k == 0 && half == 0) ws[64 + g] = int(2 * (b >> 28) + 1);
  }
}

__device__ __forceinline__ int4 LoadX4(const int8_t* p) {
  return *reinterpret_cast<const int4*>(p);
}

// Block term of Q8_0 block b (decoded at wb) for activation row x: (d_w·d_x)·Σ.
__device__ __forceinline__ float TpTermQ8_0(const int* wb, const Q8Row& x, int b) {
  const int4 w0 = *reinterpret_cast<const int4*>(wb);
  const int4 w1 = *reinterpret_cast<const int4*>(wb + 4);
  const int4 x0 = LoadX4(x.qs + 32 * b);
  const int4 x1 = LoadX4(x.qs + 32 * b + 16);
  int s = __dp4a(w0.x, x0.x, 0);
  s = __dp4a(w0.y, x0.y, s);
  s = __dp4a(w0.z, x0.z, s);
  s = __dp4a(w0.w, x0.w, s);
  s = __dp4a(w1.x, x1.x, s);
  s = __dp4a(w1.y, x1.y, s);
  s = __dp4a(w1.z, x1.z, s);
  s = __dp4a(w1.w, x1.w, s);
  return __fmul_rn(__fmul_rn(__int_as_float(wb[8]), x.d[b]), float(s));
}

__device__ __forceinline__ float TpTermQ2_K(const int* ws, const uint8_t* blk, const Q8Row& x,
                                            int sb) {
  const int8_t* q8 = x.qs + 256 * sb;
  const int16_t* bs = x.bsums + 16 * sb;
  int isum = 0, summs = 0;
#pragma unroll
  for (int w = 0; w < 8; ++w) {
    const int4 w0 = *reinterpret_cast<const int4*>(ws + 8 * w);
    const int4 w1 = *reinterpret_cast<const int4*>(ws + 8 * w + 4);
    const int4 x0 = LoadX4(q8 + 32 * w);
    const int4 x1 = LoadX4(q8 + 32 * w + 16);
    int s0 = __dp4a(w0.x, x0.x, 0);
    s0 = __dp4a(w0.y, x0.y, s0);
    s0 = __dp4a(w0.z, x0.z, s0);
    s0 = __dp4a(w0.w, x0.w, s0);
    int s1 = __dp4a(w1.x, x1.x, 0);
    s1 = __dp4a(w1.y, x1.y, s1);
    s1 = __dp4a(w1.z, x1.z, s1);
    s1 = __dp4a(w1.w, x1.w, s1);
    const int sc0 = ws[64 + 2 * w], sc1 = ws[64 + 2 * w + 1];
    isum += (sc0 & 15) * s0 + (sc1 & 15) * s1;
    summs += int(bs[2 * w]) * (sc0 >> 4) + int(bs[2 * w + 1]) * (sc1 >> 4);
  }
  const float dy = x.d[sb];
  const float dall = __fmul_rn(dy, LoadHalfDev(blk + 80));
  const float dmin = __fmul_rn(dy, LoadHalfDev(blk + 82));
  return __fsub_rn(__fmul_rn(dall, float(isum)), __fmul_rn(dmin, float(summs)));
}

__device__ __forceinline__ float TpTermIQ2(const int* ws, const uint8_t* blk, const Q8Row& x,
                                           int sb) {
  const int8_t* q8 = x.qs + 256 * sb;
  int bsum = 0;
#pragma unroll
  for (int g = 0; g < 8; ++g) {
    const int4 w0 = *reinterpret_cast<const int4*>(ws + 8 * g);
    const int4 w1 = *reinterpret_cast<const int4*>(ws + 8 * g + 4);
    const int4 x0 = LoadX4(q8 + 32 * g);
    const int4 x1 = LoadX4(q8 + 32 * g + 16);
    int s = __dp4a(w0.x, x0.x, 0);
    s = __dp4a(w0.y, x0.y, s);
    s = __dp4a(w0.z, x0.z, s);
    s = __dp4a(w0.w, x0.w, s);
    s = __dp4a(w1.x, x1.x, s);
    s = __dp4a(w1.y, x1.y, s);
    s = __dp4a(w1.z, x1.z, s);
    s = __dp4a(w1.w, x1.w, s);
    bsum += s * ws[64 + g];
  }
  const float d = __fmul_rn(LoadHalfDev(blk), x.d[sb]);
  return __fmul_rn(d, float(bsum));
}

// Σ over the row's blocks in order for this lane's activation row (valid lanes only use
// the result). NR rows share the activations; ws holds NR × kTpWords ints of this warp.
template <DType T, int NR>
__device__ __forceinline__ void TpRowDots(const uint8_t* const* wrows, const uint8_t* xr,
                                          bool valid, int n, int* ws, const uint64_t* grid,
                                          float (&out)[NR]) {
  float facc[NR];
#pragma unroll
  for (int r = 0; r < NR; ++r) facc[r] = 0.0f;
  if constexpr (T == DType::kQ8_0) {
    const Q8Row x = Q8_0RowOf(xr, n);
    const int nblk = n / 32;
    for (int base = 0; base < nblk; base += 32) {
      int cnt = 0;
#pragma unroll
      for (int r = 0; r < NR; ++r) cnt = TpDecodeQ8_0(wrows[r], base, nblk, ws + r * kTpWords);
      __syncwarp();
      if (valid) {
        for (int i = 0; i < cnt; ++i) {
#pragma unroll
          for (int r = 0; r < NR; ++r) {
            facc[r] = __fadd_rn(facc[r], TpTermQ8_0(ws + r * kTpWords + 12 * i, x, base + i));
          }
        }
      }
      __syncwarp();
    }
  } else {
    const Q8Row x = Q8_KRowOf(xr, n);
    const int nsb = n / 256;
    constexpr int kBlockBytes = T == DType::kQ2_K ? 84 : 66;
    for (int sb = 0; sb < nsb; ++sb) {
#pragma unroll
      for (int r = 0; r < NR; ++r) {
        const uint8_t* blk = wrows[r] + size_t(kBlockBytes) * sb;
        if constexpr (T == DType::kQ2_K) {
          TpDecodeQ2_K(blk, ws + r * kTpWords);
        } else {
          TpDecodeIQ2(blk, ws + r * kTpWords, grid);
        }
      }
      __syncwarp();
      if (valid) {
#pragma unroll
        for (int r = 0; r < NR; ++r) {
          const uint8_t* blk = wrows[r] + size_t(kBlockBytes) * sb;
          const float term = T == DType::kQ2_K ? TpTermQ2_K(ws + r * kTpWords, blk, x, sb)
                                               : TpTermIQ2(ws + r * kTpWords, blk, x, sb);
          facc[r] = __fadd_rn(facc[r], term);
        }
      }
      __syncwarp();
    }
  }
#pragma unroll
  for (int r = 0; r < NR; ++r) {
    out[r] = T == DType::kIQ2_XXS ? __fmul_rn(0.125f, facc[r]) : facc[r];
  }
}

// This lane's activation row of the block's tile: plain tokens or expert-sorted pairs.
struct TpLane {
  bool valid = false;
  int expert = 0;
  int xrow = 0;
  int yrow = 0;
};
__device__ __forceinline__ TpLane TpResolve(const MatVecArgs& a) {
  TpLane l;
  const int lane = threadIdx.x & 31;
  if (a.tiles == nullptr) {
    const int t = blockIdx.y * kTpTokens + lane;
    l.valid = t < a.n_tokens;
    l.xrow = l.yrow = l.valid ? t : 0;
  } else {
    const int* tile = a.tiles + 3 * blockIdx.y;
    l.expert = tile[0];
    l.valid = lane < tile[2];
    const int p = l.valid ? a.pairs[tile[1] + lane] : 0;
    l.xrow = p / a.pair_div;
    l.yrow = p;
  }
  return l;
}

template <DType T>
__global__ void __launch_bounds__(kTpWarps * 32) MatVecTPKernel(MatVecArgs a) {
  __shared__ __align__(16) int ws_all[kTpWarps][kTpWords];
  const int warp = threadIdx.x >> 5;
  const int row = blockIdx.x * kTpWarps + warp;
  if (row >= a.rows) return;
  if (a.tiles != nullptr && a.tiles[3 * blockIdx.y + 2] == 0) return;
  const TpLane l = TpResolve(a);
  const int slice = a.rows_per_group > 0 ? row / a.rows_per_group : 0;
  const uint8_t* xr = a.x + uint64_t(l.xrow) * a.x_row_bytes + uint64_t(slice) * a.x_group_bytes;
  const uint8_t* wrow[1] = {ExpertMatrix(a.w, a.w_experts, l.expert, a.expert_bytes) +
                            uint64_t(row) * a.row_bytes};
  float r[1];
  TpRowDots<T, 1>(wrow, xr, l.valid, a.n, ws_all[warp], a.iq2_grid, r);
  if (l.valid) a.y[uint64_t(l.yrow) * a.y_row_floats + row] = r[0];
}

template <DType T>
__global__ void __launch_bounds__(kTpWarps * 32) GateUpTPKernel(GateUpArgs g) {
  __shared__ __align__(16) int ws_all[kTpWarps][2 * kTpWords];
  const MatVecArgs& a = g.mv;
  const int warp = threadIdx.x >> 5;
  const int row = blockIdx.x * kTpWarps + warp;
  if (row >= a.rows) return;
  if (a.tiles != nullptr && a.tiles[3 * blockIdx.y + 2] == 0) return;
  const TpLane l = TpResolve(a);
  const uint8_t* xr = a.x + uint64_t(l.xrow) * a.x_row_bytes;
  const uint64_t off = uint64_t(row) * a.row_bytes;
  const uint8_t* wrows[2] = {ExpertMatrix(a.w, a.w_experts, l.expert, a.expert_bytes) + off,
                             ExpertMatrix(g.w_up, g.up_experts, l.expert, a.expert_bytes) + off};
  float gu[2];
  TpRowDots<T, 2>(wrows, xr, l.valid, a.n, ws_all[warp], a.iq2_grid, gu);
  if (l.valid) {
    a.y[uint64_t(l.yrow) * a.y_row_floats + row] =
        __fmul_rn(ClampedSwiGlu(gu[0], gu[1], g.clamp), g.route_w[l.yrow]);
  }
}

}  // namespace flashkv::cuda
