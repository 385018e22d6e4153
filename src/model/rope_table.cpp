#include "model/rope_table.h"

#include <algorithm>
#include <cmath>

namespace flashkv {

void YarnCorrectionDims(int n_rot, uint64_t orig_ctx, float base, float beta_fast, float beta_slow,
                        float* lo, float* hi) {
  const float pi = 3.14159265358979323846f;
  auto cd = [&](float beta) {
    return float(n_rot) * std::log(float(orig_ctx) / (beta * 2.0f * pi)) / (2.0f * std::log(base));
  };
  *lo = std::fmax(0.0f, std::floor(cd(beta_fast)));
  *hi = std::fmin(float(n_rot - 1), std::ceil(cd(beta_slow)));
}

RopeParams PlainRope(int n_rot, float base) {
  RopeParams p;
  p.n_rot = n_rot;
  p.freq_base = base;
  return p;
}

RopeParams YarnRope(int n_rot, float base, float factor, uint64_t orig_ctx, float beta_fast,
                    float beta_slow) {
  RopeParams p = PlainRope(n_rot, base);
  p.freq_scale = 1.0f / factor;
  p.ext_factor = 1.0f;
  YarnCorrectionDims(n_rot, orig_ctx, base, beta_fast, beta_slow, &p.corr_lo, &p.corr_hi);
  // No magnitude factor (docs/DS4_MODEL.md §4.2). ds4 passes the inverse of its helper's factor and
  // lets the helper multiply it back; the float product is kept so angles match ds4 bit for bit.
  const float magnitude = 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
  p.mscale = (1.0f / magnitude) * magnitude;
  return p;
}

RopeParams MainRope(const ModelConfig& c) {
  return PlainRope(c.n_rot, c.rope_freq_base);
}

RopeParams CompressRope(const ModelConfig& c) {
  if (c.rope_scaling_factor <= 1.0f) return PlainRope(c.n_rot, c.compress_rope_freq_base);
  return YarnRope(c.n_rot, c.compress_rope_freq_base, c.rope_scaling_factor, c.rope_orig_ctx,
                  c.yarn_beta_fast, c.yarn_beta_slow);
}

std::vector<float> RopeFrequencies(const RopeParams& p) {
  std::vector<float> f(p.n_rot / 2);
  for (int i = 0; i < p.n_rot / 2; ++i) f[i] = RopeAngle(p, 1, i);
  return f;
}

}  // namespace flashkv
