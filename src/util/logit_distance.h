// How far apart two results are — logit rows as distributions, any values as a normalized
// error: the numerics benchmarks and tests that compare a fast float path with the exact one
// (bench/cuda/fast_spread.cpp, bench/cuda/flash_bench.cpp, tests/backend/cuda/cuda_fast_test.cpp)
// measure it the same way.
#pragma once

#include <cstddef>

namespace flashkv {

// KL(softmax(p_logits) ‖ softmax(q_logits)) over n entries, in double (≥ 0).
double SoftmaxKl(const float* p_logits, const float* q_logits, int n);

// Σ (got − ref)² / Σ ref² over n values, in double (Σ (got − ref)² where ref is all zero).
double Nmse(const float* ref, const float* got, size_t n);

}  // namespace flashkv
