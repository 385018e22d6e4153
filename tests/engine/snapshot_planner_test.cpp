#include "engine/snapshot_planner.h"

#include <gtest/gtest.h>

namespace flashkv {
namespace {

CachePolicy Policy(int64_t min_tokens = 100, int64_t trim = 8, int64_t interval = 1000,
                   int64_t align = 0) {
  CachePolicyOptions o;
  o.min_tokens = min_tokens;
  o.boundary_trim_tokens = trim;
  o.continued_interval_tokens = interval;
  o.boundary_align_tokens = align;
  auto p = CachePolicy::Create(o);
  EXPECT_TRUE(p.ok());
  return *p;
}

// `shared` ids common to every session, then `tail` ids of this one.
std::vector<int32_t> Prompt(int shared, int tail, int32_t session) {
  std::vector<int32_t> ids;
  for (int i = 0; i < shared; ++i) ids.push_back(i % 1000);
  for (int i = 0; i < tail; ++i) ids.push_back(100000 + session * 1000 + i);
  return ids;
}

TEST(SharedPrefixAnchorsTest, AnchorWhereTheNewPromptPartsFromARememberedOne) {
  const CachePolicy policy = Policy();
  SharedPrefixAnchors anchors;
  // The first session has nothing to share with.
  EXPECT_EQ(anchors.NextSession(Prompt(300, 50, 1), 0, policy), std::nullopt);
  // The second shares 300 ids; it restored a 200-id chat anchor: save at 300 - trim.
  EXPECT_EQ(anchors.NextSession(Prompt(300, 60, 2), 200, policy), 292);
  // The third restored that anchor: nothing longer to gain.
  EXPECT_EQ(anchors.NextSession(Prompt(300, 70, 3), 292, policy), std::nullopt);
  // Less than min_gain_tokens (64) past what was restored: not worth a snapshot.
  EXPECT_EQ(anchors.NextSession(Prompt(300, 10, 4), 240, policy), std::nullopt);
  EXPECT_EQ(anchors.size(), 4u);
}

TEST(SharedPrefixAnchorsTest, TooShortPromptsAndTheForgottenGetNoAnchor) {
  const CachePolicy policy = Policy(/*min_tokens=*/100);
  SharedPrefixAnchors anchors(SharedPrefixOptions{/*remembered_prompts=*/2, /*min_gain=*/64});
  anchors.NextSession(Prompt(90, 5, 1), 0, policy);
  // 90 shared ids minus the trim is below min_tokens.
  EXPECT_EQ(anchors.NextSession(Prompt(90, 5, 2), 0, policy), std::nullopt);
  // An identical prompt shares everything; the anchor still stops before its end.
  std::vector<int32_t> p = Prompt(400, 0, 0);
  anchors.NextSession(p, 0, policy);
  EXPECT_EQ(anchors.NextSession(p, 0, policy), 400 - 1 - 8);
  // Only the most recent two prompts are remembered.
  std::vector<int32_t> other(500, 7);
  anchors.NextSession(other, 0, policy);
  anchors.NextSession(std::vector<int32_t>(500, 8), 0, policy);
  EXPECT_EQ(anchors.NextSession(p, 0, policy), std::nullopt);
  EXPECT_EQ(anchors.size(), 2u);
}

TEST(SnapshotPlannerTest, ReplySavedOnceWhenItPassedAContinuedFrontier) {
  const CachePolicy policy = Policy(/*min_tokens=*/100, /*trim=*/8, /*interval=*/1000);
  EXPECT_FALSE(SaveAfterReply(policy, 999, 0));
  EXPECT_TRUE(SaveAfterReply(policy, 1000, 0));
  EXPECT_TRUE(SaveAfterReply(policy, 3500, 1000));   // a runaway reply: one save, at its end
  EXPECT_FALSE(SaveAfterReply(policy, 3500, 3000));  // saved past its last frontier already
  EXPECT_FALSE(SaveAfterReply(Policy(100, 8, /*interval=*/0), 50000, 0));

  std::vector<int64_t> points = {100, 300};
  AddSavePoint(200, &points);
  AddSavePoint(300, &points);
  AddSavePoint(50, &points);
  EXPECT_EQ(points, (std::vector<int64_t>{50, 100, 200, 300}));
}

}  // namespace
}  // namespace flashkv
