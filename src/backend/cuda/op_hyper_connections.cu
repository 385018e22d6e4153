// HcPre, HcPost, HcHead (docs/DS4_MODEL.md §3), following src/backend/cpu/op_hyper_connections.cpp:
// normalise the flattened streams (sum of squares in double), project them with the HC
// weight through the shared matvec kernel, then per token the Sinkhorn split (one thread,
// ds4's reciprocal-multiply order) and the stream sums in stream order.
#include <cmath>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/matvec_launch.h"

namespace flashkv {
namespace cuda {
namespace {

struct HcNormArgs {
  const float* x;  // [n_tokens, hc_dim]
  float* flat;     // [n_tokens, hc_dim]
  int hc_dim;
  float eps;
};
__global__ void HcNormKernel(HcNormArgs a) {
  __shared__ double scratch[32];
  const float* xr = a.x + size_t(blockIdx.x) * a.hc_dim;
  float* fr = a.flat + size_t(blockIdx.x) * a.hc_dim;
  double ss = 0.0;
#pragma unroll 8
  for (int i = threadIdx.x; i < a.hc_dim; i += blockDim.x) ss = __fma_rn(double(xr[i]), xr[i], ss);
  ss = BlockSumD(ss, scratch);
  const float scale =
      __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(float(__ddiv_rn(ss, double(a.hc_dim))), a.eps)));
#pragma unroll 8
  for (int i = threadIdx.x; i < a.hc_dim; i += blockDim.x) fr[i] = __fmul_rn(xr[i], scale);
}

constexpr int kMaxHc = 8;  // streams; Flash and the tiny models use 4

// mix [(2+n)·n] -> out: pre [n], post [n], comb [n·n] (row j = source, column k = dest).
__device__ void SplitSinkhorn(const float* mix, const float* scale, const float* base, int n,
                              int iters, float eps, float* out) {
  for (int i = 0; i < n; ++i) {
    const float z = __fadd_rn(__fmul_rn(mix[i], scale[0]), base[i]);
    out[i] = __fadd_rn(__fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-z))), eps);
  }
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

struct HcSplitArgs {
  const float* x_hc;   // [n_tokens, n_hc·n_embd]
  const float* mix;    // [n_tokens, mix_dim]
  const float* scale;  // [3] (pre) or [1] (head)
  const float* base;   // [mix_dim] or [n_hc]
  float* u;            // [n_tokens, n_embd] (pre) / y (head)
  float* post;         // [n_tokens, n_hc] (pre only)
  float* comb;         // [n_tokens, n_hc·n_hc] (pre only)
  int n_hc;
  int n_embd;
  int iters;
  float eps;
  bool head;
};
// Sinkhorn with one lane per matrix entry (n·n <= 32): each row or column sum reads its n
// entries by shuffles and adds them in the CPU's order, so the values match the serial
// SplitSinkhorn bit for bit while the 20 iterations run in parallel.
__device__ void SplitSinkhornWarp(const float* mix, const float* scale, const float* base, int n,
                                  int iters, float eps, float* out) {
  const int l = threadIdx.x & 31;
  if (l < n) {
    const float z = __fadd_rn(__fmul_rn(mix[l], scale[0]), base[l]);
    out[l] = __fadd_rn(__fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-z))), eps);
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

// One block per token: warp 0 forms the stream weights, then the block sums streams.
__global__ void HcSplitKernel(HcSplitArgs a) {
  __shared__ float split[(2 + kMaxHc) * kMaxHc];
  const int n = a.n_hc;
  const size_t t = blockIdx.x;
  if (a.head) {
    if (threadIdx.x < n) {
      const int j = threadIdx.x;
      const float z = __fadd_rn(__fmul_rn(a.mix[t * n + j], a.scale[0]), a.base[j]);
      split[j] = __fadd_rn(SigmoidStable(z), a.eps);
    }
  } else if (n * n <= 32) {
    if (threadIdx.x < 32) {
      SplitSinkhornWarp(a.mix + t * (2 + n) * n, a.scale, a.base, n, a.iters, a.eps, split);
    }
  } else if (threadIdx.x == 0) {
    SplitSinkhorn(a.mix + t * (2 + n) * n, a.scale, a.base, n, a.iters, a.eps, split);
  }
  __syncthreads();
  if (!a.head) {
    for (int k = threadIdx.x; k < n + n * n; k += blockDim.x) {
      if (k < n) {
        a.post[t * n + k] = split[n + k];
      } else {
        a.comb[t * n * n + (k - n)] = split[2 * n + (k - n)];
      }
    }
  }
  const float* x = a.x_hc + t * n * size_t(a.n_embd);
  for (int d = threadIdx.x; d < a.n_embd; d += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < n; ++j)
      acc = __fadd_rn(acc, __fmul_rn(x[size_t(j) * a.n_embd + d], split[j]));
    a.u[t * a.n_embd + d] = acc;
  }
}

struct HcPostArgs {
  const float* x_hc;  // [n_tokens, n_hc, n_embd]
  const float* f;     // [n_tokens, n_embd]
  const float* post;  // [n_tokens, n_hc]
  const float* comb;  // [n_tokens, n_hc·n_hc]
  float* out;         // [n_tokens, n_hc, n_embd]
  int n_tokens;
  int n_hc;
  int n_embd;
};
__global__ void HcPostKernel(HcPostArgs a) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t per_token = int64_t(a.n_hc) * a.n_embd;
  if (i >= per_token * a.n_tokens) return;
  const int64_t t = i / per_token;
  const int k = int((i % per_token) / a.n_embd);
  const int d = int(i % a.n_embd);
  const int n = a.n_hc;
  const float* x = a.x_hc + t * per_token;
  const float* c = a.comb + t * n * n;
  float acc = __fmul_rn(a.f[t * a.n_embd + d], a.post[t * n + k]);
  for (int j = 0; j < n; ++j)
    acc = __fadd_rn(acc, __fmul_rn(c[j * n + k], x[int64_t(j) * a.n_embd + d]));
  a.out[i] = acc;
}

}  // namespace
}  // namespace cuda

namespace {

// flat = RMS_1(x_hc), mix = fn · flat (fp32 activations), into backend scratch.
float* HcProject(CudaBackend::State& s, const float* x_hc, int n_tokens, const Weight& fn,
                 const HcParams& p) {
  const int hc_dim = p.n_hc * p.n_embd;
  const int rows = int(fn.ne[1]);
  auto* flat = static_cast<float*>(
      s.Scratch(CudaScratch::kHcFlat, sizeof(float) * size_t(n_tokens) * hc_dim));
  auto* mix =
      static_cast<float*>(s.Scratch(CudaScratch::kHcMix, sizeof(float) * size_t(n_tokens) * rows));
  if (flat == nullptr || mix == nullptr) return nullptr;
  s.Launch(cuda::HcNormKernel, dim3(n_tokens), dim3(1024), 0,
           cuda::HcNormArgs{x_hc, flat, hc_dim, p.norm_eps});
  cuda::MatVecArgs a;
  a.w = fn.data.get();
  a.row_bytes = fn.row_bytes;
  a.rows = rows;
  a.n = hc_dim;
  a.x = reinterpret_cast<const uint8_t*>(flat);
  a.x_row_bytes = sizeof(float) * uint64_t(hc_dim);
  a.n_tokens = n_tokens;
  a.y = mix;
  a.y_row_floats = uint64_t(rows);
  a.iq2_grid = s.iq2_grid;
  if (!cuda::LaunchMatVec(s, fn.type, false, a)) {
    s.Fail("hyper-connections: no CUDA kernel for " + fn.name);
    return nullptr;
  }
  return mix;
}

}  // namespace

void CudaBackend::HcPre(DevPtr<const float> x_hc, int n_tokens, const Weight& fn,
                        const Weight& scale, const Weight& base, const HcParams& p, DevPtr<float> u,
                        DevPtr<float> post, DevPtr<float> comb) {
  if (n_tokens <= 0) return;
  if (p.n_hc > cuda::kMaxHc) return s_->Fail("hyper-connections: more than 8 streams");
  const float* mix = HcProject(*s_, x_hc.get(), n_tokens, fn, p);
  if (mix == nullptr) return;
  s_->Launch(cuda::HcSplitKernel, dim3(n_tokens), dim3(256), 0,
             cuda::HcSplitArgs{x_hc.get(), mix, reinterpret_cast<const float*>(scale.data.get()),
                               reinterpret_cast<const float*>(base.data.get()), u.get(), post.get(),
                               comb.get(), p.n_hc, p.n_embd, p.sinkhorn_iters, p.hc_eps, false});
}

void CudaBackend::HcPost(DevPtr<const float> x_hc, DevPtr<const float> f, DevPtr<const float> post,
                         DevPtr<const float> comb, int n_tokens, const HcParams& p,
                         DevPtr<float> out) {
  const int64_t total = int64_t(n_tokens) * p.n_hc * p.n_embd;
  if (total <= 0) return;
  s_->Launch(cuda::HcPostKernel, dim3(cuda::CeilDiv(total, 256)), dim3(256), 0,
             cuda::HcPostArgs{x_hc.get(), f.get(), post.get(), comb.get(), out.get(), n_tokens,
                              p.n_hc, p.n_embd});
}

void CudaBackend::HcHead(DevPtr<const float> x_hc, int n_tokens, const Weight& fn,
                         const Weight& scale, const Weight& base, const HcParams& p,
                         DevPtr<float> y) {
  if (n_tokens <= 0) return;
  if (p.n_hc > cuda::kMaxHc) return s_->Fail("hyper-connections: more than 8 streams");
  const float* mix = HcProject(*s_, x_hc.get(), n_tokens, fn, p);
  if (mix == nullptr) return;
  s_->Launch(cuda::HcSplitKernel, dim3(n_tokens), dim3(256), 0,
             cuda::HcSplitArgs{x_hc.get(), mix, reinterpret_cast<const float*>(scale.data.get()),
                               reinterpret_cast<const float*>(base.data.get()), y.get(), nullptr,
                               nullptr, p.n_hc, p.n_embd, 0, p.hc_eps, true});
}

}  // namespace flashkv
