// SoftmaxKl and Nmse (util/logit_distance.h): the distances the fast float path's test and
// benchmarks report between two results.
#include "util/logit_distance.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace flashkv {
namespace {

TEST(SoftmaxKlTest, IsZeroForTheSameDistribution) {
  const std::vector<float> p = {1.0f, -2.0f, 0.5f, 3.0f};
  EXPECT_DOUBLE_EQ(SoftmaxKl(p.data(), p.data(), 4), 0.0);
  // Softmax ignores a shift of every logit.
  const std::vector<float> q = {11.0f, 8.0f, 10.5f, 13.0f};
  EXPECT_NEAR(SoftmaxKl(p.data(), q.data(), 4), 0.0, 1e-12);
}

TEST(SoftmaxKlTest, MatchesTheClosedFormOfTwoOutcomes) {
  // p = softmax(0, 0) = (1/2, 1/2), q = softmax(0, ln 3) = (1/4, 3/4):
  // KL = 1/2 ln 2 + 1/2 ln(2/3).
  const std::vector<float> p = {0.0f, 0.0f};
  const std::vector<float> q = {0.0f, float(std::log(3.0))};
  const double want = 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3.0);
  EXPECT_NEAR(SoftmaxKl(p.data(), q.data(), 2), want, 1e-7);
  // Not symmetric: KL(q ‖ p) = 1/4 ln(1/2) + 3/4 ln(3/2).
  EXPECT_NEAR(SoftmaxKl(q.data(), p.data(), 2), 0.25 * std::log(0.5) + 0.75 * std::log(1.5), 1e-7);
}

TEST(SoftmaxKlTest, StaysFiniteForLargeLogits) {
  const std::vector<float> p = {1000.0f, 0.0f};
  const std::vector<float> q = {0.0f, 1000.0f};
  const double kl = SoftmaxKl(p.data(), q.data(), 2);
  EXPECT_TRUE(std::isfinite(kl));
  EXPECT_NEAR(kl, 1000.0, 1e-6);
}

TEST(NmseTest, IsTheSquaredErrorOverTheReferencesEnergy) {
  const std::vector<float> ref = {3.0f, -4.0f};  // Σ ref² = 25
  const std::vector<float> got = {3.5f, -4.0f};  // Σ d² = 0.25
  EXPECT_DOUBLE_EQ(Nmse(ref.data(), got.data(), 2), 0.01);
  EXPECT_DOUBLE_EQ(Nmse(ref.data(), ref.data(), 2), 0.0);
  // An all-zero reference: the plain squared error.
  const std::vector<float> zero = {0.0f, 0.0f};
  EXPECT_DOUBLE_EQ(Nmse(zero.data(), got.data(), 2), 3.5 * 3.5 + 4.0 * 4.0);
}

}  // namespace
}  // namespace flashkv
