#include "model/rope_table.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace flashkv {
namespace {

// Dimension index (in pairs' channel units) at which a rotation of β turns completes in
// the original context: n_rot · ln(L0 / (2π·β)) / (2 ln θ).
double CorrectionDim(int n_rot, uint64_t orig_ctx, double beta, double base) {
  return n_rot * std::log(double(orig_ctx) / (beta * 2.0 * std::numbers::pi)) /
         (2.0 * std::log(base));
}

}  // namespace

std::vector<float> PlainRopeFrequencies(int n_rot, double base) {
  std::vector<float> f(n_rot / 2);
  for (int i = 0; i < n_rot / 2; ++i) f[i] = float(std::pow(base, -2.0 * i / n_rot));
  return f;
}

std::vector<float> YarnRopeFrequencies(int n_rot, double base, double factor, uint64_t orig_ctx,
                                       double beta_fast, double beta_slow, double* lo_out,
                                       double* hi_out) {
  const double lo = std::max(0.0, std::floor(CorrectionDim(n_rot, orig_ctx, beta_fast, base)));
  const double hi =
      std::min(double(n_rot - 1), std::ceil(CorrectionDim(n_rot, orig_ctx, beta_slow, base)));
  if (lo_out) *lo_out = lo;
  if (hi_out) *hi_out = hi;
  const double span = std::max(0.001, hi - lo);
  std::vector<float> f(n_rot / 2);
  for (int i = 0; i < n_rot / 2; ++i) {
    const double extrap = std::pow(base, -2.0 * i / n_rot);
    const double gamma = std::clamp((i - lo) / span, 0.0, 1.0);  // 1: fully interpolated
    f[i] = float(extrap * ((1.0 - gamma) + gamma / factor));
  }
  return f;
}

std::vector<float> MainRopeFrequencies(const ModelConfig& c) {
  return PlainRopeFrequencies(c.n_rot, c.rope_freq_base);
}

std::vector<float> CompressRopeFrequencies(const ModelConfig& c) {
  if (c.rope_scaling_factor <= 1.0f)
    return PlainRopeFrequencies(c.n_rot, c.compress_rope_freq_base);
  return YarnRopeFrequencies(c.n_rot, c.compress_rope_freq_base, c.rope_scaling_factor,
                             c.rope_orig_ctx, c.yarn_beta_fast, c.yarn_beta_slow);
}

}  // namespace flashkv
