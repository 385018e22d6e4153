#include "model/rope_table.h"

#include <cmath>

#include <gtest/gtest.h>

namespace flashkv {
namespace {

// hf-tiny-a's compress rope: n_rot 8, θ_c 160000, s 16, L0 65536, β 32 / 1.
// cd(32) = 8·ln(65536/(64π)) / (2 ln 160000) = 1.93, cd(1) = 3.09 → lo 1, hi 4;
// γ_i = clamp((i − 1)/3) = 0, 0, 1/3, 2/3 and θ_c^(−2i/8) = 1, 1/20, 1/400, 1/8000.
TEST(RopeTableTest, YarnMatchesHandValuesForHfTinyA) {
  double lo = 0, hi = 0;
  const auto f = YarnRopeFrequencies(8, 160000.0, 16.0, 65536, 32.0, 1.0, &lo, &hi);
  EXPECT_EQ(lo, 1.0);
  EXPECT_EQ(hi, 4.0);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[1], 1.0f / 20.0f);
  EXPECT_FLOAT_EQ(f[2], float(1.0 / 400.0 * (2.0 / 3.0 + 1.0 / 48.0)));
  EXPECT_FLOAT_EQ(f[3], float(1.0 / 8000.0 * (1.0 / 3.0 + 2.0 / 48.0)));
}

// Flash (n_rot 64): the ramp runs from pair 15 to pair 25 (spec §4.2).
TEST(RopeTableTest, YarnRampBoundsForFlash) {
  double lo = 0, hi = 0;
  const auto f = YarnRopeFrequencies(64, 160000.0, 16.0, 65536, 32.0, 1.0, &lo, &hi);
  EXPECT_EQ(lo, 15.0);
  EXPECT_EQ(hi, 25.0);
  // Below lo: plain extrapolation; at/after hi: divided by the factor.
  EXPECT_FLOAT_EQ(f[15], float(std::pow(160000.0, -30.0 / 64)));
  EXPECT_FLOAT_EQ(f[25], float(std::pow(160000.0, -50.0 / 64) / 16.0));
  EXPECT_FLOAT_EQ(f[20], float(std::pow(160000.0, -40.0 / 64) * (0.5 + 0.5 / 16.0)));
}

TEST(RopeTableTest, PlainTable) {
  const auto f = PlainRopeFrequencies(4, 10000.0);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[1], 0.01f);
}

}  // namespace
}  // namespace flashkv
