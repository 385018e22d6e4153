#include "tensor/half.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace flashkv {
namespace {

TEST(HalfTest, F16ToF32SpecialValues) {
  EXPECT_EQ(F16ToF32(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(F16ToF32(0x8000)));
  EXPECT_EQ(F16ToF32(0x8000), 0.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));            // smallest subnormal
  EXPECT_EQ(F16ToF32(0x03ff), 1023.0f * std::ldexp(1.0f, -24));  // largest subnormal
  EXPECT_EQ(F16ToF32(0x0400), std::ldexp(1.0f, -14));            // smallest normal
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0xc000), -2.0f);
  EXPECT_EQ(F16ToF32(0x3555), 0.333251953125f);
  EXPECT_EQ(F16ToF32(0x7bff), 65504.0f);
  EXPECT_EQ(F16ToF32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(F16ToF32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(F16ToF32(0x7e00)));
  EXPECT_TRUE(std::isnan(F16ToF32(0x7c01)));
}

TEST(HalfTest, F32ToF16RoundsToNearestEven) {
  EXPECT_EQ(F32ToF16(1.0f), 0x3c00);
  EXPECT_EQ(F32ToF16(-0.0f), 0x8000);
  // 1 + 2^-11 is halfway between 0x3c00 (even) and 0x3c01: stays.
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 0x3c01 and 0x3c02 (even): up.
  EXPECT_EQ(F32ToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Just above the halfway point rounds up.
  EXPECT_EQ(F32ToF16(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01);
  EXPECT_EQ(F32ToF16(65504.0f), 0x7bff);
  EXPECT_EQ(F32ToF16(65519.99f), 0x7bff);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00);  // tie with an odd mantissa: up to infinity
  EXPECT_EQ(F32ToF16(1e10f), 0x7c00);
  EXPECT_EQ(F32ToF16(-1e10f), 0xfc00);
  EXPECT_EQ(F32ToF16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(F32ToF16(-std::numeric_limits<float>::infinity()), 0xfc00);
}

TEST(HalfTest, F32ToF16Subnormals) {
  const float sub = std::ldexp(1.0f, -24);
  EXPECT_EQ(F32ToF16(sub), 0x0001);
  EXPECT_EQ(F32ToF16(sub / 2), 0x0000);  // tie between 0 (even) and 1
  EXPECT_EQ(F32ToF16(-sub / 2), 0x8000);
  EXPECT_EQ(F32ToF16(std::nextafter(sub / 2, 1.0f)), 0x0001);
  EXPECT_EQ(F32ToF16(3 * sub / 2), 0x0002);    // tie between 1 and 2 (even)
  EXPECT_EQ(F32ToF16(5 * sub / 2), 0x0002);    // tie between 2 (even) and 3
  EXPECT_EQ(F32ToF16(1023.5f * sub), 0x0400);  // largest subnormal rounds up into the normals
  EXPECT_EQ(F32ToF16(1e-8f), 0x0000);
  EXPECT_EQ(F32ToF16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -14)), 0x0400);
}

TEST(HalfTest, F32ToF16NaNStaysQuietNaN) {
  const uint16_t h = F32ToF16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(h & 0x7c00, 0x7c00);
  EXPECT_NE(h & 0x03ff, 0);
  EXPECT_NE(h & 0x0200, 0);  // quiet bit
  const uint16_t neg = F32ToF16(-std::numeric_limits<float>::signaling_NaN());
  EXPECT_EQ(neg & 0xfe00, 0xfe00);
}

TEST(HalfTest, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_EQ(F32ToF16(f) & 0x7e00, 0x7e00) << std::hex << h;
      continue;
    }
    ASSERT_EQ(F32ToF16(f), h) << std::hex << h;
  }
}

TEST(HalfTest, MatchesHardwareConversion) {
#if defined(__F16C__)
  // A stride coprime to 2^32 visits ~1M float bit patterns in every exponent range.
  for (uint64_t u = 0; u < (1ull << 32); u += 4099) {
    const float f = BitsToFloat(static_cast<uint32_t>(u));
    if (std::isnan(f)) continue;
    const uint16_t hw = static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
    ASSERT_EQ(F32ToF16(f), hw) << std::hex << u;
  }
#else
  GTEST_SKIP() << "no F16C in this build";
#endif
}

TEST(HalfTest, BF16Conversions) {
  EXPECT_EQ(BF16ToF32(0x3f80), 1.0f);
  EXPECT_EQ(BF16ToF32(0xc040), -3.0f);
  EXPECT_EQ(F32ToBF16(1.0f), 0x3f80);
  EXPECT_EQ(F32ToBF16(BitsToFloat(0x3f808000)), 0x3f80);  // tie, even stays
  EXPECT_EQ(F32ToBF16(BitsToFloat(0x3f818000)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(F32ToBF16(BitsToFloat(0x3f808001)), 0x3f81);
  EXPECT_EQ(F32ToBF16(BitsToFloat(0x7f7fffff)), 0x7f80);  // FLT_MAX rounds to infinity
  EXPECT_EQ(F32ToBF16(BitsToFloat(0x00008000)), 0x0000);  // subnormal tie to even zero
  EXPECT_EQ(F32ToBF16(BitsToFloat(0x00018000)), 0x0002);  // subnormal tie, odd rounds up
  EXPECT_EQ(F32ToBF16(BitsToFloat(0x80010000)), 0x8001);  // subnormals are kept
  EXPECT_EQ(F32ToBF16(-std::numeric_limits<float>::infinity()), 0xff80);
  const uint16_t nan = F32ToBF16(BitsToFloat(0x7f800001));  // NaN payload only in low bits
  EXPECT_TRUE(std::isnan(BF16ToF32(nan)));
  EXPECT_EQ(nan & 0x0040, 0x0040);
}

TEST(HalfTest, RowConversionsMatchScalar) {
  std::vector<uint16_t> h(1000);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>(i * 65.537 + 3);
  std::vector<float> a(h.size()), b(h.size());
  F16ToF32Row(h.data(), a.data(), static_cast<int64_t>(h.size()));
  BF16ToF32Row(h.data(), b.data(), static_cast<int64_t>(h.size()));
  for (size_t i = 0; i < h.size(); ++i) {
    EXPECT_EQ(FloatBits(a[i]), FloatBits(F16ToF32(h[i]))) << i;
    EXPECT_EQ(FloatBits(b[i]), FloatBits(BF16ToF32(h[i]))) << i;
  }
  std::vector<uint16_t> back(h.size());
  F32ToBF16Row(b.data(), back.data(), static_cast<int64_t>(h.size()));
  for (size_t i = 0; i < h.size(); ++i) {
    if (!std::isnan(b[i])) {
      EXPECT_EQ(back[i], h[i]) << i;
    }
  }
}

}  // namespace
}  // namespace flashkv
