// Scalar helpers shared by the CPU ops, written to ds4's float formulas where ds4's
// logits are the reference (sigmoid, softplus, silu). Must not: be included outside
// backend/cpu/.
#pragma once

#include <cmath>
#include <cstdint>

namespace flashkv::cpu {

// σ(x) without overflow for large |x| (ds4 sigmoid_stable).
inline float SigmoidStable(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.0f + e);
}

inline float Silu(float x) {
  return x * SigmoidStable(x);
}

// log(1 + e^x) as PyTorch/ds4 compute it: x past 20, e^x below −20.
inline float SoftplusStable(float x) {
  if (x > 20.0f) return x;
  if (x < -20.0f) return std::exp(x);
  return std::log1p(std::exp(x));
}

// Σ a[i]·b[i] in eight fp32 lanes, lanes summed pairwise at the end, tail sequential.
// The order depends only on n, so every caller (batch or single token) gets the same bits.
inline float DotLanes(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  }
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y[i] += a · x[i].
inline void Axpy(float* y, const float* x, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace flashkv::cpu
