#include "util/json_depth.h"

#include <string>

#include <gtest/gtest.h>

namespace flashkv {
namespace {

std::string Nested(int depth, char open = '[', char close = ']') {
  return std::string(size_t(depth), open) + std::string(size_t(depth), close);
}

TEST(JsonDepthTest, CountsArraysAndObjectsUpToTheLimit) {
  EXPECT_TRUE(JsonDepthWithin("", 0));
  EXPECT_TRUE(JsonDepthWithin("1", 0));
  EXPECT_FALSE(JsonDepthWithin("[]", 0));
  EXPECT_TRUE(JsonDepthWithin(Nested(256)));
  EXPECT_FALSE(JsonDepthWithin(Nested(257)));
  EXPECT_TRUE(JsonDepthWithin(R"({"a":[{"b":[]}]})", 4));
  EXPECT_FALSE(JsonDepthWithin(R"({"a":[{"b":[]}]})", 3));
  // Siblings do not add up.
  EXPECT_TRUE(JsonDepthWithin("[[],[],[[]]]", 3));
}

TEST(JsonDepthTest, BracketsInStringsDoNotCount) {
  EXPECT_TRUE(JsonDepthWithin(R"(["[[[[", "{{{{"])", 1));
  // An escaped quote does not end the string; an escaped backslash does not escape it.
  EXPECT_TRUE(JsonDepthWithin(R"(["\"[[[", 1])", 1));
  EXPECT_FALSE(JsonDepthWithin(R"(["\\", [[]]])", 2));
}

TEST(JsonDepthTest, TextThatIsNotJsonIsMeasuredAsWritten) {
  EXPECT_FALSE(JsonDepthWithin(std::string(300, '[')));
  EXPECT_TRUE(JsonDepthWithin(std::string(300, ']')));
  // Leading closers must not buy headroom for the openers after them.
  EXPECT_FALSE(JsonDepthWithin(std::string(1000, ']') + std::string(300, '{')));
}

TEST(JsonDepthTest, AMillionLevelsAreScannedWithoutRecursion) {
  EXPECT_FALSE(JsonDepthWithin(Nested(1000000)));
  EXPECT_FALSE(JsonDepthWithin(Nested(1000000, '{', '}')));
  EXPECT_TRUE(JsonDepthWithin(Nested(1000000), 1000000));
}

}  // namespace
}  // namespace flashkv
