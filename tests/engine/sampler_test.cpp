#include "engine/sampler.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace flashkv {
namespace {

// Logits ln 1 … ln 4: at temperature 1 the probabilities are 0.1, 0.2, 0.3, 0.4.
std::vector<float> Logs() {
  return {std::log(1.0f), std::log(2.0f), std::log(3.0f), std::log(4.0f)};
}

std::vector<int> Histogram(const SamplerOptions& o, int draws) {
  Sampler s(o);
  std::vector<int> h(4);
  const auto logits = Logs();
  for (int i = 0; i < draws; ++i) ++h[s.Sample(logits)];
  return h;
}

TEST(SamplerTest, GreedyTakesTheArgmaxLowestIdOnTies) {
  Sampler s(SamplerOptions{});
  EXPECT_EQ(s.Sample(Logs()), 3);
  const std::vector<float> tie = {1, 5, 5, 2};
  EXPECT_EQ(Sampler::Greedy(tie), 1);
  // top_k 1 is greedy at any temperature.
  Sampler k1(SamplerOptions{2.0f, 1, 1.0f, 0.0f, 7});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(k1.Sample(Logs()), 3);
}

// The bench probe's rule (it must not end at EOS): the best other id, lowest on ties.
TEST(SamplerTest, AnExcludedIdIsNeverPicked) {
  const std::vector<float> l = {1, 5, 5, 2};
  EXPECT_EQ(Sampler::Greedy(l, -1), 1);
  EXPECT_EQ(Sampler::Greedy(l, 1), 2);
  EXPECT_EQ(Sampler::Greedy(l, 2), 1);
  const std::vector<float> flat = {3, 3, 3};
  EXPECT_EQ(Sampler::Greedy(flat, 0), 1);
  Sampler greedy(SamplerOptions{}, /*exclude_id=*/3);
  EXPECT_EQ(greedy.Sample(Logs()), 2);
  // Sampling redistributes the excluded id's mass over the others: 1/6, 2/6, 3/6.
  Sampler s(SamplerOptions{1.0f, 0, 1.0f, 0.0f, 11}, /*exclude_id=*/3);
  std::vector<int> h(4);
  for (int i = 0; i < 20000; ++i) ++h[s.Sample(Logs())];
  EXPECT_EQ(h[3], 0);
  EXPECT_NEAR(h[2] / 20000.0, 0.5, 0.015);
}

TEST(SamplerTest, TemperatureOneFollowsTheSoftmax) {
  const auto h = Histogram(SamplerOptions{1.0f, 0, 1.0f, 0.0f, 42}, 20000);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(h[i] / 20000.0, 0.1 * (i + 1), 0.015) << i;
}

TEST(SamplerTest, TopPKeepsTheSmallestSetReachingP) {
  // 0.4 < 0.5, 0.4 + 0.3 ≥ 0.5: tokens 3 and 2 remain, renormalised to 4/7 and 3/7.
  const auto h = Histogram(SamplerOptions{1.0f, 0, 0.5f, 0.0f, 3}, 20000);
  EXPECT_EQ(h[0] + h[1], 0);
  EXPECT_NEAR(h[3] / 20000.0, 4.0 / 7.0, 0.015);
}

TEST(SamplerTest, MinPDropsTokensBelowAFractionOfTheBest) {
  // Floor 0.6 · 0.4 = 0.24: only 0.3 and 0.4 remain.
  const auto h = Histogram(SamplerOptions{1.0f, 0, 1.0f, 0.6f, 5}, 20000);
  EXPECT_EQ(h[0] + h[1], 0);
  EXPECT_NEAR(h[2] / 20000.0, 3.0 / 7.0, 0.015);
}

TEST(SamplerTest, TopKKeepsTheKMostLikely) {
  const auto h = Histogram(SamplerOptions{1.0f, 2, 1.0f, 0.0f, 9}, 20000);
  EXPECT_EQ(h[0] + h[1], 0);
  EXPECT_NEAR(h[2] / 20000.0, 3.0 / 7.0, 0.015);
}

TEST(SamplerTest, SameSeedSameTokens) {
  const SamplerOptions o{0.8f, 0, 0.95f, 0.0f, 1234};
  Sampler a(o), b(o);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.Sample(Logs()), b.Sample(Logs()));
}

}  // namespace
}  // namespace flashkv
