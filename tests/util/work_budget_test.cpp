// WorkBudget (issue 34): a loop that steps it ends once its thread has spent the CPU time
// given, or at once (within a stride) when its stop flag is set; without either it never
// ends a loop. Nothing here depends on the machine's speed: each loop runs until the
// budget says stop, and only what it says is checked.
#include "util/work_budget.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace flashkv {
namespace {

TEST(WorkBudgetTest, UnlimitedNeverStops) {
  WorkBudget b;
  for (int i = 0; i < 100000; ++i) ASSERT_TRUE(b.Step());
  EXPECT_TRUE(b.Check());
  EXPECT_TRUE(b.status().ok());
}

TEST(WorkBudgetTest, SpentCpuTimeEndsTheWork) {
  WorkBudget b(std::chrono::milliseconds(30), nullptr);
  uint64_t steps = 0;
  volatile uint64_t sink = 0;
  while (b.Step()) {
    for (int i = 0; i < 100; ++i) sink = sink + uint64_t(i);  // CPU, not sleep
    ++steps;
  }
  EXPECT_GT(steps, 0u);
  EXPECT_FALSE(b.ok());
  EXPECT_FALSE(b.Step());  // and stays spent
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(b.status().message().find("more than 30 ms of CPU time"), std::string::npos);
  EXPECT_GE(b.Spent().count(), 30);
}

// Waiting is not CPU time: a budget is for work the thread does.
TEST(WorkBudgetTest, SleepingCostsNothing) {
  WorkBudget b(std::chrono::milliseconds(50), nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  EXPECT_TRUE(b.Check());
}

TEST(WorkBudgetTest, TheStopFlagEndsTheWorkWithinAStride) {
  std::atomic<bool> stop{false};
  WorkBudget b(std::chrono::milliseconds(0), &stop);
  for (uint64_t i = 0; i < 10 * WorkBudget::kStride; ++i) ASSERT_TRUE(b.Step());
  stop = true;
  uint64_t more = 0;
  while (b.Step()) ++more;
  EXPECT_LE(more, WorkBudget::kStride);
  EXPECT_EQ(b.status().code(), StatusCode::kCancelled);
  EXPECT_NE(b.status().message().find("stopping"), std::string::npos);
}

}  // namespace
}  // namespace flashkv
