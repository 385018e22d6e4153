// ds4's activation quantizers for one block, run by one warp (bit for bit the CPU's
// QuantizeAct): Q8_0 per 32 values, Q8_K per 256, into the split row layout of
// device/quant.cuh (Q8_0: qs [n], d [n/32]; Q8_K: qs [n], d [n/256], bsums [n/16]). The
// quantize kernels of products/matmul.cu and the fused kernels (fused/) call these, so an
// activation row has the same bits whichever kernel quantized it.
// Must not: know rows or tokens (the caller points at the block and its row).
#pragma once

#include "backend/cuda/device/common.cuh"

namespace flashkv::cuda {

// Block b of the row at `row` (n values) from its 32 values, lane l holding value l:
// d = amax / 127, q = rint(x · (1/d)) clamped (ds4 quantize_q8_0_activation). All 32 lanes
// call it; a caller that forms the values in registers quantizes them without a shared
// memory round trip (fused/sublayer_input.cu).
__device__ __forceinline__ void QuantizeQ8_0ValueWarp(float v, uint8_t* row, int n, int b) {
  const int lane = threadIdx.x & 31;
  const float amax = WarpMax(fabsf(v));
  const float d = __fdiv_rn(amax, 127.0f);
  const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  if (lane == 0) reinterpret_cast<float*>(row + n)[b] = d;
  const int q = min(max(__float2int_rn(__fmul_rn(v, id)), -128), 127);
  row[b * 32 + lane] = uint8_t(int8_t(q));
}

// The same from x = the block's 32 values.
__device__ __forceinline__ void QuantizeQ8_0BlockWarp(const float* x, uint8_t* row, int n, int b) {
  QuantizeQ8_0ValueWarp(x[threadIdx.x & 31], row, n, b);
}

// Super-block b of the row from x = its 256 values: the first element of largest |x| sets
// iscale = -127 / x_max, q = rint(iscale · x) clamped, d = 1 / iscale, bsums per 16
// (ds4 / GGML q8_K). All 32 lanes call it.
__device__ __forceinline__ void QuantizeQ8_KBlockWarp(const float* x, uint8_t* row, int n, int b) {
  const int lane = threadIdx.x & 31;
  float v[8];
  float amax = 0.0f;
  int idx = 0x7fffffff;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    v[j] = x[lane * 8 + j];
    const float ax = fabsf(v[j]);
    if (ax > amax) {
      amax = ax;
      idx = lane * 8 + j;
    }
  }
  // Largest |x|, the lowest index on ties.
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float oa = __shfl_xor_sync(kFullMask, amax, o);
    const int oi = __shfl_xor_sync(kFullMask, idx, o);
    if (oa > amax || (oa == amax && oi < idx)) {
      amax = oa;
      idx = oi;
    }
  }
  int8_t* qs = reinterpret_cast<int8_t*>(row) + b * 256;
  float* dp = reinterpret_cast<float*>(row + n) + b;
  int16_t* bsums = reinterpret_cast<int16_t*>(reinterpret_cast<float*>(row + n) + n / 256) + b * 16;
  if (amax == 0.0f) {
    if (lane == 0) *dp = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) qs[lane * 8 + j] = 0;
    if (lane < 16) bsums[lane] = 0;
    return;
  }
  const float xmax = x[idx];
  const float iscale = __fdiv_rn(-127.0f, xmax);
  int sum = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int q = min(max(__float2int_rn(__fmul_rn(iscale, v[j])), -128), 127);
    qs[lane * 8 + j] = int8_t(q);
    sum += q;
  }
  sum += __shfl_xor_sync(kFullMask, sum, 1);
  if ((lane & 1) == 0) bsums[lane >> 1] = int16_t(sum);
  if (lane == 0) *dp = __fdiv_rn(1.0f, iscale);
}

// Every block of one row of n values, by the warps of the calling block (warp w takes
// blocks w, w + n_warps, …). q8_k: Q8_K (n % 256 == 0), else Q8_0 (n % 32 == 0).
__device__ __forceinline__ void QuantizeRowByWarps(const float* x, uint8_t* row, int n, bool q8_k,
                                                   int warp, int n_warps) {
  const int per = q8_k ? 256 : 32;
  for (int b = warp; b < n / per; b += n_warps) {
    if (q8_k) {
      QuantizeQ8_KBlockWarp(x + b * 256, row, n, b);
    } else {
      QuantizeQ8_0BlockWarp(x + b * 32, row, n, b);
    }
  }
}

}  // namespace flashkv::cuda
