#include "tensor/iq2_tables.h"

#include <gtest/gtest.h>

#include "tensor/iq1_tables.h"
#include "tensor/iq3_tables.h"

namespace flashkv {
namespace {

TEST(Iq2TablesTest, SignsHaveEvenParity) {
  // GGML's ksigns_iq2xs starts 0, 129, 130, 3, 132, 5, 6, 135 and ends 126, 255.
  const uint8_t head[8] = {0, 129, 130, 3, 132, 5, 6, 135};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(kIq2Signs[i], head[i]) << i;
  EXPECT_EQ(kIq2Signs[126], 126);
  EXPECT_EQ(kIq2Signs[127], 255);
  for (int i = 0; i < 128; ++i) {
    EXPECT_EQ(kIq2Signs[i] & 127, i);
    EXPECT_EQ(__builtin_popcount(kIq2Signs[i]) % 2, 0) << i;
  }
}

TEST(Iq2TablesTest, GridIsGgmlCodebook) {
  EXPECT_EQ(kIq2xxsGrid[0], 0x0808080808080808ull);
  EXPECT_EQ(kIq2xxsGrid[1], 0x080808080808082bull);
  EXPECT_EQ(kIq2xxsGrid[128], 0x082b2b0808082b08ull);
  EXPECT_EQ(kIq2xxsGrid[255], 0x2b2b2b1908081908ull);
  for (int i = 0; i < 256; ++i) {
    if (i > 0) {
      EXPECT_LT(kIq2xxsGrid[i - 1], kIq2xxsGrid[i]) << i;  // ascending, distinct
    }
    for (int j = 0; j < 8; ++j) {
      const unsigned b = (kIq2xxsGrid[i] >> (8 * j)) & 0xff;
      EXPECT_TRUE(b == 8 || b == 25 || b == 43) << i << " byte " << j;
    }
  }
}

// FNV-1a 64 of a table's little-endian bytes; the pinned values are those of GGML's
// ggml-common.h tables (scripts/gen_iq_grids.py prints them), so a transcription slip fails.
uint64_t Fnv1a64(const uint64_t* t, int n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < n; ++i)
    for (int b = 0; b < 8; ++b) h = (h ^ ((t[i] >> (8 * b)) & 0xff)) * 0x100000001b3ull;
  return h;
}

TEST(Iq2TablesTest, GridsMatchGgmlChecksums) {
  EXPECT_EQ(Fnv1a64(kIq2xxsGrid, 256), 0xbb4ee025b5ac6e8eull);
  EXPECT_EQ(Fnv1a64(kIq2xsGrid, 512), 0xc9b1ee61e79909bdull);
  EXPECT_EQ(Fnv1a64(kIq1sGrid, 2048), 0x6703ed863501ae2eull);
  EXPECT_EQ(Fnv1a64(kIq2sGrid, 1024), 0x123edd38a3b62b90ull);
}

uint64_t Fnv1a64U32(const uint32_t* t, int n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < n; ++i)
    for (int b = 0; b < 4; ++b) h = (h ^ ((t[i] >> (8 * b)) & 0xff)) * 0x100000001b3ull;
  return h;
}

TEST(Iq2TablesTest, Iq3GridsMatchGgmlChecksumsAndValueSets) {
  EXPECT_EQ(Fnv1a64U32(kIq3xxsGrid, 256), 0xdfa5dc83d6a155d5ull);
  EXPECT_EQ(Fnv1a64U32(kIq3sGrid, 512), 0xfa37020c25b44829ull);
  for (int i = 0; i < 256; ++i)
    for (int j = 0; j < 4; ++j) {
      const unsigned b = (kIq3xxsGrid[i] >> (8 * j)) & 0xff;
      EXPECT_TRUE(b == 62 || (b % 8 == 4 && b <= 52)) << i << " byte " << j;
    }
  for (int i = 0; i < 512; ++i)
    for (int j = 0; j < 4; ++j) {
      const unsigned b = (kIq3sGrid[i] >> (8 * j)) & 0xff;
      EXPECT_TRUE(b % 2 == 1 && b <= 15) << i << " byte " << j;
    }
  for (int i = 0; i < 1024; ++i)
    for (int j = 0; j < 8; ++j) {
      const unsigned b = (kIq2sGrid[i] >> (8 * j)) & 0xff;
      EXPECT_TRUE(b == 8 || b == 25 || b == 43) << i << " byte " << j;
    }
}

TEST(Iq2TablesTest, Iq2xsAndIq1sGridsHaveTheirValueSets) {
  for (int i = 0; i < 512; ++i) {
    if (i > 0) {
      EXPECT_LT(kIq2xsGrid[i - 1], kIq2xsGrid[i]) << i;
    }
    for (int j = 0; j < 8; ++j) {
      const unsigned b = (kIq2xsGrid[i] >> (8 * j)) & 0xff;
      EXPECT_TRUE(b == 8 || b == 25 || b == 43) << i << " byte " << j;
    }
  }
  for (int i = 0; i < 2048; ++i) {
    for (int j = 0; j < 8; ++j) {
      const unsigned b = (kIq1sGrid[i] >> (8 * j)) & 0xff;
      EXPECT_TRUE(b == 0xff || b == 0 || b == 1) << i << " byte " << j;
    }
  }
  EXPECT_EQ(kIq1sGrid[0], 0xffffffffffffffffull);
  EXPECT_EQ(kIq1sGrid[2047], 0x0101010101010101ull);
}

}  // namespace
}  // namespace flashkv
