// HcPre, HcPost, HcHead: manifold-constrained hyper-connections (docs/DS4_MODEL.md §3), with ds4's
// float order (normalise the flattened streams, then project; Sinkhorn with reciprocal
// multiplies; stream sums in stream order).
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_math.h"
#include "backend/cpu/cpu_parallel.h"
#include "tensor/dot.h"
#include "tensor/matmul.h"

namespace flashkv {
namespace {

// mix [(2+n)·n] → pre [n], post [n], comb [n·n] (row j = source stream, column k =
// destination), in place into `out` with the same layout as mix.
void SplitSinkhorn(const float* mix, const float* scale, const float* base, int n, int iters,
                   float eps, float* out) {
  for (int i = 0; i < n; ++i) {
    const float z = mix[i] * scale[0] + base[i];
    out[i] = 1.0f / (1.0f + std::exp(-z)) + eps;
  }
  for (int i = 0; i < n; ++i) {
    const float z = mix[n + i] * scale[1] + base[n + i];
    out[n + i] = 2.0f / (1.0f + std::exp(-z));
  }
  float* c = out + 2 * n;  // c[j·n + k]
  for (int j = 0; j < n; ++j) {
    float row_max = -std::numeric_limits<float>::infinity();
    for (int k = 0; k < n; ++k) {
      const float v = mix[2 * n + j * n + k] * scale[2] + base[2 * n + j * n + k];
      c[j * n + k] = v;
      if (v > row_max) row_max = v;
    }
    float row_sum = 0.0f;
    for (int k = 0; k < n; ++k) {
      const float v = std::exp(c[j * n + k] - row_max);
      c[j * n + k] = v;
      row_sum += v;
    }
    const float inv = 1.0f / row_sum;
    for (int k = 0; k < n; ++k) c[j * n + k] = c[j * n + k] * inv + eps;
  }
  auto normalize_columns = [&] {
    for (int k = 0; k < n; ++k) {
      float sum = 0.0f;
      for (int j = 0; j < n; ++j) sum += c[j * n + k];
      const float inv = 1.0f / (sum + eps);
      for (int j = 0; j < n; ++j) c[j * n + k] *= inv;
    }
  };
  auto normalize_rows = [&] {
    for (int j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int k = 0; k < n; ++k) sum += c[j * n + k];
      const float inv = 1.0f / (sum + eps);
      for (int k = 0; k < n; ++k) c[j * n + k] *= inv;
    }
  };
  normalize_columns();
  for (int it = 1; it < iters; ++it) {
    normalize_rows();
    normalize_columns();
  }
}

// out[d] = Σ_j x[j·n_embd + d] · w[j].
void WeightedStreamSum(const float* x, const float* w, int n_hc, int n_embd, float* out) {
  for (int d = 0; d < n_embd; ++d) {
    float acc = 0.0f;
    for (int j = 0; j < n_hc; ++j) acc += x[size_t(j) * n_embd + d] * w[j];
    out[d] = acc;
  }
}

}  // namespace

// Shared first half of HcPre and HcHead: flat = RMS_1(x_hc) per token, then
// mix[t, r] = fn_r · flat_t.
void CpuBackend::HcProject(const float* x, int n_tokens, int hc_dim, float eps, const Weight& fn,
                           float* flat, float* mix) {
  Parallel(size_t(n_tokens), 1, [&](size_t t0, size_t t1, int) {
    for (size_t t = t0; t < t1; ++t) {
      const float* xr = x + t * hc_dim;
      float* fr = flat + t * hc_dim;
      double ss = 0.0;
      for (int i = 0; i < hc_dim; ++i) ss += double(xr[i]) * xr[i];
      const float scale = 1.0f / std::sqrt(float(ss / double(hc_dim)) + eps);
      for (int i = 0; i < hc_dim; ++i) fr[i] = xr[i] * scale;
    }
  });
  // F16/F32 weights (ds4's files) take fp32 activations in DotQ8's numerics: ds4's sequential
  // sums. A block type (llama.cpp's presets quantize hc_*_fn with their default type) takes
  // fp32 activations too, as the CUDA HcProject does in both act-quant modes: DotQ8 would
  // read the floats as quantized activation blocks.
  if (ActQuantFor(fn.type) == ActQuant::kNone) {
    MatMulQ8Prequantized(fn.type, fn.data.get(), int64_t(fn.ne[1]), hc_dim, flat, n_tokens, mix,
                         pool_);
  } else {
    MatMulF32(fn.type, fn.data.get(), int64_t(fn.ne[1]), hc_dim, flat, n_tokens, mix, pool_);
  }
}

void CpuBackend::HcPre(DevPtr<const float> x_hc, int n_tokens, const Weight& fn,
                       const Weight& scale, const Weight& base, const HcParams& p, DevPtr<float> u,
                       DevPtr<float> post, DevPtr<float> comb) {
  const int hc_dim = p.n_hc * p.n_embd;
  const int mix_dim = (2 + p.n_hc) * p.n_hc;
  float* flat = reinterpret_cast<float*>(Grow(hc_flat_, sizeof(float) * n_tokens * hc_dim));
  float* mix = reinterpret_cast<float*>(Grow(hc_mix_, sizeof(float) * n_tokens * mix_dim * 2));
  float* split = mix + size_t(n_tokens) * mix_dim;
  HcProject(x_hc.get(), n_tokens, hc_dim, p.norm_eps, fn, flat, mix);
  const float* sc = reinterpret_cast<const float*>(scale.data.get());
  const float* bs = reinterpret_cast<const float*>(base.data.get());
  Parallel(n_tokens, 1, [&](size_t t0, size_t t1, int) {
    for (size_t t = t0; t < t1; ++t) {
      float* s = split + t * mix_dim;
      SplitSinkhorn(mix + t * mix_dim, sc, bs, p.n_hc, p.sinkhorn_iters, p.hc_eps, s);
      WeightedStreamSum(x_hc.get() + t * hc_dim, s, p.n_hc, p.n_embd, u.get() + t * p.n_embd);
      std::memcpy(post.get() + t * p.n_hc, s + p.n_hc, sizeof(float) * p.n_hc);
      std::memcpy(comb.get() + t * p.n_hc * p.n_hc, s + 2 * p.n_hc,
                  sizeof(float) * p.n_hc * p.n_hc);
    }
  });
}

void CpuBackend::HcPost(DevPtr<const float> x_hc, DevPtr<const float> f, DevPtr<const float> post,
                        DevPtr<const float> comb, int n_tokens, const HcParams& p,
                        DevPtr<float> out) {
  const int n = p.n_hc;
  const int D = p.n_embd;
  Parallel(size_t(n_tokens) * n, 1, [&](size_t i0, size_t i1, int) {
    for (size_t i = i0; i < i1; ++i) {
      const size_t t = i / n;
      const int k = int(i % n);
      const float* x = x_hc.get() + t * n * D;
      const float* fr = f.get() + t * D;
      const float pk = post.get()[t * n + k];
      const float* c = comb.get() + t * n * n;
      float* o = out.get() + t * n * D + size_t(k) * D;
      for (int d = 0; d < D; ++d) {
        float acc = fr[d] * pk;
        for (int j = 0; j < n; ++j) acc += c[j * n + k] * x[size_t(j) * D + d];
        o[d] = acc;
      }
    }
  });
}

void CpuBackend::HcHead(DevPtr<const float> x_hc, int n_tokens, const Weight& fn,
                        const Weight& scale, const Weight& base, const HcParams& p,
                        DevPtr<float> y) {
  const int hc_dim = p.n_hc * p.n_embd;
  float* flat = reinterpret_cast<float*>(Grow(hc_flat_, sizeof(float) * n_tokens * hc_dim));
  float* mix = reinterpret_cast<float*>(Grow(hc_mix_, sizeof(float) * n_tokens * p.n_hc * 2));
  float* w = mix + size_t(n_tokens) * p.n_hc;
  HcProject(x_hc.get(), n_tokens, hc_dim, p.norm_eps, fn, flat, mix);
  const float sc = reinterpret_cast<const float*>(scale.data.get())[0];
  const float* bs = reinterpret_cast<const float*>(base.data.get());
  Parallel(n_tokens, 1, [&](size_t t0, size_t t1, int) {
    for (size_t t = t0; t < t1; ++t) {
      float* wt = w + t * p.n_hc;
      for (int j = 0; j < p.n_hc; ++j) {
        wt[j] = cpu::SigmoidStable(mix[t * p.n_hc + j] * sc + bs[j]) + p.hc_eps;
      }
      WeightedStreamSum(x_hc.get() + t * hc_dim, wt, p.n_hc, p.n_embd, y.get() + t * p.n_embd);
    }
  });
}

}  // namespace flashkv
