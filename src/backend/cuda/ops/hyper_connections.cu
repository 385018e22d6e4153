// HcPre, HcPost, HcHead (docs/DS4_MODEL.md §3), following src/backend/cpu/op_hyper_connections.cpp:
// normalise the flattened streams (sum of squares in double), project them with the HC
// weight through the shared matvec kernel, then per token the Sinkhorn split (one thread,
// ds4's reciprocal-multiply order) and the stream sums in stream order.
#include <cmath>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device/common.cuh"
#include "backend/cuda/device/hc.cuh"
#include "backend/cuda/products/launch.h"

namespace flashkv {
namespace cuda {
namespace {

struct HcNormArgs {
  const float* x;  // [n_tokens, hc_dim]
  float* flat;     // [n_tokens, hc_dim]
  int hc_dim;
  float eps;
};
// kHcNormThreads threads per token (device/hc.cuh: the fused kernels reproduce this tree).
__global__ void HcNormKernel(HcNormArgs a) {
  __shared__ double scratch[32];
  const float* xr = a.x + size_t(blockIdx.x) * a.hc_dim;
  float* fr = a.flat + size_t(blockIdx.x) * a.hc_dim;
  double ss = 0.0;
#pragma unroll 8
  for (int i = threadIdx.x; i < a.hc_dim; i += blockDim.x) ss = __fma_rn(double(xr[i]), xr[i], ss);
  ss = BlockSumD(ss, scratch);
  const float scale = RmsScale(ss, a.hc_dim, a.eps);
#pragma unroll 8
  for (int i = threadIdx.x; i < a.hc_dim; i += blockDim.x) fr[i] = __fmul_rn(xr[i], scale);
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
    a.u[t * a.n_embd + d] = HcStreamSum(x, split, n, a.n_embd, d);
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
  a.out[i] = HcPostValue(a.x_hc + t * per_token, a.f[t * a.n_embd + d], a.post + t * n,
                         a.comb + t * n * n, n, a.n_embd, k, d);
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
  s.Launch(cuda::HcNormKernel, dim3(n_tokens), dim3(cuda::kHcNormThreads), 0,
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
  a.weight_bytes = fn.matrix_bytes();
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
