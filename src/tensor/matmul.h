// Multi-row products Y = X W^T over a ThreadPool: the CPU matvec/matmul every projection uses.
// Must not: know layer structure or own the pool (it is passed in).
//
// W is row-major: `rows` rows of `n` values of wtype, row stride RowBytes(wtype, n).
// X is [n_tokens, n] f32, Y is [n_tokens, rows] f32 (y[t * rows + r] = row r . token t).
// Rows are split across the pool; every output has exactly the bits of the single DotF32/DotQ8
// of its row and token (DotQ8 runs up to 4 tokens, or for F16/BF16 8 rows, per pass, with the
// same per-output arithmetic), so the result does not depend on the thread count. pool may be
// null (calling thread only). wtype must be computable and n a whole number of its blocks (checked
// at load time by the caller; see dtype.h RowBytes).
#pragma once

#include <cstdint>

#include "tensor/dtype.h"
#include "util/thread_pool.h"

namespace flashkv {

// Numerics of DotF32 (fp32 activations).
void MatMulF32(DType wtype, const void* w, int64_t rows, int64_t n, const float* x,
               int64_t n_tokens, float* y, ThreadPool* pool);

// Numerics of DotQ8 (ds4's CPU path): quantizes each token of X as ActQuantFor(wtype) once,
// into scratch allocated once per call, then runs the rows.
void MatMulQ8(DType wtype, const void* w, int64_t rows, int64_t n, const float* x, int64_t n_tokens,
              float* y, ThreadPool* pool);

// MatMulQ8 on activations already quantized with QuantizeAct(ActQuantFor(wtype), ...):
// xq holds n_tokens rows of ActQuantBytes(ActQuantFor(wtype), n) bytes. Lets one quantized
// activation feed several weight matrices (gate/up, experts), as ds4 does.
void MatMulQ8Prequantized(DType wtype, const void* w, int64_t rows, int64_t n, const void* xq,
                          int64_t n_tokens, float* y, ThreadPool* pool);

}  // namespace flashkv
