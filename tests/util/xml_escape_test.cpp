#include "util/xml_escape.h"

#include <gtest/gtest.h>

namespace flashkv {
namespace {

TEST(XmlEscapeTest, EscapesTheFourSpecialCharactersOnly) {
  EXPECT_EQ(EscapeXml(R"(a<b & "c">d)"), "a&lt;b &amp; &quot;c&quot;&gt;d");
  EXPECT_EQ(EscapeXml("it's ünïcode\n\t"), "it's ünïcode\n\t");
  EXPECT_EQ(EscapeXml("&amp;"), "&amp;amp;");
  EXPECT_EQ(EscapeXml(""), "");
  EXPECT_EQ(EscapeXml(std::string_view("a\0b", 3)), std::string("a\0b", 3));
}

}  // namespace
}  // namespace flashkv
