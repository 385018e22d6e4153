#include "tensor/iq2_tables.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace flashkv
