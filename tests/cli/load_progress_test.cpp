#include "cli/load_progress.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace flashkv::cli
