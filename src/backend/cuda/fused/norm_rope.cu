// The fused NormRope (fused/launch.h): one block per (row, head), of RmsNormThreads(head_dim)
// threads like RmsNormKernel, normalises the head into shared memory with RmsNormKernel's
// tree, rotates its tail with RopeKernel's angles, rounds the prefix through FP8 as
// Fp8Kernel does (the prefix and the rotated tail are disjoint, so the order of the two does
// not matter), rounds to F16 as F16RoundKernel does, and writes the head back: four kernels'
// values from one, for any number of rows (each row's arithmetic is its own, at its position:
// pos0 + r·pos_step, or positions[r] for the rows of several sessions of a step).
#include "backend/cuda/device/norm_rope.cuh"
#include "backend/cuda/fused/launch.h"

namespace flashkv::cuda {
namespace {

constexpr int kMaxNormRopeDim = 8192;

struct NormRopeKernelArgs {
  float* x;        // [n_rows, n_heads, head_dim]
  const float* w;  // [head_dim] or null
  float eps;
  RopeParams rope;
  float theta_scale;
  int n_heads;
  int head_dim;
  int64_t pos0;
  int64_t pos_step;
  const int64_t* positions;  // [n_rows] or null: pos0 + r·pos_step
  int fp8_prefix;
  bool f16_round;
};

__global__ void NormRopeKernel(NormRopeKernelArgs a) {
  extern __shared__ float head[];  // [head_dim]
  __shared__ double scratch[32];
  const int n = a.head_dim;
  float* x = a.x + uint64_t(blockIdx.x) * n;
  const int64_t r = int64_t(blockIdx.x) / a.n_heads;

  double ss = 0.0;
#pragma unroll 8
  for (int i = threadIdx.x; i < n; i += blockDim.x) ss = __fma_rn(double(x[i]), x[i], ss);
  const float scale = RmsScale(BlockSumD(ss, scratch), n, a.eps);
  for (int i = threadIdx.x; i < n; i += blockDim.x) head[i] = RmsNormed(x[i], scale, a.w, i);
  __syncthreads();

  float* tail = head + (n - a.rope.n_rot);
  const int64_t pos = a.positions != nullptr ? a.positions[r] : a.pos0 + r * a.pos_step;
  for (int pair = threadIdx.x; pair < a.rope.n_rot / 2; pair += blockDim.x) {
    float c, s;
    RopeCosSin(a.rope, a.theta_scale, pos, pair, 1.0f, &c, &s);
    RopeRotate(c, s, &tail[2 * pair], &tail[2 * pair + 1]);
  }
  __syncthreads();

  for (int b = threadIdx.x >> 5; b < a.fp8_prefix / 64; b += blockDim.x >> 5) {
    Fp8Block64Warp(head + 64 * b);
  }
  __syncthreads();

  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = head[i];
    x[i] = a.f16_round ? __half2float(__float2half_rn(v)) : v;
  }
}

}  // namespace

bool LaunchFusedNormRope(CudaBackend::State& s, const NormRopeArgs& a) {
  const int n = a.head_dim;
  const int n_rot = a.rope.n_rot;
  if (n <= 0 || n > kMaxNormRopeDim || n_rot < 0 || n_rot % 2 != 0 || n_rot > n) return false;
  if (a.fp8_prefix < 0 || a.fp8_prefix % 64 != 0 || a.fp8_prefix > n - n_rot) return false;
  if (a.weight != nullptr && a.weight->type != DType::kF32) return false;
  const int64_t blocks = int64_t(a.n_rows) * a.n_heads;
  if (blocks <= 0) return true;
  NormRopeKernelArgs k{};
  k.x = a.x.get();
  k.w = a.weight != nullptr ? reinterpret_cast<const float*>(a.weight->data.get()) : nullptr;
  k.eps = a.eps;
  k.rope = a.rope;
  k.theta_scale = RopeThetaScale(a.rope);
  k.n_heads = a.n_heads;
  k.head_dim = n;
  k.pos0 = a.pos0;
  k.pos_step = a.pos_step;
  k.positions = a.positions.get();
  k.fp8_prefix = a.fp8_prefix;
  k.f16_round = a.f16_round;
  s.Launch(NormRopeKernel, dim3(unsigned(blocks)), dim3(RmsNormThreads(n)),
           unsigned(sizeof(float) * n), k);
  return true;
}

}  // namespace flashkv::cuda
