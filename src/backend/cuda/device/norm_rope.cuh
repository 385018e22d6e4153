// RMSNorm, RoPE and FP8 device pieces shared by RmsNorm / Rope / Fp8RoundTrip
// (ops/norm_rope.cu) and the fused NormRope (fused/norm_rope.cu), so a row has the same bits
// whichever kernel finished it: RMSNorm's block size per row width, ds4's float RoPE angle
// (rope_params.h) and rotation, and the FP8 E4M3 round trip of a 64-value block with a
// power-of-two scale (quant_sim.cpp). Must not: launch anything.
#pragma once

#include <cmath>

#include "backend/cuda/device/common.cuh"
#include "backend/rope_params.h"

namespace flashkv::cuda {

// Threads of the block that normalises one row of n values: the reduction tree (thread i
// sums elements i, i + threads, …, then BlockSumD) depends on it.
__host__ __device__ __forceinline__ int RmsNormThreads(int n) {
  return n >= 2048 ? 256 : n >= 256 ? 128 : 32;
}

// base^(−2/n_rot), computed on the host as the CPU op does.
inline float RopeThetaScale(const RopeParams& p) {
  return std::pow(p.freq_base, -2.0f / float(p.n_rot));
}

// cos and sin (the sin times sin_sign) of pair `pair` at position `pos`, scaled by mscale:
// the angle by repeated float multiplication from the position, then the YaRN ramp.
__device__ __forceinline__ void RopeCosSin(const RopeParams& p, float theta_scale, int64_t pos,
                                           int pair, float sin_sign, float* c, float* s) {
  float theta_extrap = float(pos);
  for (int i = 0; i < pair; ++i) theta_extrap = __fmul_rn(theta_extrap, theta_scale);
  const float theta_interp = __fmul_rn(p.freq_scale, theta_extrap);
  float theta = theta_interp;
  if (p.ext_factor != 0.0f) {
    const float span = fmaxf(0.001f, __fsub_rn(p.corr_hi, p.corr_lo));
    const float y = __fdiv_rn(__fsub_rn(float(pair), p.corr_lo), span);
    const float mix = __fmul_rn(__fsub_rn(1.0f, fminf(1.0f, fmaxf(0.0f, y))), p.ext_factor);
    theta = __fadd_rn(__fmul_rn(theta_interp, __fsub_rn(1.0f, mix)), __fmul_rn(theta_extrap, mix));
  }
  *c = __fmul_rn(cosf(theta), p.mscale);
  *s = __fmul_rn(__fmul_rn(sin_sign, sinf(theta)), p.mscale);
}

// (x0, x1) ← (x0·c − x1·s, x0·s + x1·c), unfused.
__device__ __forceinline__ void RopeRotate(float c, float s, float* x0, float* x1) {
  const float a = *x0, b = *x1;
  *x0 = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
  *x1 = __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c));
}

// Nearest E4M3FN / E2M1 value, ties to even (quant_sim.cpp).
__device__ __forceinline__ float RoundE4M3(float v) {
  const float sign = v < 0.0f ? -1.0f : 1.0f;
  float av = fabsf(v);
  if (av >= 448.0f) return sign * 448.0f;
  float step = 0.001953125f;
  if (av >= 0.015625f) {
    int e = 0;
    frexpf(av, &e);
    step = ldexpf(1.0f, e - 1 - 3);
  }
  av = __fmul_rn(rintf(__fdiv_rn(av, step)), step);
  if (av > 448.0f) av = 448.0f;
  return sign * av;
}
__device__ __forceinline__ float RoundE2M1(float v) {
  const float sign = v < 0.0f ? -1.0f : 1.0f;
  float av = fabsf(v);
  if (av >= 6.0f) return sign * 6.0f;
  float step = 0.5f;
  if (av >= 4.0f) {
    step = 2.0f;
  } else if (av >= 2.0f) {
    step = 1.0f;
  }
  av = __fmul_rn(rintf(__fdiv_rn(av, step)), step);
  if (av > 6.0f) av = 6.0f;
  return sign * av;
}

// FP8 E4M3 round trip of the 64 values at p (lane l holds p[l] and p[l + 32]), scale
// 2^ceil(log2(amax / 448)) with amax ≥ 1e-4. All 32 lanes call it.
__device__ __forceinline__ void Fp8Block64Warp(float* p) {
  const int lane = threadIdx.x & 31;
  float v0 = p[lane], v1 = p[lane + 32];
  float amax = WarpMax(fmaxf(fabsf(v0), fabsf(v1)));
  if (amax < 1.0e-4f) amax = 1.0e-4f;
  const float scale = ldexpf(1.0f, int(ceilf(log2f(__fdiv_rn(amax, 448.0f)))));
  v0 = fminf(fmaxf(__fdiv_rn(v0, scale), -448.0f), 448.0f);
  v1 = fminf(fmaxf(__fdiv_rn(v1, scale), -448.0f), 448.0f);
  p[lane] = __fmul_rn(RoundE4M3(v0), scale);
  p[lane + 32] = __fmul_rn(RoundE4M3(v1), scale);
}

// HadamardFp4 of one row of n values (a power of two) in shared memory, in place, by a whole
// block (blockDim.x a multiple of 32): the butterflies in the CPU's stage order, the
// 1/sqrt(n) scale, then an FP4 round trip per 32 values (one warp per block of 32). Begins
// with the row complete in `row` (behind a barrier); ends behind one. HadamardFp4Kernel's
// (ops/norm_rope.cu) and FinishRowsKernel's (fused/norm_rope.cu) arithmetic.
__device__ __forceinline__ void HadamardFp4Row(float* row, int n, float scale) {
  for (int stride = 1; stride < n; stride <<= 1) {
    for (int p = threadIdx.x; p < n / 2; p += blockDim.x) {
      const int base = (p / stride) * 2 * stride;
      const int i = p % stride;
      const float x0 = row[base + i];
      const float x1 = row[base + stride + i];
      row[base + i] = __fadd_rn(x0, x1);
      row[base + stride + i] = __fsub_rn(x0, x1);
    }
    __syncthreads();
  }
  const int lane = threadIdx.x & 31;
  for (int b = threadIdx.x >> 5; b < n / 32; b += blockDim.x >> 5) {
    float v = __fmul_rn(row[b * 32 + lane], scale);
    float amax = WarpMax(fabsf(v));
    if (amax < 7.052966104933725e-38f) amax = 7.052966104933725e-38f;
    const float s = ldexpf(1.0f, int(ceilf(log2f(__fdiv_rn(amax, 6.0f)))));
    v = fminf(fmaxf(__fdiv_rn(v, s), -6.0f), 6.0f);
    row[b * 32 + lane] = __fmul_rn(RoundE2M1(v), s);
  }
  __syncthreads();
}

}  // namespace flashkv::cuda
