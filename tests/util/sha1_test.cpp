#include "util/sha1.h"

#include <string>

#include <gtest/gtest.h>

namespace flashkv {
namespace {

// FIPS 180 test vectors.
TEST(Sha1Test, StandardVectors) {
  EXPECT_EQ(Sha1Hex(Sha1Of("abc")), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(Sha1Hex(Sha1Of("")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  EXPECT_EQ(Sha1Hex(Sha1Of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
}

TEST(Sha1Test, IncrementalEqualsOneShotAndResets) {
  Sha1 h;
  h.Update("ab");
  h.Update("c");
  EXPECT_EQ(Sha1Hex(h.Final()), "a9993e364706816aba3e25717850c26c9cd0d89d");
  h.Update("abc");  // Final() reset the state
  EXPECT_EQ(Sha1Hex(h.Final()), "a9993e364706816aba3e25717850c26c9cd0d89d");
}

TEST(Sha1Test, PeekGivesEveryPrefixDigestWithoutResetting) {
  Sha1 h;
  h.Update("a");
  EXPECT_EQ(h.Peek(), Sha1Of("a"));
  h.Update("bc");
  EXPECT_EQ(Sha1Hex(h.Peek()), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(Sha1Hex(h.Final()), "a9993e364706816aba3e25717850c26c9cd0d89d");
}

TEST(Sha1Test, HexRoundTripAndRejects) {
  Sha1Digest d;
  ASSERT_TRUE(ParseSha1Hex("A9993E364706816ABA3E25717850C26C9CD0D89D", &d));
  EXPECT_EQ(Sha1Hex(d), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_FALSE(ParseSha1Hex("a9993e364706816aba3e25717850c26c9cd0d89", &d));   // 39
  EXPECT_FALSE(ParseSha1Hex("g9993e364706816aba3e25717850c26c9cd0d89d", &d));  // not hex
}

}  // namespace
}  // namespace flashkv
