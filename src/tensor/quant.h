// Row-level conversion between f32 and every computable dtype: dequantize (all of F32, F16,
// BF16, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ2_XXS, MXFP4, in GGML's dequantize_row_*
// arithmetic), quantize weights (F32, F16, BF16, Q8_0, Q2_K, Q4_K), and
// quantize activations into the int8 blocks the Q8 dot products take.
// Must not: know layer structure or own threads.
//
// Weight quantizers follow GGML's reference quantizers (Q8_0: amax/127 with ties away from
// zero; Q2_K/Q4_K: per-group weighted min/scale search, then 4/6-bit scales and a final
// requantization against the stored scales), so files we write read like llama.cpp's.
// Activation quantizers follow antirez ds4's CPU path exactly (ds4.c
// quantize_q8_0_activation, ds4_quantize_row_q8_K), because ds4's logits are the reference.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"
#include "util/status.h"

namespace flashkv {

// src: one row of `type` holding n values (n a whole number of blocks) -> dst [n] f32.
Status DequantizeRow(DType type, const void* src, float* dst, int64_t n);

// src [n] f32 -> dst: one row of `type`, RowBytes(type, n) bytes. Unsupported for IQ2_XXS
// (its codebook search is not implemented) and for types that are not computable.
Status QuantizeRow(DType type, const float* src, void* dst, int64_t n);
bool CanQuantize(DType type);

// Activations x [n] -> out [ceil(n/32)] blocks, ds4's Q8_0 activation quantizer: per 32 values
// d = amax / 127 (fp32, never rounded to f16), q = lrintf(x * (1/d)) (round half to even),
// clamped to [-128, 127]; an all-zero block has d = 0. A partial last block is zero-padded.
void QuantizeActQ8_0(const float* x, BlockQ8_0Act* out, int64_t n);

// Activations x [n] (n % 256 == 0) -> out [n/256] blocks, ds4's / GGML's Q8_K quantizer: per
// 256 values take the signed element m with the largest |x| (the first one on ties),
// iscale = -127 / m, q = lrintf(iscale * x) clamped to [-128, 127], d = 1 / iscale,
// bsums[k] = sum of q[16k .. 16k+15]. An all-zero block has d = 0 and q = 0.
void QuantizeActQ8_K(const float* x, BlockQ8_K* out, int64_t n);

}  // namespace flashkv
