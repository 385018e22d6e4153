#include "util/crc32c.h"

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace flashkv {
namespace {

// RFC 3720 B.4 and the common check value.
TEST(Crc32cTest, StandardVectors) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32cPortable(0, "123456789", 9), 0xE3069283u);
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF), inc(32), dec(32);
  for (int i = 0; i < 32; ++i) {
    inc[i] = uint8_t(i);
    dec[i] = uint8_t(31 - i);
  }
  for (auto fn : {&Crc32c, &Crc32cPortable}) {
    EXPECT_EQ(fn(0, zeros.data(), 32), 0x8A9136AAu);
    EXPECT_EQ(fn(0, ones.data(), 32), 0x62A8AB43u);
    EXPECT_EQ(fn(0, inc.data(), 32), 0x46DD794Eu);
    EXPECT_EQ(fn(0, dec.data(), 32), 0x113FDB5Cu);
  }
  EXPECT_EQ(Crc32c(""), 0u);
}

// Both paths agree at every length and alignment, and chaining equals one call.
TEST(Crc32cTest, PathsAgreeAndChain) {
  std::vector<uint8_t> buf(1000);
  uint32_t x = 12345;
  for (auto& b : buf) {
    x = x * 1103515245u + 12345u;
    b = uint8_t(x >> 16);
  }
  for (size_t off = 0; off < 9; ++off) {
    for (size_t n = 0; n + off <= buf.size(); n += 37) {
      const uint32_t a = Crc32c(0, buf.data() + off, n);
      EXPECT_EQ(a, Crc32cPortable(0, buf.data() + off, n)) << off << " " << n;
      const size_t cut = n / 3;
      EXPECT_EQ(Crc32c(Crc32c(0, buf.data() + off, cut), buf.data() + off + cut, n - cut), a);
    }
  }
}

}  // namespace
}  // namespace flashkv
