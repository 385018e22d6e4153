// Hyper-connection device pieces shared by HcPre / HcHead (ops/hyper_connections.cu) and the
// fused SublayerInput (fused/sublayer_input.cu): the flattened-stream RMS sum of HcNormKernel, the
// split of a token's mix into pre / post / comb (Sinkhorn) in the CPU's order, and the
// weighted stream sum. One implementation, so every kernel that forms these values gives
// them the same bits. Must not: launch anything.
#pragma once

#include "backend/cuda/device/common.cuh"

namespace flashkv::cuda {

inline constexpr int kMaxHc = 8;  // streams; Flash and the tiny models use 4

// pre weight i of a token's mix: sigmoid(mix_i · scale_0 + base_i) + eps. SplitSinkhorn and
// SplitSinkhornRegs/Warp form it with these operations, so a kernel that needs only the pre
// weights (the stream sum u) can form them beside the Sinkhorn with the same bits.
__device__ __forceinline__ float HcPreWeight(const float* mix, const float* scale,
                                             const float* base, int i, float eps) {
  const float z = __fadd_rn(__fmul_rn(mix[i], scale[0]), base[i]);
  return __fadd_rn(__fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-z))), eps);
}

// mix [(2+n)·n] -> out: pre [n], post [n], comb [n·n] (row j = source, column k = dest).
__device__ inline void SplitSinkhorn(const float* mix, const float* scale, const float* base, int n,
                                     int iters, float eps, float* out) {
  for (int i = 0; i < n; ++i) out[i] = HcPreWeight(mix, scale, base, i, eps);
  for (int i = 0; i < n; ++i) {
    const float z = __fadd_rn(__fmul_rn(mix[n + i], scale[1]), base[n + i]);
    out[n + i] = __fdiv_rn(2.0f, __fadd_rn(1.0f, expf(-z)));
  }
  float* c = out + 2 * n;
  for (int j = 0; j < n; ++j) {
    float row_max = -INFINITY;
    for (int k = 0; k < n; ++k) {
      const float v =
          __fadd_rn(__fmul_rn(mix[2 * n + j * n + k], scale[2]), base[2 * n + j * n + k]);
      c[j * n + k] = v;
      if (v > row_max) row_max = v;
    }
    float row_sum = 0.0f;
    for (int k = 0; k < n; ++k) {
      const float v = expf(__fsub_rn(c[j * n + k], row_max));
      c[j * n + k] = v;
      row_sum = __fadd_rn(row_sum, v);
    }
    const float inv = __fdiv_rn(1.0f, row_sum);
    for (int k = 0; k < n; ++k) c[j * n + k] = __fadd_rn(__fmul_rn(c[j * n + k], inv), eps);
  }
  for (int it = 0; it < max(iters, 1); ++it) {
    if (it > 0) {  // rows, then columns; the first pass is columns only
      for (int j = 0; j < n; ++j) {
        float sum = 0.0f;
        for (int k = 0; k < n; ++k) sum = __fadd_rn(sum, c[j * n + k]);
        const float inv = __fdiv_rn(1.0f, __fadd_rn(sum, eps));
        for (int k = 0; k < n; ++k) c[j * n + k] = __fmul_rn(c[j * n + k], inv);
      }
    }
    for (int k = 0; k < n; ++k) {
      float sum = 0.0f;
      for (int j = 0; j < n; ++j) sum = __fadd_rn(sum, c[j * n + k]);
      const float inv = __fdiv_rn(1.0f, __fadd_rn(sum, eps));
      for (int j = 0; j < n; ++j) c[j * n + k] = __fmul_rn(c[j * n + k], inv);
    }
  }
}

// SplitSinkhorn for N streams with the whole N×N matrix in registers (every calling lane
// computes all of it; lane l < N·N stores entry l): the same operations in the same order,
// with no shuffle or shared-memory round trip in the 20 dependent iterations.
template <int N>
__device__ inline void SplitSinkhornRegs(const float* mix, const float* scale, const float* base,
                                         int iters, float eps, float* out) {
  const int l = threadIdx.x & 31;
  if (l < N) {
    out[l] = HcPreWeight(mix, scale, base, l, eps);
    const float z2 = __fadd_rn(__fmul_rn(mix[N + l], scale[1]), base[N + l]);
    out[N + l] = __fdiv_rn(2.0f, __fadd_rn(1.0f, expf(-z2)));
  }
  float c[N][N];
#pragma unroll
  for (int j = 0; j < N; ++j) {
    float row_max = -INFINITY;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      c[j][k] = __fadd_rn(__fmul_rn(mix[2 * N + j * N + k], scale[2]), base[2 * N + j * N + k]);
      if (c[j][k] > row_max) row_max = c[j][k];
    }
    float row_sum = 0.0f;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      c[j][k] = expf(__fsub_rn(c[j][k], row_max));
      row_sum = __fadd_rn(row_sum, c[j][k]);
    }
    const float inv = __fdiv_rn(1.0f, row_sum);
#pragma unroll
    for (int k = 0; k < N; ++k) c[j][k] = __fadd_rn(__fmul_rn(c[j][k], inv), eps);
  }
  for (int it = 0; it < max(iters, 1); ++it) {
    if (it > 0) {  // rows, then columns; the first pass is columns only
#pragma unroll
      for (int j = 0; j < N; ++j) {
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < N; ++k) sum = __fadd_rn(sum, c[j][k]);
        const float inv = __fdiv_rn(1.0f, __fadd_rn(sum, eps));
#pragma unroll
        for (int k = 0; k < N; ++k) c[j][k] = __fmul_rn(c[j][k], inv);
      }
    }
#pragma unroll
    for (int k = 0; k < N; ++k) {
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < N; ++j) sum = __fadd_rn(sum, c[j][k]);
      const float inv = __fdiv_rn(1.0f, __fadd_rn(sum, eps));
#pragma unroll
      for (int j = 0; j < N; ++j) c[j][k] = __fmul_rn(c[j][k], inv);
    }
  }
#pragma unroll
  for (int j = 0; j < N; ++j) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if (l == j * N + k) out[2 * N + l] = c[j][k];
    }
  }
}

// Sinkhorn with one lane per matrix entry (n·n <= 32): each row or column sum reads its n
// entries by shuffles and adds them in the CPU's order, so the values match the serial
// SplitSinkhorn bit for bit while the 20 iterations run in parallel. Four streams (ds4)
// take SplitSinkhornRegs.
__device__ inline void SplitSinkhornWarp(const float* mix, const float* scale, const float* base,
                                         int n, int iters, float eps, float* out) {
  if (n == 4) return SplitSinkhornRegs<4>(mix, scale, base, iters, eps, out);
  const int l = threadIdx.x & 31;
  if (l < n) {
    out[l] = HcPreWeight(mix, scale, base, l, eps);
    const float z2 = __fadd_rn(__fmul_rn(mix[n + l], scale[1]), base[n + l]);
    out[n + l] = __fdiv_rn(2.0f, __fadd_rn(1.0f, expf(-z2)));
  }
  const bool active = l < n * n;
  const int j = active ? l / n : 0, k = active ? l % n : 0;
  float v = active ? __fadd_rn(__fmul_rn(mix[2 * n + l], scale[2]), base[2 * n + l]) : 0.0f;
  float row_max = -INFINITY;
  for (int kk = 0; kk < n; ++kk) {
    const float o = __shfl_sync(kFullMask, v, j * n + kk);
    if (o > row_max) row_max = o;
  }
  v = expf(__fsub_rn(v, row_max));
  float row_sum = 0.0f;
  for (int kk = 0; kk < n; ++kk)
    row_sum = __fadd_rn(row_sum, __shfl_sync(kFullMask, v, j * n + kk));
  v = __fadd_rn(__fmul_rn(v, __fdiv_rn(1.0f, row_sum)), eps);
  for (int it = 0; it < max(iters, 1); ++it) {
    if (it > 0) {
      float sum = 0.0f;
      for (int kk = 0; kk < n; ++kk) sum = __fadd_rn(sum, __shfl_sync(kFullMask, v, j * n + kk));
      v = __fmul_rn(v, __fdiv_rn(1.0f, __fadd_rn(sum, eps)));
    }
    float sum = 0.0f;
    for (int jj = 0; jj < n; ++jj) sum = __fadd_rn(sum, __shfl_sync(kFullMask, v, jj * n + k));
    v = __fmul_rn(v, __fdiv_rn(1.0f, __fadd_rn(sum, eps)));
  }
  if (active) out[2 * n + l] = v;
}

// HcNormKernel's threads: the sum of squares of a token's flattened streams is formed by
// kHcNormThreads partial sums (thread i: elements i, i + kHcNormThreads, … in order, in
// double) added by BlockSumD's tree.
inline constexpr int kHcNormThreads = 1024;

// That sum from a block of any multiple of 32 threads ≤ kHcNormThreads that divides it:
// each thread forms the partial sums of the virtual threads tid, tid + blockDim.x, …, and
// each virtual warp's lanes are one real warp's lanes, so the tree is HcNormKernel's.
// Every thread gets the result. scratch: 32 doubles.
__device__ inline double HcNormSumSquares(const float* x, int hc_dim, double* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int per = kHcNormThreads / blockDim.x;  // virtual threads per thread
  const int n_warps = blockDim.x >> 5;
  __syncthreads();  // scratch may still be read by an earlier call
  for (int k = 0; k < per; ++k) {
    const int v = threadIdx.x + k * blockDim.x;
    double ss = 0.0;
#pragma unroll 8
    for (int i = v; i < hc_dim; i += kHcNormThreads) ss = __fma_rn(double(x[i]), x[i], ss);
    ss = WarpSumD(ss);
    if (lane == 0) scratch[warp + k * n_warps] = ss;
  }
  __syncthreads();
  return WarpSumD(lane < kHcNormThreads / 32 ? scratch[lane] : 0.0);
}

// u[d] = Σ_j x[j, d] · split[j] in stream order (HcSplitKernel's stream sum).
__device__ __forceinline__ float HcStreamSum(const float* x, const float* split, int n_hc,
                                             int n_embd, int d) {
  float acc = 0.0f;
  for (int j = 0; j < n_hc; ++j) {
    acc = __fadd_rn(acc, __fmul_rn(x[size_t(j) * n_embd + d], split[j]));
  }
  return acc;
}

// HC_post of one output element: post_k · f + Σ_j comb[j, k] · x[j, d] (HcPostKernel).
__device__ __forceinline__ float HcPostValue(const float* x, float f, const float* post,
                                             const float* comb, int n_hc, int n_embd, int k,
                                             int d) {
  float acc = __fmul_rn(f, post[k]);
  for (int j = 0; j < n_hc; ++j) {
    acc = __fadd_rn(acc, __fmul_rn(comb[j * n_hc + k], x[int64_t(j) * n_embd + d]));
  }
  return acc;
}

}  // namespace flashkv::cuda
