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

// out[r] = Σ_i q[i]·rows[r][i], each summed sequentially in i (ds4's dot_f32 order on x86),
// four rows at a time so the independent chains overlap in the pipeline.
inline void DotsSequential(const float* q, const float* const* rows, int n_rows, int64_t n,
                           float* out) {
  int r = 0;
  for (; r + 4 <= n_rows; r += 4) {
    const float* r0 = rows[r];
    const float* r1 = rows[r + 1];
    const float* r2 = rows[r + 2];
    const float* r3 = rows[r + 3];
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      a0 += q[i] * r0[i];
      a1 += q[i] * r1[i];
      a2 += q[i] * r2[i];
      a3 += q[i] * r3[i];
    }
    out[r] = a0;
    out[r + 1] = a1;
    out[r + 2] = a2;
    out[r + 3] = a3;
  }
  for (; r < n_rows; ++r) {
    float acc = 0.0f;
    for (int64_t i = 0; i < n; ++i) acc += q[i] * rows[r][i];
    out[r] = acc;
  }
}

// y[i] += a · x[i].
inline void Axpy(float* y, const float* x, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace flashkv::cpu
