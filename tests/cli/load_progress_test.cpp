#include "cli/load_progress.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "log_capture.h"

namespace flashkv::cli {
namespace {

TEST(LoadProgressTest, WeightBytesMapOntoTheirShareOfTheStartUp) {
  std::vector<std::pair<std::string, double>> seen;
  LoadReporter reporter([&](const std::string& phase, double f) { seen.emplace_back(phase, f); });
  reporter.Phase("reading the model file", 0.0);
  LoadProgressFn weights = reporter.Weights(0.1, 0.9);
  weights(0, 1000);
  weights(500, 1000);
  weights(1000, 1000);
  reporter.Phase("opening the KV cache tiers", 0.9);
  ASSERT_EQ(seen.size(), 5u);
  EXPECT_EQ(seen[0], std::make_pair(std::string("reading the model file"), 0.0));
  EXPECT_EQ(seen[1].first, "loading weights");
  EXPECT_DOUBLE_EQ(seen[1].second, 0.1);
  EXPECT_DOUBLE_EQ(seen[2].second, 0.5);
  EXPECT_DOUBLE_EQ(seen[3].second, 0.9);
  EXPECT_EQ(seen[4].first, "opening the KV cache tiers");
}

// The log says how far the weights are, once per tenth (not per tensor), in GiB; a phase is
// logged as it starts.
TEST(LoadProgressTest, TheLogGetsOneLinePerTenthOfTheWeights) {
  testing::LogCapture log;
  LoadReporter reporter;
  reporter.Phase("reading the model file", 0.0);
  LoadProgressFn weights = reporter.Weights(0.0, 1.0);
  constexpr uint64_t kTotal = uint64_t(4) << 30;  // 4 GiB in 64 steps
  for (uint64_t done = 0; done <= kTotal; done += kTotal / 64) weights(done, kTotal);
  EXPECT_EQ(log.Count("start-up: reading the model file"), 1) << log.text();
  EXPECT_EQ(log.Count("loading weights: "), 10) << log.text();
  EXPECT_EQ(log.Count("loading weights: 50% (2.0 of 4.0 GiB"), 1) << log.text();
  EXPECT_EQ(log.Count("loading weights: 100% (4.0 of 4.0 GiB"), 1) << log.text();
}

}  // namespace
}  // namespace flashkv::cli
