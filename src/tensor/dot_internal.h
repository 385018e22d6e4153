// Multi-token entry point of the DotQ8 kernels, for matmul.cpp. Internal to tensor/.
// Must not: change numerics; every output equals the single-token DotQ8 bit for bit.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace flashkv::internal {

// Tokens one DotQ8Multi call handles. Several tokens share one pass over the weight row (the
// unpacking is done once) and their independent fp32 accumulation chains overlap.
inline constexpr int kMaxDotTokens = 4;

// out[t] = DotQ8(wtype, wrow, xq[t], n) for t < n_tok, 1 <= n_tok <= kMaxDotTokens.
void DotQ8Multi(DType wtype, const void* wrow, const void* const* xq, int n_tok, int64_t n,
                float* out);

// Whether DotQ8Rows8 handles wtype: the sequentially-summed types (F16, BF16) whose
// single-row fp32 chain is latency-bound.
bool HasDotQ8Rows8(DType wtype);
// out[r] = DotQ8(wtype, w + r * row_bytes, xq, n) for r < 8, bit for bit (requires
// HasDotQ8Rows8(wtype)).
void DotQ8Rows8(DType wtype, const void* w, int64_t row_bytes, const void* xq, int64_t n,
                float* out);

// DotQ8 of a type quant_lanes.h splits (lanes::HasLanes), computed as the GPU kernels do:
// 32 workers' integer terms per block, summed, then the block fold. The CPU twin of
// backend/cuda/products/kquant_matvec.cu; equals ref::DotQ8 bit for bit (dot_test). NaN for other
// types.
float DotQ8ByLanes(DType wtype, const void* wrow, const void* xq, int64_t n);
// The row's n values through lanes::DequantValues8 (the GPU's embedding path); false for a
// type it does not split.
bool DequantizeRowByLanes(DType wtype, const void* wrow, float* out, int64_t n);

}  // namespace flashkv::internal
