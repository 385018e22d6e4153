// RoPE constants in the GGML / ds4 parametrisation, shared by the model (which fills them
// from ModelConfig) and every backend's Rope op (docs/DS4_MODEL.md §4.2). Pair i of a head at
// position p turns by
//   θ_e = p · base^(−2i/n_rot)                 (extrapolated; built as p·s·s·… in float)
//   θ_i = scale · θ_e                          (interpolated, scale = 1/s)
//   θ   = θ_i · (1 − m_i) + θ_e · m_i,  m_i = ext_factor · (1 − clamp((i − lo)/max(0.001, hi −
//   lo)))
// and cos/sin are multiplied by `mscale`. This is ds4's rope_tail_ext_inplace; mscale is the
// float product by which ds4 cancels its YaRN helper's magnitude factor (≈ 1).
// Must not: know layers (the model picks the main or the compress parameters).
#pragma once

#include <cmath>
#include <cstdint>

namespace flashkv {

struct RopeParams {
  int n_rot = 0;         // rotated channels at the tail of each head (pairs = n_rot / 2)
  float freq_base = 0;   // θ
  float freq_scale = 1;  // 1/s (1: no interpolation)
  float ext_factor = 0;  // 1: YaRN ramp on, 0: off
  float corr_lo = 0;     // ramp start, in pairs
  float corr_hi = 0;     // ramp end, in pairs
  float mscale = 1;      // cos/sin multiplier
};

// The angle of pair `pair` at position `pos`, computed exactly as the CPU op does.
inline float RopeAngle(const RopeParams& p, int64_t pos, int pair) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / float(p.n_rot));
  float theta_extrap = float(pos);
  for (int i = 0; i < pair; ++i) theta_extrap *= theta_scale;
  const float theta_interp = p.freq_scale * theta_extrap;
  if (p.ext_factor == 0.0f) return theta_interp;
  const float y = (float(pair) - p.corr_lo) / std::fmax(0.001f, p.corr_hi - p.corr_lo);
  const float ramp_mix = (1.0f - std::fmin(1.0f, std::fmax(0.0f, y))) * p.ext_factor;
  return theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
}

}  // namespace flashkv
