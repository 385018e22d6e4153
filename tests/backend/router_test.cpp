#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "backend_test_util.h"

namespace flashkv {
namespace {

using testing::F32Weight;
using testing::HostWeight;
using testing::Upload;
using testing::Zeros;

// A logit whose sqrt(softplus) is exactly s: softplus(x) = s² at x = ln(e^{s²} − 1).
float LogitFor(float s) {
  return float(std::log(std::expm1(double(s) * s)));
}

// Hash routing takes the experts from tid2eid[token]; the weights are still the router
// scores of those experts, normalised and scaled: s = 1 and 2 → 1.5·(1/3, 2/3).
TEST(RouterTest, HashRoutingUsesTokenTableAndRouterScores) {
  CpuBackend be(nullptr);
  const int E = 4, k = 2;
  std::vector<int32_t> table = {0, 1, 3, 2, 2, 0};  // [n_vocab = 3, k], token 1 → {3, 2}
  const Weight tid2eid = HostWeight(be, DType::kI32, {2, 3}, table.data(), table.size() * 4);
  auto logits = Upload<float>(be, {LogitFor(3), LogitFor(9), LogitFor(2), LogitFor(1)});
  auto tokens = Upload<int32_t>(be, {1});
  auto sel = Zeros<int32_t>(be, k);
  auto w = Zeros<float>(be, k);
  RouterArgs a{logits.ptr(), nullptr, &tid2eid, tokens.ptr(), sel.ptr(), w.ptr(), 1, E, k, 1.5f};
  be.RouterSelect(a);
  EXPECT_EQ(sel.Get(be), (std::vector<int32_t>{3, 2}));
  const auto wt = w.Get(be);
  EXPECT_NEAR(wt[0], 1.5 * 1.0 / 3.0, 1e-6);
  EXPECT_NEAR(wt[1], 1.5 * 2.0 / 3.0, 1e-6);
}

// Top-k picks by score + bias, best first, an earlier expert winning a tie; the weights use
// the unbiased scores.
TEST(RouterTest, TopKBiasSelectsOnlyAndTiesGoToLowerExpert) {
  CpuBackend be(nullptr);
  const int E = 4, k = 2;
  // Scores 1, 2, 3, 3; bias lifts expert 0 by 2.5 → selection scores 3.5, 2, 3, 3.
  auto logits = Upload<float>(be, {LogitFor(1), LogitFor(2), LogitFor(3), LogitFor(3)});
  std::vector<float> bias = {2.5f, 0, 0, 0};
  const Weight b = F32Weight(be, {4}, bias);
  auto tokens = Upload<int32_t>(be, {0});
  auto sel = Zeros<int32_t>(be, k);
  auto w = Zeros<float>(be, k);
  RouterArgs a{logits.ptr(), &b, nullptr, tokens.ptr(), sel.ptr(), w.ptr(), 1, E, k, 1.0f};
  be.RouterSelect(a);
  EXPECT_EQ(sel.Get(be), (std::vector<int32_t>{0, 2}));  // 3.5, then 3 (expert 2 before 3)
  const auto wt = w.Get(be);
  EXPECT_NEAR(wt[0], 1.0 / 4.0, 1e-6);  // unbiased 1 / (1 + 3)
  EXPECT_NEAR(wt[1], 3.0 / 4.0, 1e-6);
}

}  // namespace
}  // namespace flashkv
