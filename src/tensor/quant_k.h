// Weight quantizers for the k-quants (Q2_K, Q4_K): the per-group min/scale search and the
// packing into GGUF blocks. Internal to tensor/ (reached through QuantizeRow).
// Must not: be used for activations (those use quant.h's ds4-exact quantizers).
//
// The search is GGML's reference one (llama.cpp quantize_row_q{2,4}_K_ref, no importance
// matrix): for each group fit value ~ scale * L - min with L in [0, nmax] by trying a fan of
// inverse scales and solving weighted least squares for (scale, min) at each, keep the best;
// then quantize the group scales/mins to 4 or 6 bits against a block-wide f16 d/dmin and
// re-round every value against the stored scales.
#pragma once

#include <cstdint>

namespace flashkv::internal {

void QuantizeBlockQ2_K(const float* x, uint8_t* block);  // x [256] -> 84 bytes
void QuantizeBlockQ4_K(const float* x, uint8_t* block);  // x [256] -> 144 bytes

}  // namespace flashkv::internal
