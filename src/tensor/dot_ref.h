// Scalar reference versions of the dot.h kernels: plain loops that state the numerics, kept so
// the optimized kernels in dot.cpp can be tested against them. Must not: be used on hot paths.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace flashkv::ref {

// DotF32 reference: dequantized weights times x, summed sequentially in double. The optimized
// DotF32 agrees with it to ~1e-6 of sum |w x| (different summation order).
float DotF32(DType wtype, const void* wrow, const float* x, int64_t n);
// DotQ8 reference: ds4's scalar kernels. The optimized DotQ8 must agree bit for bit.
float DotQ8(DType wtype, const void* wrow, const void* xq, int64_t n);

}  // namespace flashkv::ref
