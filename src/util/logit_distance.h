// How far apart two logit rows are as distributions: the numerics benchmarks and tests that
// compare a fast float path with the exact one (bench/cuda/fast_spread.cpp,
// tests/backend/cuda/cuda_fast_test.cpp) measure it the same way.
#pragma once

namespace flashkv {

// KL(softmax(p_logits) ‖ softmax(q_logits)) over n entries, in double (≥ 0).
double SoftmaxKl(const float* p_logits, const float* q_logits, int n);

}  // namespace flashkv
