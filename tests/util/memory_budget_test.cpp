#include "util/memory_budget.h"

#include "util/host_memory.h"

#include <cstdint>

#include <gtest/gtest.h>

namespace flashkv {
namespace {

TEST(MemoryBudgetTest, ByteCountAddsAndRemembersOverflow) {
  ByteCount c;
  c.Add(3, 4, 2).Add(10, 1);
  EXPECT_EQ(c.bytes(), 34u);
  EXPECT_FALSE(c.overflowed());
  c.Add(uint64_t(1) << 32, uint64_t(1) << 32);  // the product wraps
  EXPECT_TRUE(c.overflowed());
  ByteCount sum;
  sum.Add(UINT64_MAX, 1).Add(1, 1);  // the sum wraps
  EXPECT_TRUE(sum.overflowed());
}

TEST(MemoryBudgetTest, RefusesAboveTheLimitWithTheNumbers) {
  ByteCount c;
  c.Add(3, uint64_t(1) << 20);
  EXPECT_TRUE(CheckFitsInMemory("x", c, uint64_t(3) << 20).ok());
  Status s = CheckFitsInMemory("the thing", c, uint64_t(2) << 20);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "the thing needs 3 MiB, more than the 2 MiB of memory this machine has");
  ByteCount huge;
  huge.Add(UINT64_MAX, 2);
  EXPECT_EQ(CheckFitsInMemory("y", huge).message(), "y needs more than 2^64 bytes");
  EXPECT_GT(PhysicalHostMemory(), uint64_t(1) << 20);
  EXPECT_TRUE(CheckFitsInMemory("z", ByteCount().Add(1, 1)).ok());
}

}  // namespace
}  // namespace flashkv
