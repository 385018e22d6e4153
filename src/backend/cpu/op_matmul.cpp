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
  const ActQuant q = aq == ActQuantMode::kQ8 ? ActQuantFor(w.type) : ActQuant::kNone;
  const size_t slice = size_t(ActQuantBytes(q, in_g));  // one token's group input
  uint8_t* gathered = Grow(act_q_, slice * n_tokens);
  float* part = reinterpret_cast<float*>(Grow(grouped_out_, sizeof(float) * n_tokens * rows_g));
  // Group by group: gather (and quantize) every token's slice, run the group's row block
  // over all tokens at once, scatter the outputs. Each output is still one dot product.
  for (int g = 0; g < n_groups; ++g) {
    Parallel(size_t(n_tokens), 4, [&](size_t t0, size_t t1, int) {
      for (size_t t = t0; t < t1; ++t) {
        QuantizeAct(q, xs + (t * n_groups + g) * in_g, gathered + t * slice, in_g);
      }
    });
    const uint8_t* wg = w.data.get() + uint64_t(g) * rows_g * w.row_bytes;
    if (aq == ActQuantMode::kQ8) {
      MatMulQ8Prequantized(w.type, wg, rows_g, in_g, gathered, n_tokens, part, pool_);
    } else {
      MatMulF32(w.type, wg, rows_g, in_g, reinterpret_cast<const float*>(gathered), n_tokens, part,
                pool_);
    }
    for (int t = 0; t < n_tokens; ++t) {
      std::memcpy(ys + size_t(t) * out_w + g * rows_g, part + size_t(t) * rows_g,
                  sizeof(float) * rows_g);
    }
  }
}

}  // namespace flashkv
