// Single-row dot products of a weight row (any computable dtype, GGUF block layout) with an
// activation vector. Must not: know layer structure or own threads (matmul.h adds rows and
// threads on top).
//
// Two numerics, chosen by the caller:
// - DotF32: f32 activations; weights dequantized exactly as DequantizeRow does, products summed
//   in fp32 lanes over at most 256 values and those partial sums in double. The result is
//   within ~1e-6 of sum |w x| of the double-precision dot of the dequantized weights (tested).
//   Use for fp32 fidelity (HF parity, ds4's "noactq" tier).
// - DotQ8: ds4's CPU numerics, bit for bit. Activations are pre-quantized with the block type
//   ActQuantFor(wtype) names (QuantizeAct below) and the sum follows ds4.c's scalar x86 kernels:
//     Q8_0    x Q8_0Act: acc += (f16(d_w) * d_x) * (float)sum_i8  per 32, in block order, fp32.
//     Q2_K    x Q8_K:    per 256: acc += d_x*f16(d) * isum - d_x*f16(dmin) * summs, fp32.
//     IQ2_XXS x Q8_K:    per 256: acc += f16(d)*d_x * bsum; result 0.125 * acc.
//     Q4_K    x Q8_K:    GGML's ggml_vec_dot_q4_K_q8_K_generic order (8 fp32 lane sums of
//                        d * int lanes, the mins subtracted per block); ds4's CPU has no Q4_K.
//     Q3_K, Q5_K, Q6_K x Q8_K: GGML's generic kernels of the same 8-lane shape (Q5_K subtracts
//                        its mins like Q4_K); ds4 has none of them.
//     MXFP4   x Q8_0Act: acc += (2^(e-128) * d_x) * (float)sum(doubled_e2m1 * q8) per 32, in
//                        block order, fp32: GGML's ggml_vec_dot_mxfp4_q8_0 with ds4's fp32
//                        activation scale (ds4 has no MXFP4 kernel; see docs/GGUF.md).
//   F32, F16 and BF16 weights take plain f32 activations (ActQuant::kNone; xq is a float*),
//   because ds4 never quantizes activations for them: F16/BF16 sum fp32 products sequentially
//   (acc += f32(w[i]) * x[i]), F32 sums in double sequentially, as ds4's matvec_f16/_f32 do.
//   The unit tests hold the kernels to ref::DotQ8 (dot_ref.h) bit for bit; the reference was
//   also compared once with ds4.c's own kernels built from source (not part of the tests).
// Both are deterministic: the same inputs give the same bits on every call and thread count.
// A type that is not computable gives NaN (callers check dtype.h `computable` at load time).
// Activation blocks built by hand must keep their int8 values in [-127, 127], as QuantizeAct
// does: the AVX2 kernels negate them with the sign trick.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace flashkv {

enum class ActQuant {
  kNone,  // f32 activations, [n] floats
  kQ8_0,  // BlockQ8_0Act [ceil(n/32)]
  kQ8_K,  // BlockQ8_K [n/256]
};

// Which activation blocks DotQ8 expects for weights of this type.
ActQuant ActQuantFor(DType wtype);
// Bytes QuantizeAct writes for n activations.
int64_t ActQuantBytes(ActQuant q, int64_t n);
// x [n] -> out (ActQuantBytes(q, n) bytes): QuantizeActQ8_0 / QuantizeActQ8_K, or a copy of x
// for kNone.
void QuantizeAct(ActQuant q, const float* x, void* out, int64_t n);

// wrow: one row of n values of wtype; x [n] f32.
float DotF32(DType wtype, const void* wrow, const float* x, int64_t n);
// wrow: one row of n values of wtype; xq: x [n] quantized as ActQuantFor(wtype).
float DotQ8(DType wtype, const void* wrow, const void* xq, int64_t n);

}  // namespace flashkv
