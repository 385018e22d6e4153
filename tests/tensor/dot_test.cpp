#include "tensor/dot.h"

#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/dot_internal.h"
#include "tensor/dot_ref.h"
#include "tensor/half.h"
#include "tensor/quant.h"
#include "tensor/quant_lanes.h"
#include "test_blocks.h"

namespace flashkv {
namespace {

using testing::RandomActivations;
using testing::RandomRows;

constexpr DType kAllTypes[] = {DType::kF32,    DType::kF16,     DType::kBF16,    DType::kQ8_0,
                               DType::kQ2_K,   DType::kQ3_K,    DType::kQ4_K,    DType::kQ5_K,
                               DType::kQ6_K,   DType::kIQ2_XXS, DType::kQ8_K,    DType::kMXFP4,
                               DType::kIQ2_XS, DType::kIQ1_M,   DType::kIQ3_XXS, DType::kIQ3_S,
                               DType::kIQ2_S,  DType::kIQ1_S,   DType::kIQ4_NL,  DType::kIQ4_XS};

std::vector<uint8_t> Quantized(DType wtype, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  const ActQuant aq = ActQuantFor(wtype);
  std::vector<uint8_t> xq(static_cast<size_t>(ActQuantBytes(aq, n)) + 4);
  // Offset 0 of a vector<uint8_t> is suitably aligned for the float scale (operator new).
  QuantizeAct(aq, x.data(), xq.data(), n);
  return xq;
}

int64_t RowBytesOf(DType t, int64_t n) {
  return static_cast<int64_t>(*RowBytes(t, static_cast<uint64_t>(n)));
}

TEST(DotTest, ActQuantMapping) {
  EXPECT_EQ(ActQuantFor(DType::kQ8_0), ActQuant::kQ8_0);
  EXPECT_EQ(ActQuantFor(DType::kQ2_K), ActQuant::kQ8_K);
  EXPECT_EQ(ActQuantFor(DType::kQ4_K), ActQuant::kQ8_K);
  EXPECT_EQ(ActQuantFor(DType::kIQ2_XXS), ActQuant::kQ8_K);
  EXPECT_EQ(ActQuantFor(DType::kQ3_K), ActQuant::kQ8_K);
  EXPECT_EQ(ActQuantFor(DType::kQ5_K), ActQuant::kQ8_K);
  EXPECT_EQ(ActQuantFor(DType::kQ6_K), ActQuant::kQ8_K);
  EXPECT_EQ(ActQuantFor(DType::kMXFP4), ActQuant::kQ8_0);
  EXPECT_EQ(ActQuantFor(DType::kF16), ActQuant::kNone);
  EXPECT_EQ(ActQuantFor(DType::kF32), ActQuant::kNone);
  EXPECT_EQ(ActQuantBytes(ActQuant::kQ8_0, 64), 72);
  EXPECT_EQ(ActQuantBytes(ActQuant::kQ8_0, 40), 72);
  EXPECT_EQ(ActQuantBytes(ActQuant::kQ8_K, 512), 584);
  EXPECT_EQ(ActQuantBytes(ActQuant::kNone, 10), 40);
}

TEST(DotTest, Q8_0KnownValue) {
  BlockQ8_0 w[2];
  BlockQ8_0Act x[2];
  w[0].d = 0x3800;  // 0.5
  w[1].d = 0xbc00;  // -1
  x[0].d = 0.25f;
  x[1].d = 3.0f;
  for (int i = 0; i < 32; ++i) {
    w[0].qs[i] = 2;
    x[0].qs[i] = 3;  // block 0: 0.5 * 0.25 * (32 * 6) = 24
    w[1].qs[i] = static_cast<int8_t>(i % 2 ? -1 : 1);
    x[1].qs[i] = static_cast<int8_t>(i < 16 ? 1 : 0);  // block 1: -1 * 3 * 0 = 0
  }
  x[1].qs[0] = 5;  // block 1: isum = 4 + (8 - 8) = 4 -> -12; total 12
  EXPECT_EQ(DotQ8(DType::kQ8_0, w, x, 64), 12.0f);
  EXPECT_EQ(ref::DotQ8(DType::kQ8_0, w, x, 64), 12.0f);
}

TEST(DotTest, Q2_KKnownValue) {
  // All quants 1, group scale 2, group min 1, d = 1, dmin = 0.5: every weight 2 - 0.5 = 1.5.
  BlockQ2_K w;
  w.d = 0x3c00;
  w.dmin = 0x3800;
  std::memset(w.scales, 0x12, 16);
  std::memset(w.qs, 0x55, 64);
  BlockQ8_K x;
  x.d = 0.5f;
  for (int i = 0; i < 256; ++i) x.qs[i] = static_cast<int8_t>(i % 3 - 1);  // -1, 0, 1, ...
  for (int k = 0; k < 16; ++k) {
    int s = 0;
    for (int i = 0; i < 16; ++i) s += x.qs[16 * k + i];
    x.bsums[k] = static_cast<int16_t>(s);
  }
  // sum of q8 = 85 * 0 + (-1) for the extra element 255 (255 % 3 = 0 -> -1): -1.
  // dot = 1.5 * 0.5 * (-1) = -0.75
  EXPECT_EQ(DotQ8(DType::kQ2_K, &w, &x, 256), -0.75f);
  EXPECT_EQ(ref::DotQ8(DType::kQ2_K, &w, &x, 256), -0.75f);
}

TEST(DotTest, IQ2_XXSKnownValue) {
  // Every word zero: grid 0 (all 8), no signs, ls 0: weight = d * 0.5 * 0.25 * 8 = d.
  BlockIQ2_XXS w;
  std::memset(&w, 0, sizeof(w));
  w.d = 0x4000;  // 2
  BlockQ8_K x;
  std::memset(&x, 0, sizeof(x));
  x.d = 0.25f;
  for (int i = 0; i < 256; ++i) x.qs[i] = 1;
  // 256 * 2 * 0.25 * 1 = 128
  EXPECT_EQ(DotQ8(DType::kIQ2_XXS, &w, &x, 256), 128.0f);
  EXPECT_EQ(ref::DotQ8(DType::kIQ2_XXS, &w, &x, 256), 128.0f);
}

TEST(DotTest, F16DotIsSequentialFp32) {
  // 1e8 + 1 + ... : a sequential fp32 sum loses the small terms, a wider one keeps them.
  std::vector<uint16_t> w(16, F32ToF16(1.0f));
  std::vector<float> x(16, 1.0f);
  x[0] = 1e8f;
  const float seq = DotQ8(DType::kF16, w.data(), x.data(), 16);
  EXPECT_EQ(seq, 1e8f);  // each +1 rounds away (ulp of 1e8 is 8)
  EXPECT_EQ(DotF32(DType::kF16, w.data(), x.data(), 16), 1e8f + 16.0f);
}

class DotTypeTest : public ::testing::TestWithParam<DType> {};

TEST_P(DotTypeTest, OptimizedDotQ8MatchesReferenceBitForBit) {
  const DType t = GetParam();
  // Q8_0 rows of 32..224 values exercise the 8-block batches and the block tail.
  for (int64_t n : {32, 224, 256, 512, 4096, 4352}) {
    if (n % GetDTypeInfo(t).block_size != 0) continue;
    const int rows = 8;
    const auto w = RandomRows(t, rows, n, 11 + static_cast<uint32_t>(n));
    const auto x = RandomActivations(n, 7);
    const auto xq = Quantized(t, x);
    for (int r = 0; r < rows; ++r) {
      const uint8_t* row = w.data() + r * RowBytesOf(t, n);
      const float a = DotQ8(t, row, xq.data(), n);
      const float b = ref::DotQ8(t, row, xq.data(), n);
      ASSERT_EQ(FloatBits(a), FloatBits(b))
          << GetDTypeInfo(t).name << " n=" << n << " row " << r << ": " << a << " vs " << b;
    }
  }
}

TEST_P(DotTypeTest, MultiTokenDotQ8MatchesSingleBitForBit) {
  const DType t = GetParam();
  const int64_t n = 1024;
  const auto w = RandomRows(t, 3, n, 51);
  std::vector<std::vector<uint8_t>> xq;
  for (int k = 0; k < internal::kMaxDotTokens; ++k)
    xq.push_back(Quantized(t, RandomActivations(n, 60 + static_cast<uint32_t>(k))));
  for (int r = 0; r < 3; ++r) {
    const uint8_t* row = w.data() + r * RowBytesOf(t, n);
    for (int nt = 1; nt <= internal::kMaxDotTokens; ++nt) {
      const void* ptrs[internal::kMaxDotTokens];
      float out[internal::kMaxDotTokens];
      for (int k = 0; k < nt; ++k) ptrs[k] = xq[static_cast<size_t>(k)].data();
      internal::DotQ8Multi(t, row, ptrs, nt, n, out);
      for (int k = 0; k < nt; ++k)
        ASSERT_EQ(FloatBits(out[k]), FloatBits(ref::DotQ8(t, row, ptrs[k], n)))
            << GetDTypeInfo(t).name << " nt=" << nt << " token " << k;
    }
  }
}

// The GPU kernels' split of the K-quant / IQ dots (quant_lanes.h), on the CPU: the same bits.
class LaneSplitTest : public ::testing::TestWithParam<DType> {};

TEST_P(LaneSplitTest, DotQ8MatchesReferenceBitForBit) {
  const DType t = GetParam();
  ASSERT_TRUE(lanes::HasLanes(t));
  for (int64_t n : {256, 1024, 4096}) {
    const auto w = RandomRows(t, 6, n, 71 + static_cast<uint32_t>(n));
    const auto xq = Quantized(t, RandomActivations(n, 17));
    for (int r = 0; r < 6; ++r) {
      const uint8_t* row = w.data() + r * RowBytesOf(t, n);
      ASSERT_EQ(FloatBits(internal::DotQ8ByLanes(t, row, xq.data(), n)),
                FloatBits(ref::DotQ8(t, row, xq.data(), n)))
          << GetDTypeInfo(t).name << " n=" << n << " row " << r;
    }
  }
}

TEST_P(LaneSplitTest, DequantMatchesDequantizeRowBitForBit) {
  const DType t = GetParam();
  const int64_t n = 2048;
  const auto w = RandomRows(t, 3, n, 91);
  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  for (int r = 0; r < 3; ++r) {
    const uint8_t* row = w.data() + r * RowBytesOf(t, n);
    ASSERT_TRUE(internal::DequantizeRowByLanes(t, row, a.data(), n));
    ASSERT_TRUE(DequantizeRow(t, row, b.data(), n).ok());
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(FloatBits(a[static_cast<size_t>(i)]), FloatBits(b[static_cast<size_t>(i)]))
          << GetDTypeInfo(t).name << " row " << r << " value " << i;
  }
}

// IQ4_NL and MXFP4 are not split for DotQ8 (their fold is per 32-value block), but the GPU's
// embedding rows and fp32-activation products read them through DequantValues8 as eight
// 32-value blocks per 256 values.
TEST(LaneSplitTest, Block32DequantMatchesDequantizeRowBitForBit) {
  const int64_t n = 2048;
  for (DType t : {DType::kIQ4_NL, DType::kMXFP4}) {
    const auto w = RandomRows(t, 2, n, 93);
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    for (int r = 0; r < 2; ++r) {
      const uint8_t* row = w.data() + r * RowBytesOf(t, n);
      ASSERT_TRUE(internal::DequantizeRowByLanes(t, row, a.data(), n));
      ASSERT_TRUE(DequantizeRow(t, row, b.data(), n).ok());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(FloatBits(a[static_cast<size_t>(i)]), FloatBits(b[static_cast<size_t>(i)]))
            << GetDTypeInfo(t).name << " " << i;
    }
    EXPECT_FALSE(lanes::HasLanes(t));
  }
}

INSTANTIATE_TEST_SUITE_P(SplitTypes, LaneSplitTest,
                         ::testing::Values(DType::kQ3_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ2_XS,
                                           DType::kIQ1_M, DType::kIQ3_XXS, DType::kIQ3_S,
                                           DType::kIQ2_S, DType::kIQ1_S, DType::kIQ4_XS),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(GetDTypeInfo(info.param).name);
                         });

TEST_P(DotTypeTest, OptimizedDotF32MatchesReference) {
  const DType t = GetParam();
  for (int64_t n : {256, 4096}) {
    const auto w = RandomRows(t, 4, n, 21 + static_cast<uint32_t>(n));
    const auto x = RandomActivations(n, 9);
    std::vector<float> wd(static_cast<size_t>(n));
    for (int r = 0; r < 4; ++r) {
      const uint8_t* row = w.data() + r * RowBytesOf(t, n);
      ASSERT_TRUE(DequantizeRow(t, row, wd.data(), n).ok());
      double abs_sum = 0;
      for (int64_t i = 0; i < n; ++i) abs_sum += std::fabs((double)wd[i] * x[i]);
      const float a = DotF32(t, row, x.data(), n);
      const float b = ref::DotF32(t, row, x.data(), n);
      EXPECT_NEAR(a, b, 1e-6 * abs_sum) << GetDTypeInfo(t).name << " n=" << n;
    }
  }
}

// DotQ8 against an independent formula: dequantized weights times dequantized activations,
// summed in double. Checks the integer kernels read the blocks as the dequantizers do.
TEST_P(DotTypeTest, DotQ8AgreesWithDequantizedProduct) {
  const DType t = GetParam();
  const int64_t n = 1024;
  const auto w = RandomRows(t, 4, n, 31);
  const auto x = RandomActivations(n, 13);
  const auto xq = Quantized(t, x);
  std::vector<float> xd(static_cast<size_t>(n));
  switch (ActQuantFor(t)) {
    case ActQuant::kNone:
      xd = x;
      break;
    case ActQuant::kQ8_K:
      ASSERT_TRUE(DequantizeRow(DType::kQ8_K, xq.data(), xd.data(), n).ok());
      break;
    case ActQuant::kQ8_0: {
      for (int64_t b = 0; b < n / 32; ++b) {
        BlockQ8_0Act blk;
        std::memcpy(&blk, xq.data() + b * sizeof(blk), sizeof(blk));
        for (int i = 0; i < 32; ++i) xd[b * 32 + i] = blk.d * blk.qs[i];
      }
      break;
    }
  }
  std::vector<float> wd(static_cast<size_t>(n));
  for (int r = 0; r < 4; ++r) {
    const uint8_t* row = w.data() + r * RowBytesOf(t, n);
    ASSERT_TRUE(DequantizeRow(t, row, wd.data(), n).ok());
    double exact = 0, abs_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      exact += (double)wd[i] * xd[i];
      abs_sum += std::fabs((double)wd[i] * xd[i]);
    }
    EXPECT_NEAR(DotQ8(t, row, xq.data(), n), exact, 2e-6 * abs_sum) << GetDTypeInfo(t).name;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DotTypeTest, ::testing::ValuesIn(kAllTypes),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(GetDTypeInfo(info.param).name);
                         });

TEST(DotTest, F32DotMatchesDoublePrecision) {
  for (int64_t n : {7, 64, 1000, 4096, 16384}) {
    const auto w = RandomActivations(n, 41);
    const auto x = RandomActivations(n, 43);
    long double exact = 0, abs_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      exact += (long double)w[i] * x[i];
      abs_sum += std::fabs((long double)w[i] * x[i]);
    }
    const float got = DotF32(DType::kF32, w.data(), x.data(), n);
    // fp32 rounding of the result itself is up to 6e-8 of |exact| <= abs_sum.
    EXPECT_LE(std::fabs((long double)got - exact), 1e-6L * abs_sum) << "n=" << n;
  }
}

TEST(DotTest, EightRowDotQ8MatchesSingleBitForBit) {
  for (DType t : {DType::kF16, DType::kBF16}) {
    if (!internal::HasDotQ8Rows8(t)) GTEST_SKIP() << "no 8-row kernels in this build";
    for (int64_t n : {8, 100, 4096}) {
      const auto w = RandomRows(t, 8, n, 71);
      const auto x = RandomActivations(n, 72);
      const int64_t rb = RowBytesOf(t, n);
      float out[8];
      internal::DotQ8Rows8(t, w.data(), rb, x.data(), n, out);
      for (int r = 0; r < 8; ++r)
        ASSERT_EQ(FloatBits(out[r]), FloatBits(ref::DotQ8(t, w.data() + r * rb, x.data(), n)))
            << GetDTypeInfo(t).name << " n=" << n << " row " << r;
    }
  }
}

TEST(DotTest, UnsupportedTypeGivesNaN) {
  uint8_t w[64] = {};
  float x[32] = {};
  EXPECT_TRUE(std::isnan(DotF32(DType::kQ5_0, w, x, 32)));
  EXPECT_TRUE(std::isnan(DotQ8(DType::kQ5_0, w, x, 32)));
}

}  // namespace
}  // namespace flashkv
