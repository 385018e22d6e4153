#include "tensor/quant_k.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/half.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_internal.h"

namespace flashkv::internal {
namespace {

// Rounds half to even (the default FP environment), as GGML's nearest_int does.
inline int NearestInt(float v) {
  return static_cast<int>(std::lrint(v));
}

struct GroupFit {
  float scale;  // >= 0 in practice
  float min;    // the value subtracted: group value = scale * L - min, min >= 0
};

// Fits x [n] (weights w [n]) as scale * L - min, L in [0, nmax] written to L [n].
// The offset is kept <= 0 (min >= 0) because k-quants only store a subtracted minimum.
// Candidate inverse scales are (nmax + rmin + rdelta * k) / (max - lo), k = 0..nstep; for each
// the quants are rounded, then (scale, offset) come from weighted least squares; the fit with
// the lowest weighted error (|diff| if use_abs, else diff^2) wins.
GroupFit FitGroup(int n, int nmax, const float* x, const float* w, uint8_t* L, float rmin,
                  float rdelta, int nstep, bool use_abs) {
  float lo = x[0], hi = x[0];
  float sum_w = w[0], sum_x = w[0] * x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (lo > 0) lo = 0;
  if (hi == lo) {
    std::fill(L, L + n, uint8_t{0});
    return {0.0f, -lo};
  }
  auto error_of = [&](float scale, float offset, const uint8_t* q) {
    float err = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = scale * static_cast<float>(q[i]) + offset - x[i];
      err += w[i] * (use_abs ? std::fabs(diff) : diff * diff);
    }
    return err;
  };
  float iscale = static_cast<float>(nmax) / (hi - lo);
  float best_scale = 1 / iscale;
  float best_offset = lo;
  for (int i = 0; i < n; ++i)
    L[i] = static_cast<uint8_t>(std::clamp(NearestInt(iscale * (x[i] - lo)), 0, nmax));
  float best_err = error_of(best_scale, best_offset, L);

  uint8_t cand[32];
  for (int k = 0; k <= nstep; ++k) {
    iscale = (rmin + rdelta * static_cast<float>(k) + static_cast<float>(nmax)) / (hi - lo);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(NearestInt(iscale * (x[i] - lo)), 0, nmax);
      cand[i] = static_cast<uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0) continue;
    float scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float offset = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (offset > 0) {  // a positive offset cannot be stored: refit the scale through zero
      offset = 0;
      scale = sum_xl / sum_l2;
    }
    const float err = error_of(scale, offset, cand);
    if (err < best_err) {
      std::memcpy(L, cand, static_cast<size_t>(n));
      best_err = err;
      best_scale = scale;
      best_offset = offset;
    }
  }
  return {best_scale, -best_offset};
}

void StoreHalf(uint8_t* p, float v) {
  const uint16_t h = F32ToF16(v);
  std::memcpy(p, &h, 2);
}

}  // namespace

void QuantizeBlockQ2_K(const float* x, uint8_t* block) {
  uint8_t L[kQK_K];
  float w[16];
  float scales[16], mins[16];
  float max_scale = 0, max_min = 0;
  for (int g = 0; g < 16; ++g) {
    for (int l = 0; l < 16; ++l) w[l] = std::fabs(x[16 * g + l]);
    const GroupFit f = FitGroup(16, 3, x + 16 * g, w, L + 16 * g, -0.5f, 0.1f, 15, true);
    scales[g] = f.scale;
    mins[g] = f.min;
    max_scale = std::max(max_scale, f.scale);
    max_min = std::max(max_min, f.min);
  }
  uint8_t* sc = block;
  uint8_t* qs = block + 16;
  std::memset(sc, 0, 16);
  if (max_scale > 0) {
    const float iscale = 15.0f / max_scale;
    for (int g = 0; g < 16; ++g)
      sc[g] = static_cast<uint8_t>(std::clamp(NearestInt(iscale * scales[g]), 0, 15));
  }
  StoreHalf(block + 80, max_scale > 0 ? max_scale / 15.0f : 0.0f);
  if (max_min > 0) {
    const float imin = 15.0f / max_min;
    for (int g = 0; g < 16; ++g)
      sc[g] |= static_cast<uint8_t>(std::clamp(NearestInt(imin * mins[g]), 0, 15) << 4);
  }
  StoreHalf(block + 82, max_min > 0 ? max_min / 15.0f : 0.0f);

  // Re-round every value against the scales as stored.
  const float d = LoadHalf(block + 80);
  const float dmin = LoadHalf(block + 82);
  for (int g = 0; g < 16; ++g) {
    const float dg = d * static_cast<float>(sc[g] & 15);
    if (dg == 0) continue;
    const float mg = dmin * static_cast<float>(sc[g] >> 4);
    for (int l = 0; l < 16; ++l)
      L[16 * g + l] = static_cast<uint8_t>(std::clamp(NearestInt((x[16 * g + l] + mg) / dg), 0, 3));
  }
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* q = L + 128 * h + l;
      qs[32 * h + l] = static_cast<uint8_t>(q[0] | (q[32] << 2) | (q[64] << 4) | (q[96] << 6));
    }
}

void QuantizeBlockQ4_K(const float* x, uint8_t* block) {
  uint8_t L[kQK_K];
  float w[32];
  float scales[8], mins[8];
  float max_scale = 0, max_min = 0;
  for (int g = 0; g < 8; ++g) {
    const float* xg = x + 32 * g;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xg[l] * xg[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xg[l]);
    const GroupFit f = FitGroup(32, 15, xg, w, L + 32 * g, -1.0f, 0.1f, 20, false);
    scales[g] = f.scale;
    mins[g] = f.min;
    max_scale = std::max(max_scale, f.scale);
    max_min = std::max(max_min, f.min);
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t* sc = block + 4;
  uint8_t* qs = block + 16;
  std::memset(sc, 0, 12);
  for (int g = 0; g < 8; ++g) {
    const int ls = std::clamp(NearestInt(inv_scale * scales[g]), 0, 63);
    const int lm = std::clamp(NearestInt(inv_min * mins[g]), 0, 63);
    if (g < 4) {
      sc[g] = static_cast<uint8_t>(ls);
      sc[g + 4] = static_cast<uint8_t>(lm);
    } else {
      sc[g + 4] = static_cast<uint8_t>((ls & 15) | ((lm & 15) << 4));
      sc[g - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      sc[g] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  StoreHalf(block, max_scale / 63.0f);
  StoreHalf(block + 2, max_min / 63.0f);

  const float d = LoadHalf(block);
  const float dmin = LoadHalf(block + 2);
  for (int g = 0; g < 8; ++g) {
    int s, m;
    Q4KScaleMin(sc, g, &s, &m);
    const float dg = d * static_cast<float>(s);
    if (dg == 0) continue;
    const float mg = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l)
      L[32 * g + l] =
          static_cast<uint8_t>(std::clamp(NearestInt((x[32 * g + l] + mg) / dg), 0, 15));
  }
  for (int p = 0; p < 4; ++p)
    for (int l = 0; l < 32; ++l)
      qs[32 * p + l] = static_cast<uint8_t>(L[64 * p + l] | (L[64 * p + 32 + l] << 4));
}

}  // namespace flashkv::internal
