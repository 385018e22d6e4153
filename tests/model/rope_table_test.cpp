#include "model/rope_table.h"

#include <cmath>

#include <gtest/gtest.h>

namespace flashkv {
namespace {

// hf-tiny-a's compress rope: n_rot 8, θ_c 160000, s 16, L0 65536, β 32 / 1.
// cd(32) = 8·ln(65536/(64π)) / (2 ln 160000) = 1.93, cd(1) = 3.09 → lo 1, hi 4;
// γ_i = clamp((i − 1)/3) = 0, 0, 1/3, 2/3 and θ_c^(−2i/8) = 1, 1/20, 1/400, 1/8000, so
// ω = 1, 1/20, (1/400)(2/3 + 1/48), (1/8000)(1/3 + 2/48).
TEST(RopeTableTest, YarnMatchesHandValuesForHfTinyA) {
  const RopeParams p = YarnRope(8, 160000.0f, 16.0f, 65536, 32.0f, 1.0f);
  EXPECT_EQ(p.corr_lo, 1.0f);
  EXPECT_EQ(p.corr_hi, 4.0f);
  EXPECT_FLOAT_EQ(p.freq_scale, 1.0f / 16.0f);
  EXPECT_NEAR(p.mscale, 1.0f, 1.2e-7f);  // no magnitude scaling, up to float cancellation
  const auto f = RopeFrequencies(p);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[1], 1.0f / 20.0f);
  EXPECT_FLOAT_EQ(f[2], float(1.0 / 400.0 * (2.0 / 3.0 + 1.0 / 48.0)));
  EXPECT_FLOAT_EQ(f[3], float(1.0 / 8000.0 * (1.0 / 3.0 + 2.0 / 48.0)));
}

// Flash (n_rot 64): the ramp runs from pair 15 to pair 25 (docs/DS4_MODEL.md §4.2).
TEST(RopeTableTest, YarnRampBoundsForFlash) {
  const RopeParams p = YarnRope(64, 160000.0f, 16.0f, 65536, 32.0f, 1.0f);
  EXPECT_EQ(p.corr_lo, 15.0f);
  EXPECT_EQ(p.corr_hi, 25.0f);
  const auto f = RopeFrequencies(p);
  // Below lo: plain extrapolation; from hi on: divided by the factor; halfway: the mean.
  // (The angle is built by 2i float multiplications, so allow a few ulps.)
  EXPECT_NEAR(f[15] / std::pow(160000.0, -30.0 / 64), 1.0, 1e-6);
  EXPECT_NEAR(f[25] / (std::pow(160000.0, -50.0 / 64) / 16.0), 1.0, 1e-6);
  EXPECT_NEAR(f[20] / (std::pow(160000.0, -40.0 / 64) * (0.5 + 0.5 / 16.0)), 1.0, 1e-6);
}

TEST(RopeTableTest, PlainParameters) {
  const RopeParams p = PlainRope(4, 10000.0f);
  EXPECT_EQ(p.ext_factor, 0.0f);
  EXPECT_EQ(p.mscale, 1.0f);
  const auto f = RopeFrequencies(p);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[1], 0.01f);
  // Angles grow linearly with the position.
  EXPECT_FLOAT_EQ(RopeAngle(p, 300, 1), 3.0f);
}

}  // namespace
}  // namespace flashkv
