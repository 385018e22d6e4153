#include "util/thread_pool.h"

#include <atomic>
#include <vector>

#include <gtest/gtest.h>

namespace flashkv {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexOnce) {
  ThreadPool pool(4);
  for (size_t n : {0u, 1u, 3u, 4u, 17u, 1000u}) {
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, 1, [&](size_t b, size_t e, int) {
      for (size_t i = b; i < e; ++i) hits[i]++;
    });
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPoolTest, ManyRoundsStayConsistent) {
  ThreadPool pool(3);
  std::atomic<long> sum{0};
  for (int round = 0; round < 500; ++round) {
    pool.ParallelFor(64, 4, [&](size_t b, size_t e, int) {
      for (size_t i = b; i < e; ++i) sum += static_cast<long>(i);
    });
  }
  EXPECT_EQ(sum.load(), 500L * (63 * 64 / 2));
}

}  // namespace
}  // namespace flashkv
