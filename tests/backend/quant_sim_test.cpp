#include "backend/cpu/quant_sim.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace flashkv::cpu {
namespace {

TEST(QuantSimTest, E4M3RoundsToNearestEvenMantissa) {
  EXPECT_EQ(RoundE4M3(1.0f), 1.0f);
  EXPECT_EQ(RoundE4M3(1.0625f), 1.0f);   // halfway 1.0 (m=0) / 1.125 (m=1): even wins
  EXPECT_EQ(RoundE4M3(1.1875f), 1.25f);  // halfway 1.125 (m=1) / 1.25 (m=2)
  EXPECT_EQ(RoundE4M3(1.07f), 1.125f);
  EXPECT_EQ(RoundE4M3(-3.3f), -3.25f);               // binade [2,4): step 0.25
  EXPECT_EQ(RoundE4M3(300.0f), 288.0f);              // binade [256,512): step 32
  EXPECT_EQ(RoundE4M3(500.0f), 448.0f);              // saturates at the largest finite value
  EXPECT_EQ(RoundE4M3(0.0029296875f), 0.00390625f);  // 1.5·2^-9: subnormal tie → 2·2^-9
  EXPECT_EQ(RoundE4M3(0.0009765625f), 0.0f);         // 0.5·2^-9: tie → 0
}

TEST(QuantSimTest, E2M1RoundsToNearestEvenMantissa) {
  EXPECT_EQ(RoundE2M1(0.25f), 0.0f);  // 0 / 0.5 tie → 0
  EXPECT_EQ(RoundE2M1(0.75f), 1.0f);  // 0.5 / 1 tie → 1
  EXPECT_EQ(RoundE2M1(1.25f), 1.0f);  // 1 / 1.5 tie → 1
  EXPECT_EQ(RoundE2M1(2.5f), 2.0f);   // 2 / 3 tie → 2
  EXPECT_EQ(RoundE2M1(3.5f), 4.0f);   // 3 / 4 tie → 4
  EXPECT_EQ(RoundE2M1(5.0f), 4.0f);   // 4 / 6 tie → 4
  EXPECT_EQ(RoundE2M1(5.5f), 6.0f);
  EXPECT_EQ(RoundE2M1(-7.0f), -6.0f);
}

TEST(QuantSimTest, Fp8BlocksUsePowerOfTwoScalePerBlock) {
  std::vector<float> x(128, 0.0f);
  // Block 0: amax 1 → scale 2^ceil(log2(1/448)) = 2^-8; 1/2^-8 = 256 is exact.
  x[0] = 1.0f;
  x[1] = 0.3f;  // 0.3·256 = 76.8 → binade [64,128) step 8 → 80 → 0.3125
  // Block 1: all zero → amax clamps to 1e-4, values stay 0.
  Fp8RoundTripBlocks(x.data(), 128);
  EXPECT_EQ(x[0], 1.0f);
  EXPECT_EQ(x[1], 0.3125f);
  for (int i = 64; i < 128; ++i) EXPECT_EQ(x[i], 0.0f);
}

TEST(QuantSimTest, Fp4BlocksUsePowerOfTwoScalePerBlock) {
  std::vector<float> x(32, 0.0f);
  x[0] = 3.0f;   // amax 3 → scale 2^ceil(log2(0.5)) = 0.5: 3/0.5 = 6 exactly
  x[1] = 1.3f;   // 2.6 → step 1 in [2,4) → 3 → 1.5
  x[2] = -0.2f;  // -0.4 → step 0.5 → -0.5 → -0.25
  Fp4RoundTripBlocks(x.data(), 32);
  EXPECT_EQ(x[0], 3.0f);
  EXPECT_EQ(x[1], 1.5f);
  EXPECT_EQ(x[2], -0.25f);
}

TEST(QuantSimTest, HadamardIsOrthonormalWalshTransform) {
  std::vector<float> e0 = {1, 0, 0, 0};
  HadamardScaled(e0.data(), 4);
  for (float v : e0) EXPECT_FLOAT_EQ(v, 0.5f);
  std::vector<float> x = {1, 2, 3, 4};
  HadamardScaled(x.data(), 4);
  // Rows of H4: (1,1,1,1), (1,-1,1,-1), (1,1,-1,-1), (1,-1,-1,1), each / 2.
  EXPECT_FLOAT_EQ(x[0], 5.0f);
  EXPECT_FLOAT_EQ(x[1], -1.0f);
  EXPECT_FLOAT_EQ(x[2], -2.0f);
  EXPECT_FLOAT_EQ(x[3], 0.0f);
}

}  // namespace
}  // namespace flashkv::cpu
