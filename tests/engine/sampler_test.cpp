#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <random>
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

// The one-pass argmax Greedy replaced, as the reference for its fast two-pass form.
int32_t GreedyOnePass(const std::vector<float>& l, int32_t exclude) {
  int32_t best = -1;
  for (size_t i = 0; i < l.size(); ++i) {
    if (int32_t(i) == exclude) continue;
    if (best < 0 || l[i] > l[size_t(best)]) best = int32_t(i);
  }
  return std::max(best, 0);
}

// Logits with what a vocabulary-sized row can hold: many exact ties (values on a coarse
// grid), ±0, ±inf, and a NaN where asked.
std::vector<float> Row(size_t n, uint32_t seed, bool nan_first) {
  std::mt19937 rng(seed);
  std::vector<float> l(n);
  for (float& x : l) x = float(int(rng() % 64) - 40) * 0.25f;
  for (size_t i = 0; i < n; i += 97) l[i] = (rng() & 1) != 0 ? -0.0f : 0.0f;
  l[n / 3] = -INFINITY;
  if (n > 50) l[50] = l[n / 2] = 13.0f;  // the largest, twice
  if (nan_first) l[0] = NAN;
  return l;
}

TEST(SamplerTest, GreedyIsTheFirstLargestLikeTheOnePassLoop) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const std::vector<float> l = Row(1000 + seed, seed, seed % 7 == 0);
    for (int32_t exclude :
         {-1, 0, 1, 50, int32_t(l.size()) / 2, int32_t(l.size()) - 1, int32_t(l.size())}) {
      EXPECT_EQ(Sampler::Greedy(l, exclude), GreedyOnePass(l, exclude))
          << "seed " << seed << " exclude " << exclude;
    }
  }
  const std::vector<float> zeros = {-0.0f, 0.0f, -1.0f};
  EXPECT_EQ(Sampler::Greedy(zeros), 0);
  const std::vector<float> nan_later = {1.0f, NAN, 2.0f};
  EXPECT_EQ(Sampler::Greedy(nan_later), 2);
  EXPECT_EQ(Sampler::Greedy(std::vector<float>{}), 0);
  EXPECT_EQ(Sampler::Greedy(std::vector<float>{5.0f}, 0), 0);
}

// The candidates' order (most likely first, equal logits by id) and every probability are
// those of a comparison sort, bit for bit: the radix sort that replaced std::sort must draw
// the same tokens.
TEST(SamplerTest, DistributionMatchesAComparisonSortBitForBit) {
  struct C {
    float logit;
    int32_t id;
  };
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    const std::vector<float> l = Row(5000 + 13 * seed, seed, false);
    for (const float temperature : {1.0f, 0.7f}) {
      for (const float top_p : {1.0f, 0.9f}) {
        const int32_t exclude = seed % 2 != 0 ? 50 : -1;
        Sampler s(SamplerOptions{temperature, 0, top_p, seed == 3 ? 0.05f : 0.0f, seed}, exclude);
        const auto got = s.Distribution(l);
        std::vector<C> c;
        for (size_t i = 0; i < l.size(); ++i) {
          if (int32_t(i) != exclude) c.push_back({l[i] / temperature, int32_t(i)});
        }
        std::sort(c.begin(), c.end(), [](const C& a, const C& b) {
          return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
        });
        ASSERT_FALSE(got.empty());
        ASSERT_LE(got.size(), c.size());
        std::vector<double> p(c.size());
        double sum = 0.0;
        for (size_t i = 0; i < c.size(); ++i) {
          p[i] = std::exp(double(c[i].logit) - double(c[0].logit));
          sum += p[i];
        }
        double kept = 0.0;
        for (size_t i = 0; i < got.size(); ++i) kept += p[i] / sum;
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_EQ(got[i].first, c[i].id) << "seed " << seed << " rank " << i;
          ASSERT_EQ(got[i].second, p[i] / sum / kept) << "seed " << seed << " rank " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace flashkv
