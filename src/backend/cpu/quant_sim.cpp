#include "backend/cpu/quant_sim.h"

#include <cmath>

namespace flashkv::cpu {
namespace {

// Rounds |v| to a grid whose spacing is `step` (a power of two), ties to even multiples.
// With the default rounding mode std::nearbyint rounds half to even.
inline float RoundToStep(float av, float step) {
  return std::nearbyint(av / step) * step;
}

}  // namespace

float RoundE4M3(float v) {
  const float sign = v < 0.0f ? -1.0f : 1.0f;
  float av = std::fabs(v);
  if (av >= 448.0f) return sign * 448.0f;
  // Subnormals below 2^-6 are multiples of 2^-9; each binade [2^e, 2^(e+1)) holds 8
  // mantissa steps of 2^(e-3). The mantissa parity equals the multiple's parity, so
  // half-to-even on the multiple is ties-to-even on the mantissa.
  float step = 0.001953125f;  // 2^-9
  if (av >= 0.015625f) {
    int e = 0;
    std::frexp(av, &e);  // av = f · 2^e, f in [0.5, 1)
    step = std::ldexp(1.0f, e - 1 - 3);
  }
  av = RoundToStep(av, step);
  if (av > 448.0f) av = 448.0f;
  return sign * av;
}

float RoundE2M1(float v) {
  const float sign = v < 0.0f ? -1.0f : 1.0f;
  float av = std::fabs(v);
  if (av >= 6.0f) return sign * 6.0f;
  // Values 0, 0.5, 1, 1.5 (step 0.5), 2, 3 (step 1), 4, 6 (step 2).
  float step = 0.5f;
  if (av >= 4.0f) {
    step = 2.0f;
  } else if (av >= 2.0f) {
    step = 1.0f;
  }
  av = RoundToStep(av, step);
  if (av > 6.0f) av = 6.0f;
  return sign * av;
}

void Fp8RoundTripBlocks(float* x, int64_t n) {
  for (int64_t off = 0; off < n; off += 64) {
    float amax = 0.0f;
    for (int i = 0; i < 64; ++i) amax = std::fmax(amax, std::fabs(x[off + i]));
    if (amax < 1.0e-4f) amax = 1.0e-4f;
    const float scale = std::ldexp(1.0f, int(std::ceil(std::log2(amax / 448.0f))));
    for (int i = 0; i < 64; ++i) {
      float v = x[off + i] / scale;
      if (v > 448.0f) v = 448.0f;
      if (v < -448.0f) v = -448.0f;
      x[off + i] = RoundE4M3(v) * scale;
    }
  }
}

void Fp4RoundTripBlocks(float* x, int64_t n) {
  for (int64_t off = 0; off < n; off += 32) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[off + i]));
    if (amax < 7.052966104933725e-38f) amax = 7.052966104933725e-38f;  // 6 · 2^-126
    const float scale = std::ldexp(1.0f, int(std::ceil(std::log2(amax / 6.0f))));
    for (int i = 0; i < 32; ++i) {
      float v = x[off + i] / scale;
      if (v > 6.0f) v = 6.0f;
      if (v < -6.0f) v = -6.0f;
      x[off + i] = RoundE2M1(v) * scale;
    }
  }
}

void HadamardScaled(float* x, int64_t n) {
  for (int64_t stride = 1; stride < n; stride <<= 1) {
    for (int64_t base = 0; base < n; base += 2 * stride) {
      for (int64_t i = 0; i < stride; ++i) {
        const float a = x[base + i];
        const float b = x[base + stride + i];
        x[base + i] = a + b;
        x[base + stride + i] = a - b;
      }
    }
  }
  const float s = float(1.0 / std::sqrt(double(n)));
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace flashkv::cpu
