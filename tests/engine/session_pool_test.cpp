#include "engine/session_pool.h"

#include <gtest/gtest.h>

#include "tiny_engine_util.h"

namespace flashkv {
namespace {

using testing::Tiny;

SessionPool MakePool(int capacity) {
  return SessionPool(capacity, Tiny().model().config().n_vocab,
                     [] { return Tiny().model().NewState(64); });
}

// Fills a session with ids as if they had been evaluated (the KvState itself is not
// consulted by matching), the last `pending` of them left pending.
void Hold(Session& s, const std::vector<int32_t>& ids, size_t pending, bool logits = true) {
  for (int32_t id : ids) s.AddPending(id, Tiny().tokenizer->TokenBytes(id));
  s.CommitPending(ids.size() - pending, logits);
}

std::string Text(const std::vector<int32_t>& ids) {
  return *Tiny().tokenizer->Decode(ids);
}

TEST(SessionPoolTest, FreshSlotsAreUsedBeforeTheLeastRecentlyUsedIsEvicted) {
  SessionPool pool = MakePool(2);
  std::vector<int64_t> evicted;
  auto on_evict = [&](Session& s) { evicted.push_back(s.id()); };
  auto a = pool.AcquireFresh(1, on_evict);
  ASSERT_TRUE(a.ok());
  Hold(pool.at(*a), {10, 11, 12}, 0);
  auto b = pool.AcquireFresh(2, on_evict);
  ASSERT_TRUE(b.ok());
  EXPECT_NE(*a, *b);
  Hold(pool.at(*b), {20, 21}, 0);
  EXPECT_EQ(pool.live_count(), 2);
  pool.Touch(*a);  // a is now more recent than b
  auto c = pool.AcquireFresh(3, on_evict);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, *b);
  EXPECT_EQ(evicted, std::vector<int64_t>{2});
  EXPECT_EQ(pool.at(*c).id(), 3);
  EXPECT_EQ(pool.at(*c).total_tokens(), 0u);
  // An empty slot is reused before anything is evicted.
  auto d = pool.AcquireFresh(4, on_evict);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, *c);
  EXPECT_EQ(evicted.size(), 1u);
}

TEST(SessionPoolTest, TokenTextAndVisibleKeysAreFoundWithTheirContinuations) {
  SessionPool pool = MakePool(3);
  auto noop = [](Session&) {};
  const std::vector<int32_t> base = {0, 263, 862, 81, 1019, 74, 75, 270};
  auto s0 = pool.AcquireFresh(1, noop);
  ASSERT_TRUE(s0.ok());
  Hold(pool.at(*s0), base, /*pending=*/1);

  // Exact ids: the continuation is the rest of the prompt after the evaluated tokens
  // (the pending id included: the engine drops the session's pending ids first).
  std::vector<int32_t> prompt = base;
  prompt.insert(prompt.end(), {266, 1020, 1022});
  auto m = pool.FindBest(Text(prompt), prompt, *Tiny().tokenizer);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->kind, LiveMatchKind::kToken);
  EXPECT_EQ(m->reused, base.size() - 1);
  EXPECT_EQ(m->continuation, (std::vector<int32_t>{270, 266, 1020, 1022}));

  // Same bytes, other ids: the text key, continuing with the text after the session's.
  const std::string text = Text(base) + "<｜Assistant｜>";
  std::vector<int32_t> retok = Tiny().tokenizer->EncodeChatPrompt(text);
  retok[2] = 999;  // ids that no longer match, bytes that still do
  m = pool.FindBest(text, retok, *Tiny().tokenizer);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->kind, LiveMatchKind::kText);
  std::vector<int32_t> want = {270};  // the session's tail: its pending id
  for (int32_t id : Tiny().tokenizer->EncodeChatPrompt("<｜Assistant｜>")) want.push_back(id);
  EXPECT_EQ(m->continuation, want);

  // A visible key: text the session does not hold, continuing after the key's tail.
  pool.at(*s0).SetVisibleKeys({VisibleKey{"VISIBLE", {270, 1}}});
  m = pool.FindBest("VISIBLE tail", std::vector<int32_t>{5, 6}, *Tiny().tokenizer);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->kind, LiveMatchKind::kVisible);
  want = {270, 1};
  for (int32_t id : Tiny().tokenizer->EncodeChatPrompt(" tail")) want.push_back(id);
  EXPECT_EQ(m->continuation, want);

  // Shorter prompts and diverging ones match nothing (no rewind).
  EXPECT_FALSE(pool.FindBest(Text({0, 263}), std::vector<int32_t>{0, 263}, *Tiny().tokenizer));
  EXPECT_FALSE(pool.FindBest("zzz", std::vector<int32_t>{5}, *Tiny().tokenizer));
}

// The live pool follows the rule of the snapshot tiers (kv/resume_point.h): the evaluated
// ids are the key, so a prompt that holds them but not the pending id still continues the
// session (the pending id was never evaluated and is dropped).
TEST(SessionPoolTest, APromptWithoutThePendingIdStillContinuesTheEvaluatedIds) {
  SessionPool pool = MakePool(2);
  auto noop = [](Session&) {};
  auto s0 = pool.AcquireFresh(1, noop);
  ASSERT_TRUE(s0.ok());
  Hold(pool.at(*s0), {0, 263, 862, 81}, /*pending=*/1);
  const std::vector<int32_t> prompt = {0, 263, 862, 74, 75};
  auto m = pool.FindBest(Text(prompt), prompt, *Tiny().tokenizer);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->kind, LiveMatchKind::kToken);
  EXPECT_EQ(m->reused, 3u);
  EXPECT_EQ(m->continuation, (std::vector<int32_t>{74, 75}));
  Session& s = pool.at(*s0);
  s.DropPending();
  EXPECT_TRUE(s.pending().empty());
  EXPECT_EQ(s.text(), Text({0, 263, 862}));
  EXPECT_TRUE(s.has_logits());
}

TEST(SessionPoolTest, LongestReuseWinsAndAnExactMatchNeedsLogits) {
  SessionPool pool = MakePool(3);
  auto noop = [](Session&) {};
  auto s0 = pool.AcquireFresh(1, noop);
  ASSERT_TRUE(s0.ok());
  Hold(pool.at(*s0), {0, 263, 862}, 0);
  auto s1 = pool.AcquireFresh(2, noop);  // s0 is not empty any more: a new slot
  ASSERT_TRUE(s1.ok());
  ASSERT_NE(*s0, *s1);
  Hold(pool.at(*s1), {0, 263, 862, 81, 1019}, 0, /*logits=*/false);
  const std::vector<int32_t> prompt = {0, 263, 862, 81, 1019, 74};
  auto m = pool.FindBest(Text(prompt), prompt, *Tiny().tokenizer);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->slot, *s1);
  EXPECT_EQ(m->reused, 5u);
  // The prompt is exactly s1's ids, but s1 has no logits to sample from (its last chunk
  // was cancelled, say): only s0 can serve it.
  const std::vector<int32_t> exact = {0, 263, 862, 81, 1019};
  m = pool.FindBest(Text(exact), exact, *Tiny().tokenizer);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->slot, *s0);
}

}  // namespace
}  // namespace flashkv
