#include "kv/cache_policy.h"

#include <vector>

#include <gtest/gtest.h>

namespace flashkv {
namespace {

std::vector<int32_t> Plain(int64_t n) {
  return std::vector<int32_t>(n, 5);
}

TEST(CachePolicyTest, ColdBoundaryTrimsAndAligns) {
  CachePolicy p;  // ds4 defaults: min 512, cold max 30000, trim 32, align 2048
  const ChatMarkerIds none;
  EXPECT_EQ(p.ColdBoundary(Plain(11011), none), 10240);  // 10979 aligned down
  EXPECT_EQ(p.ColdBoundary(Plain(1695), none), 1695);    // aligned stable 0 < min: whole
  EXPECT_EQ(p.ColdBoundary(Plain(511), none), std::nullopt);
  EXPECT_EQ(p.ColdBoundary(Plain(30001), none), std::nullopt);
  EXPECT_EQ(p.ColdBoundary(Plain(30000), none), 28672);
  auto q = CachePolicy::Create({.min_tokens = 512,
                                .cold_max_tokens = 30000,
                                .continued_interval_tokens = 10000,
                                .boundary_trim_tokens = 0,
                                .boundary_align_tokens = 1000});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->ColdBoundary(Plain(3500), none), 3000);
}

TEST(CachePolicyTest, ColdBoundaryPrefersTheChatAnchor) {
  CachePolicy p;
  const ChatMarkerIds m{.user = 1, .assistant = 2};
  std::vector<int32_t> prompt = Plain(3000);
  prompt[100] = 1;  // first user turn
  prompt[900] = 2;  // an assistant turn: user markers after it do not count
  prompt[700] = 1;  // last user marker before the first assistant marker
  prompt[2000] = 1;
  EXPECT_EQ(p.ColdBoundary(prompt, m), 700);
  prompt[700] = 5;  // the anchor at 100 is below min_tokens: trim + align instead
  EXPECT_EQ(p.ColdBoundary(prompt, m), 2048);
}

TEST(CachePolicyTest, ContinuedFrontiers) {
  auto p = CachePolicy::Create({.continued_interval_tokens = 10000});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->ContinuedStep(), 10240);
  EXPECT_TRUE(p->IsContinuedFrontier(20480, 10240));
  EXPECT_FALSE(p->IsContinuedFrontier(20480, 20480));
  EXPECT_FALSE(p->IsContinuedFrontier(20481, 0));
  EXPECT_EQ(p->SavePoints(0, 31000, 5000, 0), (std::vector<int64_t>{5000, 10240, 20480, 30720}));
  EXPECT_EQ(p->SavePoints(10240, 20480, 10240, 10240), (std::vector<int64_t>{20480}));
  EXPECT_EQ(p->SavePoints(0, 20480, std::nullopt, 10240), (std::vector<int64_t>{20480}));
  auto off = CachePolicy::Create({.continued_interval_tokens = 0});
  EXPECT_EQ(off->ContinuedStep(), 0);
  EXPECT_TRUE(off->SavePoints(0, 100000, std::nullopt, 0).empty());
}

TEST(CachePolicyTest, RejectsInconsistentOptions) {
  EXPECT_FALSE(CachePolicy::Create({.min_tokens = 512, .cold_max_tokens = 100}).ok());
  EXPECT_TRUE(CachePolicy::Create({.min_tokens = 512, .cold_max_tokens = 0}).ok());
  EXPECT_FALSE(CachePolicy::Create({.boundary_trim_tokens = -1}).ok());
  CachePolicy p;
  EXPECT_TRUE(p.ShouldSaveSession(512));
  EXPECT_FALSE(p.ShouldSaveSession(511));
}

}  // namespace
}  // namespace flashkv
