#include "server/json_util.h"

#include <gtest/gtest.h>

namespace flashkv {
namespace {

TEST(JsonUtilTest, ParsesObjectsAndExplainsWhatIsWrong) {
  auto ok = ParseJsonObject(R"({"a": [1, {"b": "c"}]})");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)["a"][1]["b"], "c");

  auto bad = ParseJsonObject(R"({"a": )");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("invalid JSON body: parse error at line 1, column 7"),
            std::string::npos)
      << bad.status().message();

  auto array = ParseJsonObject("[1, 2]");
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().message(), "request body must be a JSON object, not array");

  // Invalid UTF-8 inside a string is refused, not passed on to the renderer.
  auto utf8 = ParseJsonObject("{\"a\": \"\xff\xfe\"}");
  ASSERT_FALSE(utf8.ok());
  EXPECT_NE(utf8.status().message().find("invalid"), std::string::npos);
}

TEST(JsonUtilTest, NestingIsBoundedBeforeParsing) {
  std::string deep = "{\"a\":" + std::string(300, '[') + std::string(300, ']') + "}";
  auto r = ParseJsonObject(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "JSON nesting deeper than 256 levels");
  // Brackets inside strings (and escaped quotes) do not count.
  std::string quoted = "{\"a\":\"" + std::string(300, '[') + "\\\"\"}";
  EXPECT_TRUE(ParseJsonObject(quoted).ok());
  std::string ok = "{\"a\":" + std::string(200, '[') + std::string(200, ']') + "}";
  EXPECT_TRUE(ParseJsonObject(ok).ok());
}

TEST(JsonUtilTest, TypedFieldsNameTheKeyAndTheType) {
  Json j = Json::parse(R"({"s": "x", "n": 2.0, "f": 2.5, "b": true, "z": null, "big": 1e300})");
  EXPECT_EQ(OptString(j, "s")->value(), "x");
  EXPECT_FALSE(OptString(j, "z")->has_value());
  EXPECT_FALSE(OptString(j, "missing")->has_value());
  EXPECT_EQ(OptString(j, "n").status().message(), "'n' must be a string, not number");
  EXPECT_EQ(OptBool(j, "s").status().message(), "'s' must be a boolean, not string");
  EXPECT_EQ(OptInt(j, "n", 0, 10)->value(), 2);
  EXPECT_EQ(OptInt(j, "f", 0, 10).status().message(), "'f' must be an integer, not 2.5");
  EXPECT_EQ(OptInt(j, "n", 3, 10).status().message(), "'n' must be between 3 and 10, not 2");
  EXPECT_FALSE(OptInt(j, "big", 0, 10).ok());
}

TEST(JsonUtilTest, DumpReplacesInvalidUtf8InsteadOfThrowing) {
  Json j = {{"text", std::string("ok \xe4\xb8 end")}};
  EXPECT_EQ(DumpJson(j), "{\"text\":\"ok \xef\xbf\xbd end\"}");
}

}  // namespace
}  // namespace flashkv
