// WarpRowDot: one warp computes one (or NR) weight rows against up to NT activation rows
// (tokens or expert slots). The weight row is read once per call whatever NT is, and the arithmetic
// for each activation row is the same for every NT and every position in the tile, so an
// output does not depend on how tokens were batched (backend.h's batching contract).
//   fp32 activations: lane l multiply-adds units l, l+32, … in order (fused multiply-add),
//     then an xor-tree over the 32 lanes.
//   q8 activations: per block (Q8_0) or super-block (K-quants) a float term is formed from
//     exact integer sums, and the terms are folded in block order by lane t for token t
//     with unfused adds — ds4's CPU order, so the bits equal ref::DotQ8.
// On return lane t < nt holds the dot products of activation row t (for NT = 1, every lane).
// Must not: know what the rows mean (matmul, experts, HC projections all use it).
#pragma once

#include "backend/cuda/device/quant.cuh"

namespace flashkv::cuda {

// Floats of fold scratch one warp needs (shared memory), for NT <= 8.
inline constexpr int kFoldFloats = 4 * 8 * 9;  // Q4_K: 4 slots × 8 tokens × 9; Q8_0: 32 × 8

// The fp32 activations as stored (WarpRowDotF32's default map).
struct NoXMap {
  __device__ __forceinline__ float4 operator()(float4 q) const { return q; }
};
// Activations stored unscaled and read as x · scale, rounded: the values a separate kernel
// would have written as __fmul_rn(x, scale) (the fused HC input normalises where it reads).
struct ScaleXMap {
  float scale;
  __device__ __forceinline__ float4 operator()(float4 q) const {
    return make_float4(__fmul_rn(q.x, scale), __fmul_rn(q.y, scale), __fmul_rn(q.z, scale),
                       __fmul_rn(q.w, scale));
  }
};

// fp32 activations. The lane handles units unit0, unit0 + stride, … (stride a multiple of
// 32: one warp, or several warps splitting a row); acc[r][t] gets the lane's partial sums
// reduced over the warp (every lane holds them). NR weight rows share the activations;
// xmap turns each loaded float4 of x into the values multiplied. kGlobalX: x is in global
// memory (read through the read-only cache), else anywhere (shared memory).
template <DType T, int NT, int NR, typename XMap = NoXMap, bool kGlobalX = true>
__device__ __forceinline__ void WarpRowDotF32(const uint8_t* const* wrows, const float* const* x,
                                              int nt, int n, int unit0, int stride,
                                              const uint64_t* iq2_grid, float (&acc)[NR][NT],
                                              XMap xmap = XMap()) {
  constexpr int U = Unit<T>::kValues;
#pragma unroll
  for (int r = 0; r < NR; ++r) {
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;
  }
  const int units = n / U;
#pragma unroll 2
  for (int u = unit0; u < units; u += stride) {
    float v[NR][U];
#pragma unroll
    for (int r = 0; r < NR; ++r) DequantUnit<T>(wrows[r], u, v[r], iq2_grid);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t < nt) {
        const float4* xt = reinterpret_cast<const float4*>(x[t] + size_t(u) * U);
#pragma unroll
        for (int j = 0; j < U / 4; ++j) {
          const float4 q = xmap(kGlobalX ? __ldg(xt + j) : xt[j]);
#pragma unroll
          for (int r = 0; r < NR; ++r) {
            acc[r][t] = __fmaf_rn(v[r][4 * j], q.x, acc[r][t]);
            acc[r][t] = __fmaf_rn(v[r][4 * j + 1], q.y, acc[r][t]);
            acc[r][t] = __fmaf_rn(v[r][4 * j + 2], q.z, acc[r][t]);
            acc[r][t] = __fmaf_rn(v[r][4 * j + 3], q.w, acc[r][t]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < NR; ++r) {
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = WarpSum(acc[r][t]);
  }
}

// fp32 activations, few long rows (HC projections, router, small compressors; rows below
// kSplitBelowRows): the kSplitWarps warps of a block share one row, each taking every
// kSplitWarps-th group of 32 units, and their partial sums are added in warp order. On
// return thread t < nt holds the dot of activation row t. part: kSplitWarps × NT floats of
// shared memory. Called by every thread of a kSplitWarps-warp block.
inline constexpr int kSplitWarps = 8;
template <DType T, int NT, typename XMap = NoXMap, bool kGlobalX = true>
__device__ __forceinline__ float SplitRowDotsF32(const uint8_t* wrow, const float* const* xf,
                                                 int nt, int n, const uint64_t* iq2_grid,
                                                 float (*part)[NT], XMap xmap = XMap()) {
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const uint8_t* wrows[1] = {wrow};
  float acc[1][NT];
  WarpRowDotF32<T, NT, 1, XMap, kGlobalX>(wrows, xf, nt, n, warp * 32 + lane, kSplitWarps * 32,
                                          iq2_grid, acc, xmap);
  if (lane == 0) {
#pragma unroll
    for (int t = 0; t < NT; ++t) part[warp][t] = acc[0][t];
  }
  __syncthreads();
  float sum = 0.0f;
  if (threadIdx.x < nt) {
    sum = part[0][threadIdx.x];
#pragma unroll
    for (int w = 1; w < kSplitWarps; ++w) sum = __fadd_rn(sum, part[w][threadIdx.x]);
  }
  return sum;
}

// The float term of one block (Q8_0) or super-block (Q2_K, IQ2_XXS) of a weight row
// against activation row xr; valid in the lane that owns the block (Q8_0: every lane;
// K-quants: every lane of the 8-lane group, after an exact integer reduction).
template <DType T>
__device__ __forceinline__ float BlockTerm(const uint8_t* wrow, const uint8_t* xr, int n, int blk,
                                           bool valid, int w, const uint64_t* iq2_grid) {
  if constexpr (T == DType::kQ8_0) {
    if (!valid) return 0.0f;
    const uint8_t* wblk = wrow + 34 * size_t(blk);
    const Q8Row x = Q8_0RowOf(xr, n);
    const int isum = Q8_0BlockIsum(wblk, x.qs + 32 * blk);
    return __fmul_rn(__fmul_rn(LoadHalfDev(wblk), x.d[blk]), float(isum));
  } else if constexpr (T == DType::kQ2_K) {
    const int sb = valid ? blk : 0;
    const uint8_t* wblk = wrow + 84 * size_t(sb);
    const Q8Row x = Q8_KRowOf(xr, n);
    int isum = 0, summs = 0;
    if (valid) Q2KUnitIsum(wblk, w, x.qs + 256 * sb, x.bsums + 16 * sb, &isum, &summs);
    isum = GroupSumInt<8>(isum);
    summs = GroupSumInt<8>(summs);
    if (!valid) return 0.0f;
    const float dy = x.d[sb];
    const float dall = __fmul_rn(dy, LoadHalfDev(wblk + 80));
    const float dmin = __fmul_rn(dy, LoadHalfDev(wblk + 82));
    return __fsub_rn(__fmul_rn(dall, float(isum)), __fmul_rn(dmin, float(summs)));
  } else {  // IQ2_XXS
    const int sb = valid ? blk : 0;
    const uint8_t* wblk = wrow + 66 * size_t(sb);
    const Q8Row x = Q8_KRowOf(xr, n);
    int bsum = valid ? Iq2xxsUnitIsum(wblk, w, x.qs + 256 * sb, iq2_grid) : 0;
    bsum = GroupSumInt<8>(bsum);
    if (!valid) return 0.0f;
    const float d = __fmul_rn(LoadHalfDev(wblk), x.d[sb]);
    return __fmul_rn(d, float(bsum));
  }
}

// q8 activations. x[t] points at the activation blocks of row t; fold: kFoldFloats floats
// of this warp's shared memory (used when NT > 1 or for Q4_K). The terms of kBatch passes
// are computed before any is folded, so their loads are in flight together.
// Q8_0 rows whose block count is a multiple of 8 start 16-byte aligned; with `stage`
// (kQ8_0StageBytes of this warp's shared memory) such a row is copied in with coalesced
// 16-byte loads, kBatch passes at a time, and the blocks are read from there.
inline constexpr int kQ8_0StageBytes = 34 * 128;

template <DType T, int NT, int NR>
__device__ __forceinline__ void WarpRowDotQ8(const uint8_t* const* wrows, const uint8_t* const* x,
                                             int nt, int n, float* fold, const uint64_t* iq2_grid,
                                             float (&out)[NR], uint8_t* stage = nullptr) {
  const int lane = threadIdx.x & 31;
  if constexpr (T == DType::kQ4_K) {
    // Q4_K (not on ds4's hot path): one super-block per 8 lanes per pass, 9-float records.
    const int nsb = n / 256;
    const int grp = lane >> 3;
    const int w = lane & 7;
    constexpr int R = 9;
#pragma unroll
    for (int r = 0; r < NR; ++r) {
      float facc = 0.0f;
      float sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int base = 0; base < nsb; base += 4) {
        const int sb = base + grp;
        const bool valid = sb < nsb;
        const uint8_t* wblk = wrows[r] + size_t(144) * (valid ? sb : 0);
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          if (t < nt) {
            const Q8Row xr = Q8_KRowOf(x[t], n);
            const int sbv = valid ? sb : 0;
            int lanes[8], summ = 0;
            if (valid) {
              Q4KUnitIsum(wblk, w, xr.qs + 256 * sbv, xr.bsums + 16 * sbv, lanes, &summ);
            } else {
#pragma unroll
              for (int l = 0; l < 8; ++l) lanes[l] = 0;
            }
#pragma unroll
            for (int l = 0; l < 8; ++l) lanes[l] = GroupSumInt<8>(lanes[l]);
            summ = GroupSumInt<8>(summ);
            if (valid && w == 0) {
              const float dy = xr.d[sbv];
              const float d = __fmul_rn(LoadHalfDev(wblk), dy);
              const float dmin = __fmul_rn(LoadHalfDev(wblk + 2), dy);
              float* rec = fold + (grp * NT + t) * R;
#pragma unroll
              for (int l = 0; l < 8; ++l) rec[l] = __fmul_rn(d, float(lanes[l]));
              rec[8] = __fmul_rn(dmin, float(summ));
            }
          }
        }
        __syncwarp();
        if (lane < nt) {
          const int cnt = min(4, nsb - base);
          for (int i = 0; i < cnt; ++i) {
            const float* rec = fold + (i * NT + lane) * R;
#pragma unroll
            for (int l = 0; l < 8; ++l) sums[l] = __fadd_rn(sums[l], rec[l]);
            facc = __fsub_rn(facc, rec[8]);
          }
        }
        __syncwarp();
      }
#pragma unroll
      for (int l = 0; l < 8; ++l) facc = __fadd_rn(facc, sums[l]);
      out[r] = facc;
    }
  } else {
    // Q8_0: 32 blocks per pass (one per lane); Q2_K / IQ2_XXS: 4 super-blocks per pass.
    constexpr bool kQ8_0 = T == DType::kQ8_0;
    constexpr int kPerPass = kQ8_0 ? 32 : 4;
    // Decoding batches 4 passes of loads in flight; with 8 activation rows the registers
    // hold the rows instead.
    constexpr int kBatch = NT == 1 ? 4 : 1;
    const int nblk = kQ8_0 ? n / 32 : n / 256;
    const int mine = kQ8_0 ? lane : (lane >> 3);  // block index within a pass
    const int w = lane & 7;
    float facc[NR];
#pragma unroll
    for (int r = 0; r < NR; ++r) facc[r] = 0.0f;
    const bool staged = kQ8_0 && NR == 1 && NT == 1 && stage != nullptr && nblk % 8 == 0;
    for (int base = 0; base < nblk; base += kPerPass * kBatch) {
      const uint8_t* wsrc[NR];
#pragma unroll
      for (int r = 0; r < NR; ++r) wsrc[r] = wrows[r];
      if (staged) {
        const int bytes = 34 * min(kPerPass * kBatch, nblk - base);
        const uint4* src = reinterpret_cast<const uint4*>(wrows[0] + 34 * size_t(base));
        uint4* dst = reinterpret_cast<uint4*>(stage);
        for (int i = lane; i < bytes / 16; i += 32) dst[i] = src[i];
        __syncwarp();
      }
      float term[NR][kBatch][NT];
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int blk = base + i * kPerPass + mine;
        const bool valid = blk < nblk;
#pragma unroll
        for (int t = 0; t < NT; ++t) {
#pragma unroll
          for (int r = 0; r < NR; ++r) {
            if constexpr (kQ8_0) {
              if (staged) {
                float v = 0.0f;
                if (t < nt && valid) {
                  const uint8_t* sblk = stage + 34 * (blk - base);
                  const Q8Row xr = Q8_0RowOf(x[t], n);
                  v = __fmul_rn(__fmul_rn(LoadHalfDev(sblk), xr.d[blk]),
                                float(Q8_0BlockIsum(sblk, xr.qs + 32 * blk)));
                }
                term[r][i][t] = v;
                continue;
              }
            }
            term[r][i][t] = t < nt ? BlockTerm<T>(wsrc[r], x[t], n, blk, valid, w, iq2_grid) : 0.0f;
          }
        }
      }
      if (staged)
        __syncwarp();  // the next batch overwrites the stage
                       // Fold in block order with unfused adds.
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int first = base + i * kPerPass;
        const int cnt = min(kPerPass, nblk - first);
        if (cnt <= 0) break;
        if constexpr (NT == 1) {
          for (int k = 0; k < cnt; ++k) {
            const int src = kQ8_0 ? k : 8 * k;
#pragma unroll
            for (int r = 0; r < NR; ++r) {
              facc[r] = __fadd_rn(facc[r], __shfl_sync(kFullMask, term[r][i][0], src));
            }
          }
        } else {
#pragma unroll
          for (int r = 0; r < NR; ++r) {
            if (kQ8_0 || w == 0) {
#pragma unroll
              for (int t = 0; t < NT; ++t) fold[mine * NT + t] = term[r][i][t];
            }
            __syncwarp();
            if (lane < nt) {
              for (int k = 0; k < cnt; ++k) facc[r] = __fadd_rn(facc[r], fold[k * NT + lane]);
            }
            __syncwarp();
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < NR; ++r) {
      if constexpr (T == DType::kIQ2_XXS) facc[r] = __fmul_rn(0.125f, facc[r]);
      out[r] = facc[r];
    }
  }
}

}  // namespace flashkv::cuda
