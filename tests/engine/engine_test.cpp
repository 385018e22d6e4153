// The engine worker on the real (tiny) model: the resume cascade, bit-exact continuation,
// pending ids, cancellation between prefill chunks, LRU replacement, context limits, stop
// sequences and visible keys.
#include "engine/engine.h"

#include <thread>

#include <gtest/gtest.h>

#include "engine/scheduler.h"
#include "tiny_engine_util.h"

namespace flashkv {
namespace {

using testing::ChatRequest;
using testing::Msg;
using testing::RawRequest;
using testing::RunNow;
using testing::Tiny;

EngineOptions Options(int live = 4, int chunk = 16, int ctx = 512) {
  EngineOptions o;
  o.ctx_size = ctx;
  o.live_sessions = live;
  o.prefill_chunk = chunk;
  return o;
}

struct Fixture {
  explicit Fixture(const EngineOptions& o)
      : engine(Tiny().model(), *Tiny().tokenizer, replay, metrics, o) {}
  ToolReplayMap replay;
  EngineMetrics metrics;
  Engine engine;
};

// The most recently used session: the one the last request ran in.
const Session& LastSession(const Engine& e) {
  const SessionPool& pool = e.sessions();
  int best = 0;
  for (int i = 1; i < pool.size(); ++i) {
    if (pool.at(i).last_used() > pool.at(best).last_used()) best = i;
  }
  return pool.at(best);
}

std::vector<int32_t> AllIds(const Session& s) {
  std::vector<int32_t> ids = s.tokens();
  ids.insert(ids.end(), s.pending().begin(), s.pending().end());
  return ids;
}

std::vector<ChatMessage> FirstTurn() {
  return {Msg(ChatRole::kSystem, "You are a careful assistant who answers briefly."),
          Msg(ChatRole::kUser, "Tell me about the sea, the sky and the wind over the hills.")};
}

TEST(EngineTest, ColdRequestReportsNoReuseAndGeneratesMaxTokens) {
  Fixture f(Options());
  GenerationRequest req = ChatRequest(FirstTurn(), 7);
  const int64_t n_prompt = int64_t(req.prompt_tokens.size());
  auto out = RunNow(f.engine, std::move(req));
  ASSERT_TRUE(out.result) << out.error.ToString();
  EXPECT_EQ(out.events.front().kind, GenerationEvent::Kind::kStarted);
  EXPECT_EQ(out.result->cache.source, CacheSource::kNone);
  EXPECT_EQ(out.result->cache.cached_tokens, 0);
  EXPECT_EQ(out.result->cache.prompt_tokens, n_prompt);
  EXPECT_EQ(out.result->timing.prefill_tokens, n_prompt);
  // A random model practically never samples EOS within 7 tokens.
  EXPECT_EQ(out.result->finish, FinishReason::kLength);
  EXPECT_EQ(out.result->completion_tokens, 7);
  EXPECT_EQ(out.result->reasoning_tokens, 0);  // a non-thinking prompt
  // Progress comes once per 16-token chunk.
  int prefill_events = 0;
  for (const auto& ev : out.events) prefill_events += ev.kind == GenerationEvent::Kind::kPrefill;
  EXPECT_EQ(prefill_events, (n_prompt + 15) / 16);
  const EngineStats s = f.metrics.Snapshot();
  EXPECT_EQ(s.prompt_tokens_prefill, uint64_t(n_prompt));
  EXPECT_EQ(s.live_misses, 1u);
  EXPECT_EQ(s.requests_ok, 1u);
}

// The core promise: continuing a live session gives exactly what a cold run of the same
// ids gives (the last sampled id, left pending, is evaluated first).
TEST(EngineTest, LiveContinuationIsBitIdenticalToColdPrefill) {
  Fixture a(Options());
  auto r1 = RunNow(a.engine, ChatRequest(FirstTurn(), 6));
  ASSERT_TRUE(r1.result);
  std::vector<ChatMessage> hist = FirstTurn();
  ChatMessage reply = Msg(ChatRole::kAssistant, r1.result->parsed.content);
  hist.push_back(reply);
  hist.push_back(Msg(ChatRole::kUser, "And what about the moon?"));
  auto r2 = RunNow(a.engine, ChatRequest(hist, 6));
  ASSERT_TRUE(r2.result) << r2.error.ToString();
  EXPECT_EQ(r2.result->cache.source, CacheSource::kLive);
  // Everything evaluated in turn one is reused: its prompt and all sampled ids but the
  // last, which was never run through the model.
  EXPECT_EQ(r2.result->cache.cached_tokens,
            r1.result->cache.prompt_tokens + r1.result->timing.decode_tokens - 1);
  EXPECT_LT(r2.result->timing.prefill_tokens, 40);

  std::vector<int32_t> effective = AllIds(LastSession(a.engine));
  effective.resize(size_t(r2.result->cache.prompt_tokens));
  Fixture b(Options());
  auto cold = RunNow(b.engine, RawRequest(effective, 6));
  ASSERT_TRUE(cold.result);
  EXPECT_EQ(cold.result->cache.source, CacheSource::kNone);
  EXPECT_EQ(cold.result->text, r2.result->text);
  EXPECT_EQ(a.metrics.Snapshot().prompt_tokens_live, uint64_t(r2.result->cache.cached_tokens));
}

TEST(EngineTest, ExactIdsTakeTheTokenPathAndOnlyPendingIdsAreEvaluated) {
  Fixture f(Options());
  std::vector<int32_t> ids = ChatRequest(FirstTurn(), 1).prompt_tokens;
  auto r1 = RunNow(f.engine, RawRequest(ids, 3));
  ASSERT_TRUE(r1.result);
  std::vector<int32_t> next = AllIds(LastSession(f.engine));
  next.push_back(ids[5]);
  auto r2 = RunNow(f.engine, RawRequest(next, 2));
  ASSERT_TRUE(r2.result);
  EXPECT_EQ(r2.result->cache.detail, "memory-token");
  EXPECT_EQ(r2.result->cache.cached_tokens, int64_t(ids.size()) + 2);
  EXPECT_EQ(r2.result->timing.prefill_tokens, 2);  // the pending id and the new one

  // Asked for exactly the ids a session holds (its last one still pending), only the
  // pending id is evaluated.
  Fixture g(Options());
  auto p = RunNow(g.engine, RawRequest(ids, 1));  // one id sampled, pending
  ASSERT_TRUE(p.result);
  std::vector<int32_t> with_pending = AllIds(LastSession(g.engine));
  auto q = RunNow(g.engine, RawRequest(with_pending, 1));
  ASSERT_TRUE(q.result);
  EXPECT_EQ(q.result->cache.cached_tokens, int64_t(ids.size()));
  EXPECT_EQ(q.result->timing.prefill_tokens, 1);
}

TEST(EngineTest, ThinkingTurnContinuesThroughItsVisibleKey) {
  Fixture f(Options());
  std::vector<ChatMessage> hist = {Msg(ChatRole::kUser, "Think about dogs and cats.")};
  auto r1 = RunNow(f.engine, ChatRequest(hist, 5, ThinkingMode::kHigh));
  ASSERT_TRUE(r1.result);
  // No </think> from a random model: everything is reasoning.
  EXPECT_FALSE(r1.result->parsed.reasoning.empty());
  EXPECT_EQ(r1.result->reasoning_tokens, 5);
  ChatMessage reply = Msg(ChatRole::kAssistant, r1.result->parsed.content);
  hist.push_back(reply);  // the client drops the reasoning; the template would too
  hist.push_back(Msg(ChatRole::kUser, "Go on."));
  auto r2 = RunNow(f.engine, ChatRequest(hist, 3, ThinkingMode::kHigh));
  ASSERT_TRUE(r2.result);
  EXPECT_EQ(r2.result->cache.source, CacheSource::kLive);
  EXPECT_EQ(r2.result->cache.detail, "memory-visible");
  EXPECT_EQ(r2.result->cache.cached_tokens,
            r1.result->cache.prompt_tokens + r1.result->timing.decode_tokens - 1);
}

TEST(EngineTest, LeastRecentlyUsedSessionIsReplacedFirst) {
  auto turn = [](const std::string& topic) {
    return std::vector<ChatMessage>{Msg(ChatRole::kUser, "Write about " + topic + " now.")};
  };
  auto next = [&](const std::string& topic, const GenerationResult& r) {
    auto h = turn(topic);
    h.push_back(Msg(ChatRole::kAssistant, r.parsed.content));
    h.push_back(Msg(ChatRole::kUser, "more"));
    return h;
  };
  for (int live : {2, 3}) {
    Fixture f(Options(live));
    auto a = RunNow(f.engine, ChatRequest(turn("apples"), 3));
    auto b = RunNow(f.engine, ChatRequest(turn("boats"), 3));
    auto c = RunNow(f.engine, ChatRequest(turn("clouds"), 3));
    ASSERT_TRUE(a.result && b.result && c.result);
    auto a2 = RunNow(f.engine, ChatRequest(next("apples", *a.result), 3));
    ASSERT_TRUE(a2.result);
    if (live == 2) {
      // apples was the oldest when clouds came: gone.
      EXPECT_EQ(a2.result->cache.source, CacheSource::kNone);
      EXPECT_EQ(f.metrics.Snapshot().live_evictions, 2u);  // by clouds, then by apples again
    } else {
      // A third unrelated session does not destroy the first's reuse.
      EXPECT_EQ(a2.result->cache.source, CacheSource::kLive);
      EXPECT_EQ(f.metrics.Snapshot().live_evictions, 0u);
    }
    auto c2 = RunNow(f.engine, ChatRequest(next("clouds", *c.result), 3));
    ASSERT_TRUE(c2.result);
    EXPECT_EQ(c2.result->cache.source, CacheSource::kLive);
  }
}

TEST(EngineTest, PromptsBeyondTheContextFailAndMaxTokensIsClamped) {
  Fixture f(Options(4, 16, 64));
  std::vector<int32_t> long_ids(80, 300);
  auto over = RunNow(f.engine, RawRequest(long_ids, 4));
  EXPECT_FALSE(over.result);
  EXPECT_EQ(over.error.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.error.message().find("80 tokens"), std::string::npos);

  std::vector<int32_t> ids(50, 300);
  auto clamped = RunNow(f.engine, RawRequest(ids, 1000));
  ASSERT_TRUE(clamped.result);
  EXPECT_EQ(clamped.result->finish, FinishReason::kLength);
  EXPECT_EQ(clamped.result->completion_tokens, 14);  // 64 - 50: the 14th stays pending
  EXPECT_EQ(LastSession(f.engine).tokens().size(), 63u);
}

TEST(EngineTest, StopSequenceEndsGenerationAndIsCutFromTheText) {
  std::vector<int32_t> ids = ChatRequest(FirstTurn(), 1).prompt_tokens;
  Fixture f(Options());
  auto full = RunNow(f.engine, RawRequest(ids, 12));
  ASSERT_TRUE(full.result);
  const std::string text = full.result->text;
  ASSERT_GE(text.size(), 8u);
  // A stop sequence taken from the middle of what greedy decoding produces.
  const std::string stop = text.substr(text.size() / 2, 3);
  const size_t at = text.find(stop);
  GenerationRequest req = RawRequest(ids, 12);
  req.stop = {"never-appears", stop};
  Fixture g(Options());
  auto cut = RunNow(g.engine, std::move(req));
  ASSERT_TRUE(cut.result);
  EXPECT_EQ(cut.result->finish, FinishReason::kStop);
  EXPECT_EQ(cut.result->stop_sequence, stop);
  EXPECT_EQ(cut.result->text, text.substr(0, at));
  std::string streamed;
  for (const auto& ev : cut.events) {
    if (ev.kind == GenerationEvent::Kind::kText) streamed += ev.text;
  }
  EXPECT_EQ(streamed, cut.result->text);
}

// Cancelling between chunks leaves a consistent session: the next request with the same
// prompt reuses what was evaluated and produces exactly the cold result.
TEST(EngineTest, CancelStopsPrefillBetweenChunksAndKeepsTheSessionUsable) {
  std::vector<ChatMessage> hist = FirstTurn();
  hist[0].content += std::string(" Always be thorough and kind.") + " Keep answers short." +
                     " Use plain words." + " Avoid lists.";
  GenerationRequest req = ChatRequest(hist, 4);
  const int64_t n = int64_t(req.prompt_tokens.size());
  Fixture f(Options(4, 2));
  Scheduler sched(f.engine, f.metrics);
  sched.Start();
  auto h = std::make_shared<RequestHandle>(req);
  ASSERT_TRUE(sched.Submit(h));
  int64_t last_done = 0;
  bool cancelled = false;
  std::shared_ptr<const GenerationResult> result;
  while (!result) {
    auto ev = h->Next(std::chrono::milliseconds(30000));
    ASSERT_TRUE(ev);
    if (ev->kind == GenerationEvent::Kind::kPrefill) {
      last_done = ev->done;
      if (!cancelled) {
        h->Cancel();
        cancelled = true;
      }
    }
    if (ev->kind == GenerationEvent::Kind::kDone) result = ev->result;
    ASSERT_NE(ev->kind, GenerationEvent::Kind::kError);
  }
  EXPECT_EQ(result->finish, FinishReason::kCancelled);
  EXPECT_LT(last_done, n);
  EXPECT_EQ(f.metrics.Snapshot().requests_cancelled, 1u);

  auto again = std::make_shared<RequestHandle>(req);
  ASSERT_TRUE(sched.Submit(again));
  auto out = testing::Drain(*again);
  ASSERT_TRUE(out.result);
  EXPECT_EQ(out.result->cache.source, CacheSource::kLive);
  EXPECT_EQ(out.result->cache.cached_tokens, last_done);
  sched.Stop(true);

  Fixture g(Options());
  auto cold = RunNow(g.engine, req);
  ASSERT_TRUE(cold.result);
  EXPECT_EQ(cold.result->text, out.result->text);
}

// Requests from many threads queue for the one worker; each gets exactly what it would get
// alone, so concurrent clients cannot see each other's state.
TEST(EngineTest, ConcurrentRequestsEachMatchTheirSequentialResult) {
  constexpr int kClients = 6;
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < kClients; ++i) {
    reqs.push_back(ChatRequest(
        {Msg(ChatRole::kUser, "Client " + std::to_string(i) + " asks about rivers.")}, 4));
  }
  std::vector<std::string> expected;
  for (const auto& r : reqs) {
    Fixture solo(Options());
    auto out = RunNow(solo.engine, r);
    ASSERT_TRUE(out.result);
    expected.push_back(out.result->text);
  }
  Fixture f(Options(2));
  Scheduler sched(f.engine, f.metrics);
  sched.Start();
  const std::vector<std::string> got = testing::RunConcurrently(sched, reqs);
  sched.Stop(true);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(f.metrics.Snapshot().requests_ok, uint64_t(kClients));
  EXPECT_EQ(f.metrics.Snapshot().queue_depth, 0);
}

TEST(EngineTest, SchedulerCancelsQueuedRequestsWithoutRunningThemAndRefusesAfterStop) {
  Fixture f(Options());
  Scheduler sched(f.engine, f.metrics);
  sched.Start();
  auto slow = std::make_shared<RequestHandle>(ChatRequest(FirstTurn(), 40));
  auto queued = std::make_shared<RequestHandle>(ChatRequest(FirstTurn(), 4));
  ASSERT_TRUE(sched.Submit(slow));
  ASSERT_TRUE(sched.Submit(queued));
  queued->Cancel();
  auto q = testing::Drain(*queued);
  EXPECT_FALSE(q.result);
  EXPECT_EQ(q.error.code(), StatusCode::kCancelled);
  EXPECT_EQ(q.events.size(), 1u);  // never started
  auto s = testing::Drain(*slow);
  ASSERT_TRUE(s.result);
  EXPECT_EQ(s.result->completion_tokens, 40);
  sched.Stop(true);
  EXPECT_FALSE(sched.Submit(std::make_shared<RequestHandle>(ChatRequest(FirstTurn(), 1))));
}

}  // namespace
}  // namespace flashkv
