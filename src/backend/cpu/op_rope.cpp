// Rope: interleaved rotation of the trailing n_rot channels of each head (docs/DS4_MODEL.md §4.2),
// in ds4's float arithmetic (rope_params.h): per row the angles are built by repeated float
// multiplication from the position, mixed by the YaRN ramp, and cosf/sinf are scaled by
// mscale. Pairs share an angle across heads, so it is computed once per (row, pair).
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_parallel.h"

namespace flashkv {

namespace {

// One row's heads at position pos: the loop of Rope and RopeAt.
void RopeRow(float* row, int n_heads, int head_dim, const RopeParams& rope, bool inverse,
             int64_t pos) {
  const int n_nope = head_dim - rope.n_rot;
  const float theta_scale = std::pow(rope.freq_base, -2.0f / float(rope.n_rot));
  const float sin_sign = inverse ? -1.0f : 1.0f;
  const float ramp_span = std::fmax(0.001f, rope.corr_hi - rope.corr_lo);
  float theta_extrap = float(pos);
  for (int i = 0; i < rope.n_rot; i += 2) {
    const float theta_interp = rope.freq_scale * theta_extrap;
    float theta = theta_interp;
    if (rope.ext_factor != 0.0f) {
      const float y = (float(i / 2) - rope.corr_lo) / ramp_span;
      const float ramp_mix = (1.0f - std::fmin(1.0f, std::fmax(0.0f, y))) * rope.ext_factor;
      theta = theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
    }
    const float c = std::cos(theta) * rope.mscale;
    const float s = sin_sign * std::sin(theta) * rope.mscale;
    for (int h = 0; h < n_heads; ++h) {
      float* tail = row + size_t(h) * head_dim + n_nope;
      const float x0 = tail[i];
      const float x1 = tail[i + 1];
      tail[i] = x0 * c - x1 * s;
      tail[i + 1] = x0 * s + x1 * c;
    }
    theta_extrap *= theta_scale;
  }
}

}  // namespace

void CpuBackend::Rope(DevPtr<float> x, int n_rows, int n_heads, int head_dim,
                      const RopeParams& rope, int64_t pos0, int64_t pos_step, bool inverse) {
  float* xs = x.get();
  Parallel(n_rows, 4, [&](size_t r0, size_t r1, int) {
    for (size_t r = r0; r < r1; ++r) {
      RopeRow(xs + r * n_heads * size_t(head_dim), n_heads, head_dim, rope, inverse,
              pos0 + int64_t(r) * pos_step);
    }
  });
}

void CpuBackend::RopeAt(DevPtr<float> x, int n_rows, int n_heads, int head_dim,
                        const RopeParams& rope, DevPtr<const int64_t> positions, bool inverse) {
  float* xs = x.get();
  const int64_t* at = positions.get();
  Parallel(n_rows, 4, [&](size_t r0, size_t r1, int) {
    for (size_t r = r0; r < r1; ++r) {
      RopeRow(xs + r * n_heads * size_t(head_dim), n_heads, head_dim, rope, inverse, at[r]);
    }
  });
}

}  // namespace flashkv
