// Scalar simulations of the official model's low-precision steps (docs/DS4_MODEL.md §9 #1, #2, #5):
// FP8 E4M3 and FP4 E2M1 round trips with power-of-two block scales, and the Walsh–Hadamard
// rotation the indexer applies before FP4. Used by the CPU ops and unit-tested on their own.
// Must not: know which rows of the model they are applied to (the model decides).
#pragma once

#include <cstdint>

namespace flashkv::cpu {

// Nearest E4M3FN value to v (|v| saturated at 448), ties to even mantissa.
float RoundE4M3(float v);
// Nearest E2M1 value to v (|v| saturated at 6), ties to even mantissa.
float RoundE2M1(float v);

// x[0:n] (n % 64 == 0): per 64 values, scale = 2^ceil(log2(max(amax, 1e-4) / 448)),
// x = RoundE4M3(x / scale) · scale.
void Fp8RoundTripBlocks(float* x, int64_t n);
// x[0:n] (n % 32 == 0): per 32 values, scale = 2^ceil(log2(max(amax, 6·2^-126) / 6)),
// x = RoundE2M1(x / scale) · scale.
void Fp4RoundTripBlocks(float* x, int64_t n);
// In-place unnormalised fast Walsh–Hadamard transform of x[0:n] (n a power of two), then
// every value times 1/sqrt(n).
void HadamardScaled(float* x, int64_t n);

}  // namespace flashkv::cpu
