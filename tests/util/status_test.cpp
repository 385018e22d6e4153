#include "util/status.h"

#include <gtest/gtest.h>

namespace flashkv {
namespace {

Expected<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("{} is odd", x);
  return x / 2;
}

Expected<int> Quarter(int x) {
  FLASHKV_ASSIGN_OR_RETURN(int h, Half(x));
  FLASHKV_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(StatusTest, OkAndErrors) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = Corrupt("bad magic {:#x}", 0x1234);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.ToString(), "corrupt: bad magic 0x1234");
  EXPECT_EQ(s.WithContext("model.gguf").message(), "model.gguf: bad magic 0x1234");
}

TEST(StatusTest, ExpectedPropagates) {
  EXPECT_EQ(*Quarter(8), 2);
  auto r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "3 is odd");
}

}  // namespace
}  // namespace flashkv
