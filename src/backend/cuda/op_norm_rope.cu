// RmsNorm, Rope and the official-numerics simulations (Fp8RoundTrip, HadamardFp4), with the
// CPU twins' formulas (src/backend/cpu/op_rms_norm.cpp, op_rope.cpp, quant_sim.cpp):
// RMSNorm's sum of squares in double (a fixed tree over the row), RoPE angles in ds4's
// float arithmetic (rope_params.h), the Walsh–Hadamard butterflies in the CPU's order (so its
// values are bit-identical), FP8/FP4 rounding with power-of-two block scales.
#include <cmath>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_state.h"

namespace flashkv {
namespace cuda {
namespace {

struct RmsArgs {
  const float* x;  // [n_rows, n]
  float* out;      // [n_rows, n], may alias x
  const float* w;  // [n] or null
  int n;
  float eps;
};
// One block per row; the block size depends only on n, so the tree is fixed per shape.
__global__ void RmsNormKernel(RmsArgs a) {
  __shared__ double scratch[32];
  const float* xr = a.x + size_t(blockIdx.x) * a.n;
  float* orow = a.out + size_t(blockIdx.x) * a.n;
  double ss = 0.0;
#pragma unroll 8
  for (int i = threadIdx.x; i < a.n; i += blockDim.x) ss = __fma_rn(double(xr[i]), xr[i], ss);
  ss = BlockSumD(ss, scratch);
  const float scale =
      __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(float(__ddiv_rn(ss, double(a.n))), a.eps)));
#pragma unroll 8
  for (int i = threadIdx.x; i < a.n; i += blockDim.x) {
    const float v = __fmul_rn(xr[i], scale);
    orow[i] = a.w != nullptr ? __fmul_rn(v, a.w[i]) : v;
  }
}

struct RopeArgs {
  float* x;  // [n_rows, n_heads, head_dim]
  RopeParams p;
  float theta_scale;  // base^(-2/n_rot), computed on the host as the CPU op does
  int n_rows;
  int n_heads;
  int head_dim;
  int64_t pos0;
  int64_t pos_step;
  float sin_sign;
};
// One thread per (row, head, pair): ds4's float angle (repeated multiplication from the
// position, YaRN ramp), cos/sin scaled by mscale.
__global__ void RopeKernel(RopeArgs a) {
  const int n_pairs = a.p.n_rot / 2;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= int64_t(a.n_rows) * a.n_heads * n_pairs) return;
  const int pair = int(idx % n_pairs);
  const int h = int((idx / n_pairs) % a.n_heads);
  const int64_t r = idx / (int64_t(n_pairs) * a.n_heads);
  float theta_extrap = float(a.pos0 + r * a.pos_step);
  for (int i = 0; i < pair; ++i) theta_extrap = __fmul_rn(theta_extrap, a.theta_scale);
  const float theta_interp = __fmul_rn(a.p.freq_scale, theta_extrap);
  float theta = theta_interp;
  if (a.p.ext_factor != 0.0f) {
    const float span = fmaxf(0.001f, __fsub_rn(a.p.corr_hi, a.p.corr_lo));
    const float y = __fdiv_rn(__fsub_rn(float(pair), a.p.corr_lo), span);
    const float mix = __fmul_rn(__fsub_rn(1.0f, fminf(1.0f, fmaxf(0.0f, y))), a.p.ext_factor);
    theta = __fadd_rn(__fmul_rn(theta_interp, __fsub_rn(1.0f, mix)), __fmul_rn(theta_extrap, mix));
  }
  const float c = __fmul_rn(cosf(theta), a.p.mscale);
  const float s = __fmul_rn(__fmul_rn(a.sin_sign, sinf(theta)), a.p.mscale);
  const int n_nope = a.head_dim - a.p.n_rot;
  float* tail = a.x + (r * a.n_heads + h) * int64_t(a.head_dim) + n_nope;
  const float2 xv = *reinterpret_cast<const float2*>(tail + 2 * pair);
  float2 o;
  o.x = __fsub_rn(__fmul_rn(xv.x, c), __fmul_rn(xv.y, s));
  o.y = __fadd_rn(__fmul_rn(xv.x, s), __fmul_rn(xv.y, c));
  *reinterpret_cast<float2*>(tail + 2 * pair) = o;
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

struct Fp8Args {
  float* x;  // [n_rows, row_dim]
  int n_rows;
  int row_dim;
  int n_prefix;
};
// One warp per 64-value block of the prefix.
__global__ void Fp8Kernel(Fp8Args a) {
  const int lane = threadIdx.x & 31;
  const int per_row = a.n_prefix / 64;
  const int64_t blk = int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (blk >= int64_t(per_row) * a.n_rows) return;
  float* p = a.x + (blk / per_row) * a.row_dim + (blk % per_row) * 64;
  float v0 = p[lane], v1 = p[lane + 32];
  float amax = WarpMax(fmaxf(fabsf(v0), fabsf(v1)));
  if (amax < 1.0e-4f) amax = 1.0e-4f;
  const float scale = ldexpf(1.0f, int(ceilf(log2f(__fdiv_rn(amax, 448.0f)))));
  v0 = fminf(fmaxf(__fdiv_rn(v0, scale), -448.0f), 448.0f);
  v1 = fminf(fmaxf(__fdiv_rn(v1, scale), -448.0f), 448.0f);
  p[lane] = __fmul_rn(RoundE4M3(v0), scale);
  p[lane + 32] = __fmul_rn(RoundE4M3(v1), scale);
}

struct HadamardArgs {
  float* x;  // [n_rows, row_dim]
  int row_dim;
  float scale;  // 1/sqrt(row_dim), rounded from double on the host
};
// One block per row: butterflies in shared memory in the CPU's stage order, the 1/sqrt(n)
// scale, then an FP4 round trip per 32 values (one warp per block of 32).
__global__ void HadamardFp4Kernel(HadamardArgs a) {
  extern __shared__ float row[];
  float* xr = a.x + size_t(blockIdx.x) * a.row_dim;
  const int n = a.row_dim;
  for (int i = threadIdx.x; i < n; i += blockDim.x) row[i] = xr[i];
  __syncthreads();
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
    float v = __fmul_rn(row[b * 32 + lane], a.scale);
    float amax = WarpMax(fabsf(v));
    if (amax < 7.052966104933725e-38f) amax = 7.052966104933725e-38f;
    const float scale = ldexpf(1.0f, int(ceilf(log2f(__fdiv_rn(amax, 6.0f)))));
    v = fminf(fmaxf(__fdiv_rn(v, scale), -6.0f), 6.0f);
    xr[b * 32 + lane] = __fmul_rn(RoundE2M1(v), scale);
  }
}

}  // namespace
}  // namespace cuda

void CudaBackend::RmsNorm(DevPtr<const float> x, int n_rows, int n, const Weight* weight, float eps,
                          DevPtr<float> out) {
  if (n_rows <= 0) return;
  const float* w = weight ? reinterpret_cast<const float*>(weight->data.get()) : nullptr;
  const int threads = n >= 2048 ? 256 : n >= 256 ? 128 : 32;
  s_->Launch(cuda::RmsNormKernel, dim3(n_rows), dim3(threads), 0,
             cuda::RmsArgs{x.get(), out.get(), w, n, eps});
}

void CudaBackend::Rope(DevPtr<float> x, int n_rows, int n_heads, int head_dim,
                       const RopeParams& rope, int64_t pos0, int64_t pos_step, bool inverse) {
  const int64_t total = int64_t(n_rows) * n_heads * (rope.n_rot / 2);
  if (total <= 0) return;
  const float theta_scale = std::pow(rope.freq_base, -2.0f / float(rope.n_rot));
  s_->Launch(cuda::RopeKernel, dim3(cuda::CeilDiv(total, 128)), dim3(128), 0,
             cuda::RopeArgs{x.get(), rope, theta_scale, n_rows, n_heads, head_dim, pos0, pos_step,
                            inverse ? -1.0f : 1.0f});
}

void CudaBackend::Fp8RoundTrip(DevPtr<float> x, int n_rows, int row_dim, int n_prefix) {
  const int64_t blocks = int64_t(n_rows) * (n_prefix / 64);
  if (blocks <= 0) return;
  s_->Launch(cuda::Fp8Kernel, dim3(cuda::CeilDiv(blocks, 4)), dim3(128), 0,
             cuda::Fp8Args{x.get(), n_rows, row_dim, n_prefix});
}

void CudaBackend::HadamardFp4(DevPtr<float> x, int n_rows, int row_dim) {
  if (n_rows <= 0) return;
  const float scale = float(1.0 / std::sqrt(double(row_dim)));
  s_->Launch(cuda::HadamardFp4Kernel, dim3(n_rows), dim3(128), unsigned(row_dim * sizeof(float)),
             cuda::HadamardArgs{x.get(), row_dim, scale});
}

}  // namespace flashkv
