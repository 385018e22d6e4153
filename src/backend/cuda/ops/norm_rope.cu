// RmsNorm, Rope and the official-numerics simulations (Fp8RoundTrip, HadamardFp4), with the
// CPU twins' formulas (src/backend/cpu/op_rms_norm.cpp, op_rope.cpp, quant_sim.cpp):
// RMSNorm's sum of squares in double (a fixed tree over the row), RoPE angles in ds4's
// float arithmetic (rope_params.h), the Walsh–Hadamard butterflies in the CPU's order (so its
// values are bit-identical), FP8/FP4 rounding with power-of-two block scales.
#include <cmath>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_state.h"
#include "backend/cuda/device/common.cuh"
#include "backend/cuda/device/norm_rope.cuh"

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
// One block of RmsNormThreads(n) per row: the tree is fixed per shape.
__global__ void RmsNormKernel(RmsArgs a) {
  __shared__ double scratch[32];
  const float* xr = a.x + size_t(blockIdx.x) * a.n;
  float* orow = a.out + size_t(blockIdx.x) * a.n;
  double ss = 0.0;
#pragma unroll 8
  for (int i = threadIdx.x; i < a.n; i += blockDim.x) ss = __fma_rn(double(xr[i]), xr[i], ss);
  ss = BlockSumD(ss, scratch);
  const float scale = RmsScale(ss, a.n, a.eps);
#pragma unroll 8
  for (int i = threadIdx.x; i < a.n; i += blockDim.x) orow[i] = RmsNormed(xr[i], scale, a.w, i);
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
  const int64_t* positions;  // [n_rows] or null: pos0 + r·pos_step
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
  float c, sn;
  const int64_t pos = a.positions != nullptr ? a.positions[r] : a.pos0 + r * a.pos_step;
  RopeCosSin(a.p, a.theta_scale, pos, pair, a.sin_sign, &c, &sn);
  const int n_nope = a.head_dim - a.p.n_rot;
  float* tail = a.x + (r * a.n_heads + h) * int64_t(a.head_dim) + n_nope;
  float2 xv = *reinterpret_cast<const float2*>(tail + 2 * pair);
  RopeRotate(c, sn, &xv.x, &xv.y);
  *reinterpret_cast<float2*>(tail + 2 * pair) = xv;
}

struct Fp8Args {
  float* x;  // [n_rows, row_dim]
  int n_rows;
  int row_dim;
  int n_prefix;
};
// One warp per 64-value block of the prefix.
__global__ void Fp8Kernel(Fp8Args a) {
  const int per_row = a.n_prefix / 64;
  const int64_t blk = int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (blk >= int64_t(per_row) * a.n_rows) return;
  float* p = a.x + (blk / per_row) * a.row_dim + (blk % per_row) * 64;
  Fp8Block64Warp(p);
}

struct HadamardArgs {
  float* x;  // [n_rows, row_dim]
  int row_dim;
  float scale;  // 1/sqrt(row_dim), rounded from double on the host
};
// One block per row: HadamardFp4Row (device/norm_rope.cuh) in shared memory.
__global__ void HadamardFp4Kernel(HadamardArgs a) {
  extern __shared__ float row[];
  float* xr = a.x + size_t(blockIdx.x) * a.row_dim;
  const int n = a.row_dim;
  for (int i = threadIdx.x; i < n; i += blockDim.x) row[i] = xr[i];
  __syncthreads();
  HadamardFp4Row(row, n, a.scale);
  for (int i = threadIdx.x; i < n; i += blockDim.x) xr[i] = row[i];
}

}  // namespace
}  // namespace cuda

void CudaBackend::RmsNorm(DevPtr<const float> x, int n_rows, int n, const Weight* weight, float eps,
                          DevPtr<float> out) {
  if (n_rows <= 0) return;
  const float* w = weight ? reinterpret_cast<const float*>(weight->data.get()) : nullptr;
  s_->Launch(cuda::RmsNormKernel, dim3(n_rows), dim3(cuda::RmsNormThreads(n)), 0,
             cuda::RmsArgs{x.get(), out.get(), w, n, eps});
}

void CudaBackend::Rope(DevPtr<float> x, int n_rows, int n_heads, int head_dim,
                       const RopeParams& rope, int64_t pos0, int64_t pos_step, bool inverse) {
  const int64_t total = int64_t(n_rows) * n_heads * (rope.n_rot / 2);
  if (total <= 0) return;
  const float theta_scale = cuda::RopeThetaScale(rope);
  s_->Launch(cuda::RopeKernel, dim3(cuda::CeilDiv(total, 128)), dim3(128), 0,
             cuda::RopeArgs{x.get(), rope, theta_scale, n_rows, n_heads, head_dim, pos0, pos_step,
                            nullptr, inverse ? -1.0f : 1.0f});
}

void CudaBackend::RopeAt(DevPtr<float> x, int n_rows, int n_heads, int head_dim,
                         const RopeParams& rope, DevPtr<const int64_t> positions, bool inverse) {
  const int64_t total = int64_t(n_rows) * n_heads * (rope.n_rot / 2);
  if (total <= 0) return;
  const float theta_scale = cuda::RopeThetaScale(rope);
  s_->Launch(cuda::RopeKernel, dim3(cuda::CeilDiv(total, 128)), dim3(128), 0,
             cuda::RopeArgs{x.get(), rope, theta_scale, n_rows, n_heads, head_dim, 0, 1,
                            positions.get(), inverse ? -1.0f : 1.0f});
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
