// The block types of llama.cpp's and ds4's 0731 files (Q3_K, Q5_K, Q6_K, MXFP4, IQ2_XS, IQ1_M,
// IQ3_XXS, IQ3_S, IQ2_S, IQ1_S, IQ4_NL, IQ4_XS):
// DequantizeRow against references written here from the public format definitions (ggml-common.h's
// block layouts, the OCP MX spec's E2M1/E8M0), one value at a time by its index, so a misread of
// the packing in the kernels cannot hide behind the same misread in a shared helper.
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/dot.h"
#include "tensor/dot_ref.h"
#include "tensor/half.h"
#include "tensor/iq1_tables.h"
#include "tensor/iq2_tables.h"
#include "tensor/iq3_tables.h"
#include "tensor/quant.h"
#include "test_blocks.h"

namespace flashkv {
namespace {

using testing::PutHalf;
using testing::RandomRows;

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}

// OCP E2M1: sign bit 3, exponent bits 2..1 (bias 1), mantissa bit 0; exponent 0 is subnormal.
double E2M1(int nibble) {
  const int exp = (nibble >> 1) & 3, man = nibble & 1;
  const double mag = exp == 0 ? 0.5 * man : (1.0 + 0.5 * man) * std::ldexp(1.0, exp - 1);
  return nibble & 8 ? -mag : mag;
}

float SpecMXFP4(const uint8_t* blk, int i) {
  const uint8_t byte = blk[1 + i % 16];
  const int nibble = i < 16 ? byte & 15 : byte >> 4;
  // + 0.0 turns E2M1's -0 (nibble 8) into +0, as GGML's integer table does.
  return static_cast<float>(E2M1(nibble) * std::ldexp(1.0, blk[0] - 127) + 0.0);
}

// 6-bit scale/min of group g of a Q4_K/Q5_K block, straight from the packing rule.
void KScaleMin(const uint8_t* s, int g, int* sc, int* mn) {
  if (g < 4) {
    *sc = s[g] & 0x3f;
    *mn = s[g + 4] & 0x3f;
  } else {
    *sc = (s[g + 4] & 0x0f) | ((s[g - 4] >> 6) << 4);
    *mn = (s[g + 4] >> 4) | ((s[g] >> 6) << 4);
  }
}

float SpecQ5_K(const uint8_t* blk, int i) {
  const int p = i / 64, half = (i % 64) / 32, l = i % 32;
  const uint8_t* qh = blk + 16;
  const uint8_t* qs = blk + 48;
  const int q = ((qs[32 * p + l] >> (4 * half)) & 15) + 16 * ((qh[l] >> (2 * p + half)) & 1);
  int sc, mn;
  KScaleMin(blk + 4, i / 32, &sc, &mn);
  return Half(blk) * static_cast<float>(sc) * static_cast<float>(q) -
         Half(blk + 2) * static_cast<float>(mn);
}

float SpecQ6_K(const uint8_t* blk, int i) {
  const int h = i / 128, k = (i % 128) / 32, l = i % 32;
  const uint8_t lo = (blk[64 * h + l + 32 * (k & 1)] >> (4 * (k >> 1))) & 15;
  const uint8_t hi = (blk[128 + 32 * h + l] >> (2 * k)) & 3;
  const int q = (lo | (hi << 4)) - 32;
  const int8_t sc = static_cast<int8_t>(blk[192 + i / 16]);
  return Half(blk + 208) * static_cast<float>(sc) * static_cast<float>(q);
}

float SpecQ3_K(const uint8_t* blk, int i) {
  const int h = i / 128, s = (i % 128) / 32, l = i % 32, g = i / 16;
  const uint8_t* scales = blk + 96;
  const int lo4 = (scales[g % 8] >> (g < 8 ? 0 : 4)) & 15;
  const int hi2 = (scales[8 + g % 4] >> (2 * (g / 4))) & 3;
  const int sc = (lo4 | (hi2 << 4)) - 32;
  const int q = ((blk[32 + 32 * h + l] >> (2 * s)) & 3) - ((blk[l] >> (4 * h + s)) & 1 ? 0 : 4);
  return Half(blk + 108) * static_cast<float>(sc) * static_cast<float>(q);
}

uint16_t U16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

// ggml-common.h block_iq2_xs: d, qs[32] (9-bit grid index, 7-bit sign index), scales[8].
float SpecIQ2_XS(const uint8_t* blk, int i) {
  const uint16_t q = U16(blk + 2 + 2 * (i / 8));
  const uint8_t mag = static_cast<uint8_t>(kIq2xsGrid[q & 511] >> (8 * (i % 8)));
  const unsigned sign7 = q >> 9;
  // ksigns_iq2xs: 7 stored sign bits, the 8th makes the count even.
  const unsigned sign8 = sign7 | ((__builtin_popcount(sign7) & 1) << 7);
  const int ls = (blk[66 + i / 32] >> (i % 32 < 16 ? 0 : 4)) & 15;
  const float db = Half(blk) * (0.5f + static_cast<float>(ls)) * 0.25f;
  return db * static_cast<float>(mag) * ((sign8 >> (i % 8)) & 1 ? -1.0f : 1.0f);
}

// ggml-common.h block_iq1_m: qs[32] (index low 8 bits), qh[16] (two nibbles: index high 3
// bits + shift sign), scales[8] (4 u16 words: 3-bit scales, the f16 in their top nibbles).
float SpecIQ1_M(const uint8_t* blk, int i) {
  const int run = i / 8, g = i / 32;
  const uint16_t w[4] = {U16(blk + 48), U16(blk + 50), U16(blk + 52), U16(blk + 54)};
  const uint16_t f16 = static_cast<uint16_t>((w[0] >> 12) | ((w[1] >> 12) << 4) |
                                             ((w[2] >> 12) << 8) | ((w[3] >> 12) << 12));
  const int nib = (blk[32 + run / 2] >> (run % 2 ? 4 : 0)) & 15;
  const int idx = blk[run] | ((nib & 7) << 8);
  const auto v = static_cast<int8_t>(kIq1sGrid[idx] >> (8 * (i % 8)));
  const int s = (w[g / 2] >> (6 * (g % 2) + (i % 32 < 16 ? 0 : 3))) & 7;
  const float dl = F16ToF32(f16) * static_cast<float>(2 * s + 1);
  return dl * (static_cast<float>(v) + (nib & 8 ? -0.125f : 0.125f));
}

uint32_t U32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0] | (p[1] << 8) | (p[2] << 16)) | (uint32_t{p[3]} << 24);
}
// ksigns_iq2xs: 7 stored sign bits, the 8th makes the count even.
unsigned Signs8(unsigned s7) {
  return s7 | ((__builtin_popcount(s7) & 1) << 7);
}
float Signed(float v, unsigned signs, int j) {
  return (signs >> j) & 1 ? -v : v;
}
// GGML's kvalues_iq4nl.
constexpr int kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                            1,    13,   25,  38,  53,  69,  89,  113};

// ggml-common.h block_iq3_xxs: d, qs[64] (one grid byte per 4 values), 8 u32 words (4 x 7 sign
// bits, 4-bit scale on top).
float SpecIQ3_XXS(const uint8_t* blk, int i) {
  const int run = i / 8, g = i / 32;
  const uint32_t w = U32(blk + 66 + 4 * g);
  const uint32_t grid = kIq3xxsGrid[blk[2 + 2 * run + (i % 8) / 4]];
  const auto mag = static_cast<float>((grid >> (8 * (i % 4))) & 0xff);
  const float db = Half(blk) * (0.5f + static_cast<float>(w >> 28)) * 0.5f;
  return Signed(db * mag, Signs8((w >> (7 * (run % 4))) & 127), i % 8);
}

// block_iq3_s: d, qs[64], qh[8] (the 9th index bit of each 4 values), signs[32], scales[4].
float SpecIQ3_S(const uint8_t* blk, int i) {
  const int run = i / 8, g = i / 32, half = (i % 8) / 4;
  const int hi = (blk[66 + g] >> (2 * (run % 4) + half)) & 1;
  const uint32_t grid = kIq3sGrid[blk[2 + 2 * run + half] | (hi << 8)];
  const auto mag = static_cast<float>((grid >> (8 * (i % 4))) & 0xff);
  const int s = (blk[106 + g / 2] >> (g % 2 ? 4 : 0)) & 15;
  const float db = Half(blk) * static_cast<float>(1 + 2 * s);
  return Signed(db * mag, blk[74 + run], i % 8);
}

// block_iq2_s: d, qs[64] (32 grid bytes, 32 sign bytes), qh[8] (2 index bits per 8 values),
// scales[8] (two 4-bit scales per 32).
float SpecIQ2_S(const uint8_t* blk, int i) {
  const int run = i / 8, g = i / 32;
  const int idx = blk[2 + run] | (((blk[66 + g] >> (2 * (run % 4))) & 3) << 8);
  const auto mag = static_cast<float>((kIq2sGrid[idx] >> (8 * (i % 8))) & 0xff);
  const int ls = (blk[74 + g] >> (i % 32 < 16 ? 0 : 4)) & 15;
  const float db = Half(blk) * (0.5f + static_cast<float>(ls)) * 0.25f;
  return Signed(db * mag, blk[34 + run], i % 8);
}

// block_iq1_s: d, qs[32], qh[8] u16 (3 index bits per 8 values, 3-bit scale, shift sign).
float SpecIQ1_S(const uint8_t* blk, int i) {
  const int run = i / 8, g = i / 32;
  const uint16_t qh = U16(blk + 34 + 2 * g);
  const int idx = blk[2 + run] | (((qh >> (3 * (run % 4))) & 7) << 8);
  const auto v = static_cast<int8_t>(kIq1sGrid[idx] >> (8 * (i % 8)));
  const float dl = Half(blk) * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
  return dl * (static_cast<float>(v) + (qh & 0x8000 ? -0.125f : 0.125f));
}

// block_iq4_nl: d, qs[16] (value j low nibble of byte j, value j + 16 high nibble).
float SpecIQ4_NL(const uint8_t* blk, int i) {
  const int nib = i < 16 ? blk[2 + i] & 15 : blk[2 + i - 16] >> 4;
  return Half(blk) * static_cast<float>(kIq4nl[nib]);
}

// block_iq4_xs: d, scales_h (2 high scale bits per 32), scales_l[4] (4 low bits), qs[128].
float SpecIQ4_XS(const uint8_t* blk, int i) {
  const int g = i / 32, j = i % 32;
  const int lo = (blk[4 + g / 2] >> (g % 2 ? 4 : 0)) & 15;
  const int hi = (U16(blk + 2) >> (2 * g)) & 3;
  const uint8_t q = blk[8 + 16 * g + j % 16];
  const int nib = j < 16 ? q & 15 : q >> 4;
  const float dl = Half(blk) * static_cast<float>((lo | (hi << 4)) - 32);
  return dl * static_cast<float>(kIq4nl[nib]);
}

using SpecFn = float (*)(const uint8_t*, int);

struct SpecCase {
  DType type;
  SpecFn spec;
};

class FormatSpecTest : public ::testing::TestWithParam<SpecCase> {};

TEST_P(FormatSpecTest, DequantizeMatchesThePublicDefinitionBitForBit) {
  const auto [t, spec] = GetParam();
  const DTypeInfo& info = GetDTypeInfo(t);
  const int64_t n = 4 * 256;
  const auto w = RandomRows(t, 3, n, 97);
  std::vector<float> out(static_cast<size_t>(n));
  for (int r = 0; r < 3; ++r) {
    const uint8_t* row = w.data() + r * (n / info.block_size) * info.block_bytes;
    ASSERT_TRUE(DequantizeRow(t, row, out.data(), n).ok());
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* blk = row + (i / info.block_size) * info.block_bytes;
      const float want = spec(blk, static_cast<int>(i % info.block_size));
      ASSERT_EQ(Bits(out[static_cast<size_t>(i)]), Bits(want))
          << info.name << " row " << r << " value " << i << ": " << out[static_cast<size_t>(i)]
          << " vs " << want;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, FormatSpecTest,
    ::testing::Values(SpecCase{DType::kMXFP4, SpecMXFP4}, SpecCase{DType::kQ3_K, SpecQ3_K},
                      SpecCase{DType::kQ5_K, SpecQ5_K}, SpecCase{DType::kQ6_K, SpecQ6_K},
                      SpecCase{DType::kIQ2_XS, SpecIQ2_XS}, SpecCase{DType::kIQ1_M, SpecIQ1_M},
                      SpecCase{DType::kIQ3_XXS, SpecIQ3_XXS}, SpecCase{DType::kIQ3_S, SpecIQ3_S},
                      SpecCase{DType::kIQ2_S, SpecIQ2_S}, SpecCase{DType::kIQ1_S, SpecIQ1_S},
                      SpecCase{DType::kIQ4_NL, SpecIQ4_NL}, SpecCase{DType::kIQ4_XS, SpecIQ4_XS}),
    [](const ::testing::TestParamInfo<SpecCase>& info) {
      return std::string(GetDTypeInfo(info.param.type).name);
    });

TEST(FormatsTest, MXFP4EveryScaleAndNibble) {
  // e = 255 is left out: OCP makes it NaN, GGML reads it as 2^128 (docs/GGUF.md).
  for (int e = 0; e < 255; ++e) {
    uint8_t blk[17];
    blk[0] = static_cast<uint8_t>(e);
    for (int j = 0; j < 16; ++j) blk[1 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    float out[32];
    ASSERT_TRUE(DequantizeRow(DType::kMXFP4, blk, out, 32).ok());
    for (int i = 0; i < 32; ++i)
      ASSERT_EQ(Bits(out[i]), Bits(SpecMXFP4(blk, i))) << "e=" << e << " value " << i;
  }
}

TEST(FormatsTest, MXFP4KnownValues) {
  uint8_t blk[17] = {};
  blk[0] = 127;   // scale 1
  blk[1] = 0x71;  // value 0: nibble 1 (+0.5), value 16: nibble 7 (+6)
  blk[2] = 0xf9;  // value 1: nibble 9 (-0.5), value 17: nibble 15 (-6)
  blk[3] = 0x5c;  // value 2: nibble 12 (-2), value 18: nibble 5 (+3)
  float out[32];
  ASSERT_TRUE(DequantizeRow(DType::kMXFP4, blk, out, 32).ok());
  EXPECT_EQ(out[0], 0.5f);
  EXPECT_EQ(out[16], 6.0f);
  EXPECT_EQ(out[1], -0.5f);
  EXPECT_EQ(out[17], -6.0f);
  EXPECT_EQ(out[2], -2.0f);
  EXPECT_EQ(out[18], 3.0f);
  EXPECT_EQ(out[3], 0.0f);
  blk[0] = 130;  // scale 8
  ASSERT_TRUE(DequantizeRow(DType::kMXFP4, blk, out, 32).ok());
  EXPECT_EQ(out[16], 48.0f);
}

TEST(FormatsTest, MXFP4DotQ8KnownValue) {
  // Two blocks of scale 2^-1 and 2^2; activations quantize exactly (amax 127 -> d = 1).
  uint8_t w[34] = {};
  w[0] = 126;
  w[17] = 129;
  for (int j = 0; j < 16; ++j) w[1 + j] = w[18 + j] = 0x22;  // every value is nibble 2 (+1)
  std::vector<float> x(64, 0.0f);
  x[0] = 127.0f;
  x[5] = -3.0f;
  x[32] = 127.0f;
  x[40] = 10.0f;
  std::vector<uint8_t> xq(static_cast<size_t>(ActQuantBytes(ActQuant::kQ8_0, 64)));
  QuantizeAct(ActQuant::kQ8_0, x.data(), xq.data(), 64);
  // 0.5 * (127 - 3) + 4 * (127 + 10) = 62 + 548.
  EXPECT_EQ(DotQ8(DType::kMXFP4, w, xq.data(), 64), 610.0f);
  EXPECT_EQ(ref::DotQ8(DType::kMXFP4, w, xq.data(), 64), 610.0f);
  EXPECT_EQ(DotF32(DType::kMXFP4, w, x.data(), 64), 610.0f);
}

TEST(FormatsTest, Q6_KKnownValue) {
  uint8_t blk[210] = {};
  PutHalf(blk + 208, 0.5f);
  blk[192] = 2;     // group 0 scale
  blk[0] = 0x0f;    // value 0 low nibble 15
  blk[128] = 0x01;  // value 0 high bits 1 -> q = 31 - 32 = -1
  float out[256];
  ASSERT_TRUE(DequantizeRow(DType::kQ6_K, blk, out, 256).ok());
  EXPECT_EQ(out[0], -1.0f);  // 0.5 * 2 * -1
  EXPECT_EQ(out[64], 0.0f);  // group 4 scale 0
  blk[196] = -3;             // group 4 (values 64..79): q = 0 - 32
  ASSERT_TRUE(DequantizeRow(DType::kQ6_K, blk, out, 256).ok());
  EXPECT_EQ(out[64], 48.0f);  // 0.5 * -3 * -32
}

TEST(FormatsTest, Q3_KKnownValue) {
  uint8_t blk[110] = {};
  PutHalf(blk + 108, 1.0f);
  // Group 0 scale 33 (stored 1 + 32: low nibble 1, top bits 2 -> 0b10 in scales[8] bits 0..1).
  blk[96] = 0x01;
  blk[104] = 0x02;
  blk[32] = 0x03;  // value 0: q = 3, high bit clear -> 3 - 4 = -1
  blk[0] = 0x00;
  float out[256];
  ASSERT_TRUE(DequantizeRow(DType::kQ3_K, blk, out, 256).ok());
  EXPECT_EQ(out[0], -1.0f);
  blk[0] = 0x01;  // high bit set -> q = 3
  ASSERT_TRUE(DequantizeRow(DType::kQ3_K, blk, out, 256).ok());
  EXPECT_EQ(out[0], 3.0f);
}

TEST(FormatsTest, Q5_KKnownValue) {
  uint8_t blk[176] = {};
  PutHalf(blk, 1.0f);
  PutHalf(blk + 2, 0.25f);
  blk[4] = 2;      // group 0 scale 2
  blk[8] = 4;      // group 0 min 4
  blk[48] = 0x07;  // value 0 low nibble 7
  blk[16] = 0x01;  // value 0 fifth bit
  float out[256];
  ASSERT_TRUE(DequantizeRow(DType::kQ5_K, blk, out, 256).ok());
  EXPECT_EQ(out[0], 2.0f * 23.0f - 1.0f);
}

TEST(FormatsTest, IQ2_XSKnownValue) {
  uint8_t blk[74] = {};
  PutHalf(blk, 2.0f);
  blk[2] = 0x01;   // word 0: grid 1 (0x080808080808082b: value 0 is 43) ...
  blk[3] = 0x02;   // ... sign index 1 (mask 129: values 0 and 7 negated)
  blk[66] = 0x53;  // group 0: scale 3 for values 0..15, 5 for 16..31
  float out[256];
  ASSERT_TRUE(DequantizeRow(DType::kIQ2_XS, blk, out, 256).ok());
  EXPECT_EQ(out[0], -2.0f * 3.5f * 0.25f * 43.0f);
  EXPECT_EQ(out[7], -2.0f * 3.5f * 0.25f * 8.0f);
  EXPECT_EQ(out[1], 2.0f * 3.5f * 0.25f * 8.0f);
  EXPECT_EQ(out[16], 2.0f * 5.5f * 0.25f * 8.0f);  // word 2 = 0: grid 0, no signs
}

TEST(FormatsTest, IQ1_MKnownValue) {
  uint8_t blk[56] = {};
  // Scale f16 0x4000 (2.0): nibbles 0, 0, 0, 4 in the top of words 0..3.
  blk[55] = 0x40;
  blk[48] = 0x02 | (0x5 << 3);  // group 0: s1 = 2 (x5), s2 = 5 (x11)
  blk[0] = 0x00;                // run 0: grid 0 = all -1
  blk[32] = 0x08;               // run 0 shift negative, run 1 positive (grid 0 too)
  blk[2] = 0xff;                // run 2: index 0xff | (qh[1] & 7) << 8
  blk[33] = 0x01;               //   = 0x1ff, positive shift
  float out[256];
  ASSERT_TRUE(DequantizeRow(DType::kIQ1_M, blk, out, 256).ok());
  EXPECT_EQ(out[0], 2.0f * 5.0f * (-1.0f - 0.125f));
  EXPECT_EQ(out[8], 2.0f * 5.0f * (-1.0f + 0.125f));
  const auto v = static_cast<int8_t>(kIq1sGrid[0x1ff] & 0xff);
  EXPECT_EQ(out[16], 2.0f * 11.0f * (static_cast<float>(v) + 0.125f));
}

TEST(FormatsTest, IQ4_XSKnownValue) {
  uint8_t blk[136] = {};
  PutHalf(blk, 0.5f);
  blk[2] = 0x02;  // scales_h: group 0 high bits 2 -> ls = 0x20 | low
  blk[4] = 0x05;  // group 0 low bits 5: ls = 37, ls - 32 = 5
  blk[8] = 0xf0;  // value 0: index 0 (-127), value 16: index 15 (113)
  float out[256];
  ASSERT_TRUE(DequantizeRow(DType::kIQ4_XS, blk, out, 256).ok());
  EXPECT_EQ(out[0], 0.5f * 5.0f * -127.0f);
  EXPECT_EQ(out[16], 0.5f * 5.0f * 113.0f);
  EXPECT_EQ(out[32], 0.5f * -32.0f * -127.0f);  // group 1: ls = 0
}

TEST(FormatsTest, IQ3_XXSKnownValue) {
  uint8_t blk[98] = {};
  PutHalf(blk, 2.0f);
  blk[2] = 1;      // values 0..3: kIq3xxsGrid[1]
  blk[66] = 0x01;  // signs of run 0: index 1 -> mask 0x81 (values 0 and 7 negated)
  blk[69] = 0x30;  // group 0 scale ls = 3
  float out[256];
  ASSERT_TRUE(DequantizeRow(DType::kIQ3_XXS, blk, out, 256).ok());
  const float db = 2.0f * 3.5f * 0.5f;
  EXPECT_EQ(out[0], -db * static_cast<float>(kIq3xxsGrid[1] & 0xff));
  EXPECT_EQ(out[1], db * static_cast<float>((kIq3xxsGrid[1] >> 8) & 0xff));
  EXPECT_EQ(out[7], -db * static_cast<float>(kIq3xxsGrid[0] >> 24));
}

TEST(FormatsTest, TypesWithoutKernelsAreRefusedByName) {
  uint8_t blk[98] = {};
  float out[256];
  const Status s = DequantizeRow(DType::kTQ1_0, blk, out, 256);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("tq1_0"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace flashkv
