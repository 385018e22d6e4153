// The fused NormRope (fused/launch.h): one block per (row, head), of RmsNormThreads(head_dim)
// threads like RmsNormKernel, normalises the head into shared memory with RmsNormKernel's
// tree, rotates its tail with RopeKernel's angles, rounds the prefix through FP8 as
// Fp8Kernel does (the prefix and the rotated tail are disjoint, so the order of the two does
// not matter), rounds to F16 as F16RoundKernel does, and writes the head back: four kernels'
// values from one, for any number of rows (each row's arithmetic is its own, at its position:
// pos0 + r·pos_step, or positions[r] for the rows of several sessions of a step).
#include <algorithm>
#include <cmath>

#include "backend/cuda/device/norm_rope.cuh"
#include "backend/cuda/fused/launch.h"
#include "backend/cuda/launch_queue.h"

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

// RMSNorm of the head at x into `head` (shared memory) with RmsNormKernel's tree, its tail
// rotated at `pos` with RopeKernel's angles, its prefix through FP8 as Fp8Kernel does. Ends
// behind a barrier. NormRopeKernel's and FinishRowsKernel's arithmetic.
__device__ __forceinline__ void NormRopeHead(const NormRopeKernelArgs& a, const float* x,
                                             int64_t pos, float* head, double* scratch) {
  const int n = a.head_dim;
  double ss = 0.0;
#pragma unroll 8
  for (int i = threadIdx.x; i < n; i += blockDim.x) ss = __fma_rn(double(x[i]), x[i], ss);
  const float scale = RmsScale(BlockSumD(ss, scratch), n, a.eps);
  for (int i = threadIdx.x; i < n; i += blockDim.x) head[i] = RmsNormed(x[i], scale, a.w, i);
  __syncthreads();

  float* tail = head + (n - a.rope.n_rot);
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
}

__global__ void NormRopeKernel(NormRopeKernelArgs a) {
  extern __shared__ float head[];  // [head_dim]
  __shared__ double scratch[32];
  const int n = a.head_dim;
  float* x = a.x + uint64_t(blockIdx.x) * n;
  const int64_t r = int64_t(blockIdx.x) / a.n_heads;
  NormRopeHead(a, x, a.positions != nullptr ? a.positions[r] : a.pos0 + r * a.pos_step, head,
               scratch);
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = head[i];
    x[i] = a.f16_round ? __half2float(__float2half_rn(v)) : v;
  }
}

// The rows several sessions' compressors closed in a step (Backend::FinishRowsBatch): one
// block per session, which has no row (the block returns) or one, at its pos0 — so the
// launch has one shape whatever the sessions close. Each row gets NormRopeKernel's values,
// then with `hadamard` HadamardFp4Kernel's and F16RoundKernel's, from shared memory.
constexpr int kFinishEntries = 10;
struct FinishEntry {
  float* x;  // the session's row
  int64_t pos0;
  int n_rows;  // 0 or 1
};
struct FinishRowsKernelArgs {
  NormRopeKernelArgs base;  // x, positions and pos0 unused
  float hadamard_scale;     // > 0: HadamardFp4 and F16Round after the NormRope
  int count;
  FinishEntry e[kFinishEntries];
};
static_assert(sizeof(FinishRowsKernelArgs) <= kMaxKernelArgBytes);

__global__ void FinishRowsKernel(FinishRowsKernelArgs a) {
  extern __shared__ float head[];  // [head_dim]
  __shared__ double scratch[32];
  const FinishEntry e = a.e[blockIdx.x];
  if (e.n_rows <= 0) return;
  const int n = a.base.head_dim;
  const bool hadamard = a.hadamard_scale > 0.0f;
  NormRopeHead(a.base, e.x, e.pos0, head, scratch);
  if (hadamard) {
    if (a.base.f16_round) {
      for (int i = threadIdx.x; i < n; i += blockDim.x) {
        head[i] = __half2float(__float2half_rn(head[i]));
      }
      __syncthreads();
    }
    HadamardFp4Row(head, n, a.hadamard_scale);
  }
  const bool f16 = a.base.f16_round || hadamard;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = head[i];
    e.x[i] = f16 ? __half2float(__float2half_rn(v)) : v;
  }
}

// The fields of the launch-wide part: NormRopeArgs → kernel arguments (x and positions left
// to the caller).
NormRopeKernelArgs KernelArgsOf(const NormRopeArgs& a) {
  NormRopeKernelArgs k{};
  k.x = a.x.get();
  k.w = a.weight != nullptr ? reinterpret_cast<const float*>(a.weight->data.get()) : nullptr;
  k.eps = a.eps;
  k.rope = a.rope;
  k.theta_scale = RopeThetaScale(a.rope);
  k.n_heads = a.n_heads;
  k.head_dim = a.head_dim;
  k.pos0 = a.pos0;
  k.pos_step = a.pos_step;
  k.positions = a.positions.get();
  k.fp8_prefix = a.fp8_prefix;
  k.f16_round = a.f16_round;
  return k;
}

// Whether the fused kernels take NormRope's shapes and types.
bool FusedNormRopeFits(const NormRopeArgs& a) {
  const int n = a.head_dim;
  const int n_rot = a.rope.n_rot;
  if (n <= 0 || n > kMaxNormRopeDim || n_rot < 0 || n_rot % 2 != 0 || n_rot > n) return false;
  if (a.fp8_prefix < 0 || a.fp8_prefix % 64 != 0 || a.fp8_prefix > n - n_rot) return false;
  return a.weight == nullptr || a.weight->type == DType::kF32;
}

}  // namespace

bool LaunchFusedNormRope(CudaBackend::State& s, const NormRopeArgs& a) {
  if (!FusedNormRopeFits(a)) return false;
  const int64_t blocks = int64_t(a.n_rows) * a.n_heads;
  if (blocks <= 0) return true;
  s.Launch(NormRopeKernel, dim3(unsigned(blocks)), dim3(RmsNormThreads(a.head_dim)),
           unsigned(sizeof(float) * a.head_dim), KernelArgsOf(a));
  return true;
}

bool FinishRowsJoin(const NormRopeArgs& first, const NormRopeArgs& a, bool hadamard) {
  if (a.n_rows > 1 || a.n_heads != 1 || a.positions || !FusedNormRopeFits(a)) return false;
  if (hadamard && (a.head_dim & (a.head_dim - 1)) != 0) return false;  // HadamardFp4's rule
  const RopeParams& p = first.rope;
  const RopeParams& q = a.rope;
  return a.head_dim == first.head_dim && a.weight == first.weight && a.eps == first.eps &&
         a.pos_step == first.pos_step && a.fp8_prefix == first.fp8_prefix &&
         a.f16_round == first.f16_round && p.n_rot == q.n_rot && p.freq_base == q.freq_base &&
         p.freq_scale == q.freq_scale && p.ext_factor == q.ext_factor && p.corr_lo == q.corr_lo &&
         p.corr_hi == q.corr_hi && p.mscale == q.mscale;
}

void LaunchFinishRows(CudaBackend::State& s, const NormRopeArgs* const* rows, int n,
                      bool hadamard) {
  if (n <= 0) return;
  FinishRowsKernelArgs k{};
  k.base = KernelArgsOf(*rows[0]);
  k.hadamard_scale = hadamard ? float(1.0 / std::sqrt(double(rows[0]->head_dim))) : 0.0f;
  const int d = rows[0]->head_dim;
  for (int i0 = 0; i0 < n; i0 += kFinishEntries) {
    k.count = std::min(kFinishEntries, n - i0);
    for (int j = 0; j < k.count; ++j) {
      const NormRopeArgs& a = *rows[i0 + j];
      k.e[j] = FinishEntry{a.x.get(), a.pos0, a.n_rows};
    }
    s.Launch(FinishRowsKernel, dim3(unsigned(k.count)), dim3(RmsNormThreads(d)),
             unsigned(sizeof(float) * d), k);
  }
}

}  // namespace flashkv::cuda
