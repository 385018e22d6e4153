#include "tensor/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/half.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_internal.h"
#include "test_blocks.h"

namespace flashkv {
namespace {

std::vector<float> Dequant(DType t, const void* src, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  Status s = DequantizeRow(t, src, out.data(), n);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

std::vector<float> Gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

TEST(QuantTest, Q8_0KnownBlock) {
  BlockQ8_0 b;
  b.d = 0x3800;  // 0.5
  for (int i = 0; i < 32; ++i) b.qs[i] = static_cast<int8_t>(i - 16);
  const auto v = Dequant(DType::kQ8_0, &b, 32);
  EXPECT_EQ(v[0], -8.0f);
  EXPECT_EQ(v[16], 0.0f);
  EXPECT_EQ(v[17], 0.5f);
  EXPECT_EQ(v[31], 7.5f);
}

TEST(QuantTest, Q2_KKnownBlock) {
  BlockQ2_K b;
  b.d = 0x3c00;     // 1.0
  b.dmin = 0x3800;  // 0.5
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<uint8_t>(g | ((15 - g) << 4));
  std::memset(b.qs, 0xe4, sizeof(b.qs));  // shifts 0,2,4,6 hold quants 0,1,2,3
  b.qs[5] = 0x1b;                         // shifts 0,2,4,6 hold quants 3,2,1,0
  b.qs[52] = 0x1b;
  const auto v = Dequant(DType::kQ2_K, &b, 256);
  // value 128h + 32s + l: group g = 8h + 2s + (l >= 16), d*(g)*q - 0.5*(15-g)
  EXPECT_EQ(v[0], -7.5f);    // g0: 0*0 - 7.5
  EXPECT_EQ(v[17], -7.0f);   // g1, q 0: 0 - 7
  EXPECT_EQ(v[40], -4.5f);   // g2, q 1: 2 - 6.5
  EXPECT_EQ(v[100], 13.5f);  // g6, q 3: 18 - 4.5
  EXPECT_EQ(v[200], 22.5f);  // g12, q 2: 24 - 1.5
  EXPECT_EQ(v[255], 45.0f);  // g15, q 3: 45 - 0
  EXPECT_EQ(v[5], -7.5f);    // qs[5], g0 (scale 0)
  EXPECT_EQ(v[37], -2.5f);   // qs[5] >> 2 = 2, g2: 4 - 6.5
  EXPECT_EQ(v[101], -4.5f);  // qs[5] >> 6 = 0, g6: 0 - 4.5
  EXPECT_EQ(v[148], 24.0f);  // qs[52] = half 1, l 20: q 3, g9: 27 - 3
}

TEST(QuantTest, Q4_KKnownBlock) {
  // sc = {1, 2, 3, 4, 17, 33, 50, 63}, mn = {5, 6, 7, 8, 20, 40, 60, 0}, packed by hand:
  // bytes 0-3 = sc[j] | (sc[j+4] >> 4) << 6, bytes 4-7 = mn[j] | (mn[j+4] >> 4) << 6,
  // bytes 8-11 = (sc[j+4] & 15) | (mn[j+4] & 15) << 4.
  BlockQ4_K b;
  b.d = 0x3c00;     // 1.0
  b.dmin = 0x3400;  // 0.25
  const uint8_t scales[12] = {65, 130, 195, 196, 69, 134, 199, 8, 65, 129, 194, 15};
  std::memcpy(b.scales, scales, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i & 15) | ((15 - (i & 15)) << 4));
  const auto v = Dequant(DType::kQ4_K, &b, 256);
  EXPECT_EQ(v[0], -1.25f);    // g0: 1*0 - 0.25*5
  EXPECT_EQ(v[5], 3.75f);     // g0: 1*5 - 1.25
  EXPECT_EQ(v[40], 12.5f);    // g1 (high nibble of byte 8 = 7): 2*7 - 1.5
  EXPECT_EQ(v[67], 7.25f);    // g2: 3*3 - 1.75
  EXPECT_EQ(v[138], 165.0f);  // g4: 17*10 - 5
  EXPECT_EQ(v[161], 452.0f);  // g5: 33*14 - 10
  EXPECT_EQ(v[223], 735.0f);  // g6: 50*15 - 15
  EXPECT_EQ(v[240], 945.0f);  // g7: 63*15 - 0
  EXPECT_EQ(v[255], 0.0f);    // g7: 63*0 - 0
}

TEST(QuantTest, IQ2_XXSKnownBlock) {
  BlockIQ2_XXS b;
  std::memset(&b, 0, sizeof(b));
  b.d = 0x3c00;  // 1.0
  // Group 0: grid indices 0, 1, 255, 128; sign indices 0, 1, 3, 127; scale ls = 3.
  const uint32_t a = 0u | (1u << 8) | (255u << 16) | (128u << 24);
  const uint32_t s = 0u | (1u << 7) | (3u << 14) | (127u << 21) | (3u << 28);
  std::memcpy(&b.qs[0], &a, 4);
  std::memcpy(&b.qs[2], &s, 4);
  const auto v = Dequant(DType::kIQ2_XXS, &b, 256);
  // db = 1 * (0.5 + 3) * 0.25 = 0.875; grid 0 = all 8s.
  for (int j = 0; j < 8; ++j) EXPECT_EQ(v[j], 7.0f) << j;
  // grid 1 = {43, 8 x7}; signs 1 -> mask 0x81 (bits 0 and 7).
  EXPECT_EQ(v[8], -37.625f);
  EXPECT_EQ(v[9], 7.0f);
  EXPECT_EQ(v[15], -7.0f);
  // grid 255 = {8, 25, 8, 8, 25, 43, 43, 43}; signs 3 -> bits 0, 1.
  const float g255[8] = {-7.0f, -21.875f, 7.0f, 7.0f, 21.875f, 37.625f, 37.625f, 37.625f};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(v[16 + j], g255[j]) << j;
  // grid 128 = {8, 43, 8, 8, 8, 43, 43, 8}; signs 127 -> mask 0xff.
  const float g128[8] = {-7.0f, -37.625f, -7.0f, -7.0f, -7.0f, -37.625f, -37.625f, -7.0f};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(v[24 + j], g128[j]) << j;
  // Zero words: grid 0, no signs, ls 0 -> 1 * 0.5 * 0.25 * 8 = 1.
  for (int j = 32; j < 256; ++j) EXPECT_EQ(v[j], 1.0f) << j;
}

TEST(QuantTest, RejectsBadRows) {
  float out[64];
  BlockQ8_0 b{};
  Status s = DequantizeRow(DType::kQ8_0, &b, out, 33);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("q8_0"), std::string::npos) << s.message();
  EXPECT_EQ(DequantizeRow(DType::kQ5_0, &b, out, 32).code(), StatusCode::kUnsupported);
  EXPECT_EQ(QuantizeRow(DType::kIQ2_XXS, out, &b, 256).code(), StatusCode::kUnsupported);
  EXPECT_EQ(QuantizeRow(static_cast<DType>(99), out, &b, 32).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(CanQuantize(DType::kIQ2_XXS));
  EXPECT_TRUE(CanQuantize(DType::kQ4_K));
}

TEST(QuantTest, F16AndBF16RoundTripWithinHalfUlp) {
  const auto x = Gaussian(1024, 1, 3.0f);
  std::vector<uint16_t> h(x.size());
  for (DType t : {DType::kF16, DType::kBF16}) {
    ASSERT_TRUE(QuantizeRow(t, x.data(), h.data(), 1024).ok());
    const auto y = Dequant(t, h.data(), 1024);
    // half an ulp: 2^-11 relative for F16 (no value here is near the subnormals), 2^-8 for BF16
    const float rel = t == DType::kF16 ? std::ldexp(1.0f, -11) : std::ldexp(1.0f, -8);
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_LE(std::fabs(y[i] - x[i]), rel * std::fabs(x[i])) << i;
  }
}

TEST(QuantTest, Q8_0RoundTripWithinHalfStep) {
  const auto x = Gaussian(32 * 64, 2);
  std::vector<BlockQ8_0> q(64);
  ASSERT_TRUE(QuantizeRow(DType::kQ8_0, x.data(), q.data(), 32 * 64).ok());
  const auto y = Dequant(DType::kQ8_0, q.data(), 32 * 64);
  for (int b = 0; b < 64; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * b + i]));
    const float d = amax / 127;
    const float dh = F16ToF32(q[b].d);
    // |x - d q| <= d/2 from rounding, plus |q| <= 127 steps of the f16 error in the scale.
    const float bound = 0.5f * d + 127 * std::fabs(d - dh) + 1e-6f * amax;
    for (int i = 0; i < 32; ++i)
      EXPECT_LE(std::fabs(y[32 * b + i] - x[32 * b + i]), bound) << b << " " << i;
  }
}

// k-quant quantizers end by rounding each value to the nearest point of its group's grid
// {d_g * q - m_g : q = 0..nmax}: the error is at most half a step inside the grid's range, and
// the distance to the range outside it.
void CheckNearestGrid(const std::vector<float>& x, const std::vector<float>& y, int group,
                      const std::vector<float>& step, const std::vector<float>& lo, int nmax) {
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t g = i / static_cast<size_t>(group);
    if (step[g] == 0) continue;
    const float hi = lo[g] + step[g] * static_cast<float>(nmax);
    const float outside = std::max({0.0f, lo[g] - x[i], x[i] - hi});
    const float bound = std::max(0.5f * step[g], outside) * (1 + 1e-5f) + 1e-6f;
    EXPECT_LE(std::fabs(y[i] - x[i]), bound) << "value " << i;
  }
}

double RelRms(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e += (double)(y[i] - x[i]) * (y[i] - x[i]);
    s += (double)x[i] * x[i];
  }
  return std::sqrt(e / s);
}

TEST(QuantTest, Q2_KRoundTrip) {
  const int nb = 32;
  const auto x = Gaussian(256 * nb, 3);
  std::vector<BlockQ2_K> q(nb);
  ASSERT_TRUE(QuantizeRow(DType::kQ2_K, x.data(), q.data(), 256 * nb).ok());
  const auto y = Dequant(DType::kQ2_K, q.data(), 256 * nb);
  std::vector<float> step, lo;
  for (const auto& b : q)
    for (int g = 0; g < 16; ++g) {
      step.push_back(F16ToF32(b.d) * static_cast<float>(b.scales[g] & 15));
      lo.push_back(-F16ToF32(b.dmin) * static_cast<float>(b.scales[g] >> 4));
    }
  CheckNearestGrid(x, y, 16, step, lo, 3);
  // 2-bit quants of Gaussian data: relative RMS error measured at ~0.26.
  EXPECT_LT(RelRms(x, y), 0.35);
}

TEST(QuantTest, Q4_KRoundTrip) {
  const int nb = 32;
  const auto x = Gaussian(256 * nb, 4);
  std::vector<BlockQ4_K> q(nb);
  ASSERT_TRUE(QuantizeRow(DType::kQ4_K, x.data(), q.data(), 256 * nb).ok());
  const auto y = Dequant(DType::kQ4_K, q.data(), 256 * nb);
  std::vector<float> step, lo;
  for (const auto& b : q)
    for (int g = 0; g < 8; ++g) {
      int sc, mn;
      if (g < 4) {
        sc = b.scales[g] & 63;
        mn = b.scales[g + 4] & 63;
      } else {
        sc = (b.scales[g + 4] & 15) | ((b.scales[g - 4] >> 6) << 4);
        mn = (b.scales[g + 4] >> 4) | ((b.scales[g] >> 6) << 4);
      }
      step.push_back(F16ToF32(b.d) * static_cast<float>(sc));
      lo.push_back(-F16ToF32(b.dmin) * static_cast<float>(mn));
    }
  CheckNearestGrid(x, y, 32, step, lo, 15);
  // 4-bit quants of Gaussian data: relative RMS error measured at ~0.07.
  EXPECT_LT(RelRms(x, y), 0.1);
}

TEST(QuantTest, KQuantsHandleConstantAndZeroBlocks) {
  std::vector<float> x(256, 0.0f);
  BlockQ2_K q2;
  BlockQ4_K q4;
  ASSERT_TRUE(QuantizeRow(DType::kQ2_K, x.data(), &q2, 256).ok());
  for (float v : Dequant(DType::kQ2_K, &q2, 256)) EXPECT_EQ(v, 0.0f);
  ASSERT_TRUE(QuantizeRow(DType::kQ4_K, x.data(), &q4, 256).ok());
  for (float v : Dequant(DType::kQ4_K, &q4, 256)) EXPECT_EQ(v, 0.0f);
  std::fill(x.begin(), x.end(), -1.5f);  // representable only through the min
  ASSERT_TRUE(QuantizeRow(DType::kQ4_K, x.data(), &q4, 256).ok());
  for (float v : Dequant(DType::kQ4_K, &q4, 256)) EXPECT_NEAR(v, -1.5f, 2e-3f);
}

TEST(QuantTest, ActQ8_0IsDs4Quantizer) {
  std::vector<float> x(40, 0.0f);
  // Block 0: amax 127 -> d = 1 exactly, so x * (1/d) = x and the rounding mode shows.
  x[0] = 127.0f;
  x[1] = 2.5f;   // tie -> 2 (to even; GGML's roundf would give 3)
  x[2] = 3.5f;   // tie -> 4
  x[3] = -2.5f;  // tie -> -2
  x[4] = -127.0f;
  x[5] = 0.49f;
  // Block 1: the partial tail, 8 values.
  x[32] = -0.5f;
  x[33] = 0.125f;
  std::vector<BlockQ8_0Act> q(2);
  QuantizeActQ8_0(x.data(), q.data(), 40);
  EXPECT_EQ(q[0].d, 1.0f);
  EXPECT_EQ(q[0].qs[0], 127);
  EXPECT_EQ(q[0].qs[1], 2);
  EXPECT_EQ(q[0].qs[2], 4);
  EXPECT_EQ(q[0].qs[3], -2);
  EXPECT_EQ(q[0].qs[4], -127);
  EXPECT_EQ(q[0].qs[5], 0);
  EXPECT_EQ(q[1].d, 0.5f / 127.0f);  // fp32 amax / 127, not rounded to f16
  EXPECT_EQ(q[1].qs[0], -127);
  EXPECT_EQ(q[1].qs[1], 32);                                   // 0.125 / (0.5/127) = 31.75
  for (int i = 8; i < 32; ++i) EXPECT_EQ(q[1].qs[i], 0) << i;  // zero padding
  std::vector<float> zeros(32, 0.0f);
  QuantizeActQ8_0(zeros.data(), q.data(), 32);
  EXPECT_EQ(q[0].d, 0.0f);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(q[0].qs[i], 0);
}

TEST(QuantTest, ActQ8_KIsDs4Quantizer) {
  std::vector<float> x(512, 0.0f);
  // Block 0: the max-|x| element is negative: iscale = -127 / -254 = 0.5, d = 2.
  x[0] = 127.0f;   // 63.5 -> 64 (tie to even)
  x[1] = 1.0f;     // 0.5 -> 0
  x[2] = 3.0f;     // 1.5 -> 2
  x[7] = -254.0f;  // -127
  x[20] = -5.0f;   // -2.5 -> -2
  // Block 1: |254| twice, the first (positive) one sets the sign: iscale = -0.5, d = -2.
  x[256 + 3] = 254.0f;
  x[256 + 9] = -254.0f;
  x[256 + 17] = 3.0f;  // -1.5 -> -2
  std::vector<BlockQ8_K> q(2);
  QuantizeActQ8_K(x.data(), q.data(), 512);
  EXPECT_EQ(q[0].d, 2.0f);
  EXPECT_EQ(q[0].qs[0], 64);
  EXPECT_EQ(q[0].qs[1], 0);
  EXPECT_EQ(q[0].qs[2], 2);
  EXPECT_EQ(q[0].qs[7], -127);
  EXPECT_EQ(q[0].qs[20], -2);
  EXPECT_EQ(q[0].bsums[0], 64 + 0 + 2 - 127);
  EXPECT_EQ(q[0].bsums[1], -2);
  EXPECT_EQ(q[0].bsums[2], 0);
  EXPECT_EQ(q[1].d, -2.0f);
  EXPECT_EQ(q[1].qs[3], -127);
  EXPECT_EQ(q[1].qs[9], 127);
  EXPECT_EQ(q[1].qs[17], -2);
  EXPECT_EQ(q[1].bsums[0], 0);
  EXPECT_EQ(q[1].bsums[1], -2);
}

TEST(QuantTest, ActQ8_KRoundTripWithinHalfStep) {
  const auto x = Gaussian(1024, 5);
  std::vector<BlockQ8_K> q(4);
  QuantizeActQ8_K(x.data(), q.data(), 1024);
  const auto y = Dequant(DType::kQ8_K, q.data(), 1024);
  for (size_t i = 0; i < x.size(); ++i) {
    const float d = std::fabs(q[i / 256].d);
    EXPECT_LE(std::fabs(y[i] - x[i]), 0.5f * d * (1 + 1e-5f)) << i;
  }
  for (int b = 0; b < 4; ++b)
    for (int k = 0; k < 16; ++k) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += q[b].qs[16 * k + i];
      EXPECT_EQ(q[b].bsums[k], sum);
    }
}

TEST(QuantTest, FastActQuantizersMatchScalarBitForBit) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    auto x = Gaussian(1024 + 24, seed, std::pow(10.0f, static_cast<float>(seed % 7) - 3));
    // Exact ties for the rounding: block 0 scaled so amax = 127 and d = 1.
    for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i - 16) + 0.5f;
    x[31] = 127.0f;
    x[100] = 0.0f;
    if (seed % 3 == 0) std::fill(x.begin() + 256, x.begin() + 512, 0.0f);  // an all-zero block
    if (seed % 4 == 1) {  // two equal |max|, opposite signs
      x[300] = 50.0f;
      x[301] = -50.0f;
    }
    const int64_t n8 = static_cast<int64_t>(x.size());  // 1048: a partial Q8_0 tail
    std::vector<BlockQ8_0Act> a((n8 + 31) / 32), b(a.size());
    QuantizeActQ8_0(x.data(), a.data(), n8);
    internal::QuantizeActQ8_0Scalar(x.data(), b.data(), n8);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(BlockQ8_0Act)), 0) << seed;
    std::vector<BlockQ8_K> c(4), d(4);
    QuantizeActQ8_K(x.data(), c.data(), 1024);
    internal::QuantizeActQ8_KScalar(x.data(), d.data(), 1024);
    ASSERT_EQ(std::memcmp(c.data(), d.data(), c.size() * sizeof(BlockQ8_K)), 0) << seed;
  }
}

TEST(QuantTest, FastDequantMatchesScalarBitForBit) {
  for (DType t : {DType::kQ8_0, DType::kQ2_K, DType::kQ4_K, DType::kIQ2_XXS, DType::kQ8_K}) {
    const DTypeInfo& info = GetDTypeInfo(t);
    const int64_t n = 4096;
    const auto w = testing::RandomRows(t, 1, n, 77);
    const auto fast = Dequant(t, w.data(), n);
    std::vector<float> slow(static_cast<size_t>(n));
    const internal::BlockDequantFn fn = internal::ScalarBlockDequant(t);
    ASSERT_NE(fn, nullptr);
    for (int64_t b = 0; b < n / info.block_size; ++b)
      fn(w.data() + b * info.block_bytes, slow.data() + b * info.block_size);
    ASSERT_EQ(std::memcmp(fast.data(), slow.data(), slow.size() * sizeof(float)), 0) << info.name;
  }
}

}  // namespace
}  // namespace flashkv
