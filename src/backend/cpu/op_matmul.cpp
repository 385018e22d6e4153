// MatMul and MatMulGrouped: weight products through tensor/'s kernels. ActQuantMode::kQ8
// quantizes each token's input once with the block type the weight's dot product expects
// (ds4's CPU numerics); kOff feeds fp32 activations. Each output element is one dot
// product, so batching tokens never changes a value.
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_parallel.h"
#include "tensor/dot.h"
#include "tensor/matmul.h"
#include "tensor/quant.h"

namespace flashkv {

void CpuBackend::MatMul(const Weight& w, DevPtr<const float> x, int n_tokens, DevPtr<float> y,
                        ActQuantMode aq) {
  const int64_t n = static_cast<int64_t>(w.ne[0]);
  const int64_t rows = static_cast<int64_t>(w.ne[1]);
  if (aq == ActQuantMode::kOff) {
    MatMulF32(w.type, w.data.get(), rows, n, x.get(), n_tokens, y.get(), pool_);
    return;
  }
  const ActQuant q = ActQuantFor(w.type);
  if (q == ActQuant::kNone) {
    MatMulQ8Prequantized(w.type, w.data.get(), rows, n, x.get(), n_tokens, y.get(), pool_);
    return;
  }
  const int64_t row_q = ActQuantBytes(q, n);
  uint8_t* xq = Grow(act_q_, size_t(row_q) * n_tokens);
  const float* xs = x.get();
  Parallel(n_tokens, 1, [&](size_t t0, size_t t1, int) {
    for (size_t t = t0; t < t1; ++t) QuantizeAct(q, xs + t * n, xq + t * row_q, n);
  });
  MatMulQ8Prequantized(w.type, w.data.get(), rows, n, xq, n_tokens, y.get(), pool_);
}

void CpuBackend::MatMulGrouped(const Weight& w, DevPtr<const float> x, int n_tokens, int n_groups,
                               DevPtr<float> y, ActQuantMode aq) {
  const int64_t in_g = static_cast<int64_t>(w.ne[0]);
  const int64_t rows_g = static_cast<int64_t>(w.ne[1]) / n_groups;
  const int64_t out_w = rows_g * n_groups;
  const float* xs = x.get();
  float* ys = y.get();
  const uint8_t* wd = w.data.get();
  const ActQuant q = aq == ActQuantMode::kQ8 ? ActQuantFor(w.type) : ActQuant::kNone;
  const bool quantized = q != ActQuant::kNone;
  const int64_t slice_q = quantized ? ActQuantBytes(q, in_g) : 0;
  uint8_t* xq = quantized ? Grow(act_q_, size_t(slice_q) * n_tokens * n_groups) : nullptr;
  if (quantized) {
    Parallel(size_t(n_tokens) * n_groups, 1, [&](size_t s0, size_t s1, int) {
      for (size_t s = s0; s < s1; ++s) QuantizeAct(q, xs + s * in_g, xq + s * slice_q, in_g);
    });
  }
  // One task per output element: (token, group, row).
  const size_t total = size_t(n_tokens) * out_w;
  Parallel(total, 64, [&](size_t i0, size_t i1, int) {
    for (size_t i = i0; i < i1; ++i) {
      const size_t t = i / out_w;
      const int64_t o = int64_t(i % out_w);
      const int64_t g = o / rows_g;
      const uint8_t* wrow = wd + uint64_t(o) * w.row_bytes;
      const size_t slice = t * n_groups + g;
      if (quantized) {
        ys[i] = DotQ8(w.type, wrow, xq + slice * slice_q, in_g);
      } else if (aq == ActQuantMode::kQ8) {
        ys[i] = DotQ8(w.type, wrow, xs + slice * in_g, in_g);
      } else {
        ys[i] = DotF32(w.type, wrow, xs + slice * in_g, in_g);
      }
    }
  });
}

}  // namespace flashkv
