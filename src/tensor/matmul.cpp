#include "tensor/matmul.h"

#include <algorithm>
#include <vector>

#include "tensor/dot.h"
#include "tensor/dot_internal.h"

namespace flashkv {
namespace {

// Rows per ParallelFor part: enough weight bytes per part (~64 KiB) that waking a thread pays.
size_t RowGrain(int64_t row_bytes) {
  constexpr int64_t kBytesPerPart = 64 << 10;
  return static_cast<size_t>(std::max<int64_t>(1, kBytesPerPart / std::max<int64_t>(1, row_bytes)));
}

// Runs body(row_begin, row_end) over [0, rows) on the pool (or inline without one).
template <typename Body>
void ForRows(int64_t rows, int64_t row_bytes, ThreadPool* pool, const Body& body) {
  if (rows <= 0) return;
  if (!pool) {
    body(0, rows);
    return;
  }
  pool->ParallelFor(static_cast<size_t>(rows), RowGrain(row_bytes), [&](size_t b, size_t e, int) {
    body(static_cast<int64_t>(b), static_cast<int64_t>(e));
  });
}

int64_t RowBytesOrZero(DType type, int64_t n) {
  auto r = RowBytes(type, static_cast<uint64_t>(n));
  return r.ok() ? static_cast<int64_t>(*r) : 0;
}

}  // namespace

void MatMulF32(DType wtype, const void* w, int64_t rows, int64_t n, const float* x,
               int64_t n_tokens, float* y, ThreadPool* pool) {
  const int64_t row_bytes = RowBytesOrZero(wtype, n);
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  ForRows(rows, row_bytes, pool, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const void* row = wb + r * row_bytes;
      for (int64_t t = 0; t < n_tokens; ++t) y[t * rows + r] = DotF32(wtype, row, x + t * n, n);
    }
  });
}

void MatMulQ8Prequantized(DType wtype, const void* w, int64_t rows, int64_t n, const void* xq,
                          int64_t n_tokens, float* y, ThreadPool* pool) {
  const int64_t row_bytes = RowBytesOrZero(wtype, n);
  const int64_t act_bytes = ActQuantBytes(ActQuantFor(wtype), n);
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const uint8_t* xb = static_cast<const uint8_t*>(xq);
  constexpr int kGroup = internal::kMaxDotTokens;
  const bool rows8 = internal::HasDotQ8Rows8(wtype);
  ForRows(rows, row_bytes, pool, [&](int64_t r0, int64_t r1) {
    const void* xt[kGroup];
    float out[kGroup];
    int64_t r = r0;
    if (rows8) {  // sequentially-summed types: 8 rows at once per token
      float out8[8];
      for (; r + 8 <= r1; r += 8)
        for (int64_t t = 0; t < n_tokens; ++t) {
          internal::DotQ8Rows8(wtype, wb + r * row_bytes, row_bytes, xb + t * act_bytes, n, out8);
          for (int k = 0; k < 8; ++k) y[t * rows + r + k] = out8[k];
        }
    }
    for (; r < r1; ++r) {
      const void* row = wb + r * row_bytes;
      // Tokens in groups that share one pass over the row; same bits as one DotQ8 each.
      for (int64_t t0 = 0; t0 < n_tokens; t0 += kGroup) {
        const int nt = static_cast<int>(std::min<int64_t>(kGroup, n_tokens - t0));
        for (int k = 0; k < nt; ++k) xt[k] = xb + (t0 + k) * act_bytes;
        internal::DotQ8Multi(wtype, row, xt, nt, n, out);
        for (int k = 0; k < nt; ++k) y[(t0 + k) * rows + r] = out[k];
      }
    }
  });
}

void MatMulQ8(DType wtype, const void* w, int64_t rows, int64_t n, const float* x, int64_t n_tokens,
              float* y, ThreadPool* pool) {
  const ActQuant aq = ActQuantFor(wtype);
  if (aq == ActQuant::kNone) {  // ds4 feeds these weights f32 activations as they are
    MatMulQ8Prequantized(wtype, w, rows, n, x, n_tokens, y, pool);
    return;
  }
  const int64_t act_bytes = ActQuantBytes(aq, n);
  // float-aligned scratch: the activation blocks start with an fp32 scale.
  std::vector<float> scratch(static_cast<size_t>((act_bytes * n_tokens + 3) / 4));
  uint8_t* xq = reinterpret_cast<uint8_t*>(scratch.data());
  auto quantize = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) QuantizeAct(aq, x + t * n, xq + t * act_bytes, n);
  };
  if (pool && n_tokens > 1) {
    pool->ParallelFor(static_cast<size_t>(n_tokens), 1, [&](size_t b, size_t e, int) {
      quantize(static_cast<int64_t>(b), static_cast<int64_t>(e));
    });
  } else {
    quantize(0, n_tokens);
  }
  MatMulQ8Prequantized(wtype, w, rows, n, xq, n_tokens, y, pool);
}

}  // namespace flashkv
