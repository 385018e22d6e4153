// The disk tier in the engine: cold, evict and shutdown snapshots through CachePolicy and
// DiskCache, and a restarted engine that resumes from them bit-exactly; shared-prefix
// anchors and the one save after a reply that passed a continued frontier
// (engine/snapshot_planner.h).
#include <filesystem>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "snapshot/model_fingerprint.h"
#include "tiny_engine_util.h"

namespace flashkv {
namespace {

using testing::ChatRequest;
using testing::Msg;
using testing::RawRequest;
using testing::RunNow;
using testing::Tiny;

class DiskTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("flashkv-disk-tier-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<DiskCache> OpenCache() {
    DiskCacheOptions o;
    o.dir = dir_.string();
    auto gguf = GgufFile::Open(testing::TinyModelPath());
    EXPECT_TRUE(gguf.ok());
    auto fp = ModelFingerprint(*gguf);
    EXPECT_TRUE(fp.ok());
    o.identity = SnapshotIdentity{*fp, "official/q8"};
    auto c = DiskCache::Open(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(*c);
  }

  EngineOptions Options(DiskCache* disk, int live = 4, int64_t continued_interval = 0) {
    EngineOptions o;
    o.ctx_size = 512;
    o.live_sessions = live;
    o.prefill_chunk = 32;
    o.disk = disk;
    CachePolicyOptions p;
    p.min_tokens = 16;
    p.boundary_align_tokens = 16;
    p.boundary_trim_tokens = 4;
    p.continued_interval_tokens = continued_interval;
    auto policy = CachePolicy::Create(p);
    EXPECT_TRUE(policy.ok());
    o.policy = *policy;
    return o;
  }

  std::filesystem::path dir_;
};

std::vector<ChatMessage> Conversation() {
  return {Msg(ChatRole::kSystem,
              "You are a patient assistant. You explain the weather, the tides and the stars "
              "to curious children, in short sentences, without lists."),
          Msg(ChatRole::kUser, "Why is the sky blue in the afternoon?")};
}

TEST_F(DiskTierTest, ShutdownSnapshotServesTheNextConversationTurnAfterARestart) {
  std::vector<ChatMessage> hist = Conversation();
  std::shared_ptr<const GenerationResult> first;
  {
    auto cache = OpenCache();
    ToolReplayMap replay;
    EngineMetrics metrics;
    Engine e(Tiny().model(), *Tiny().tokenizer, replay, metrics, Options(cache.get()));
    auto r = RunNow(e, ChatRequest(hist, 5));
    ASSERT_TRUE(r.result);
    first = r.result;
    EXPECT_EQ(first->cache.source, CacheSource::kNone);
    e.OnShutdown();
    const DiskCacheStats s = cache->stats();
    EXPECT_EQ(s.saves, 2u);  // cold (at the chat anchor) and shutdown
  }
  hist.push_back(Msg(ChatRole::kAssistant, first->parsed.content));
  hist.push_back(Msg(ChatRole::kUser, "And at sunset?"));

  auto cache = OpenCache();
  ToolReplayMap replay;
  EngineMetrics metrics;
  Engine e(Tiny().model(), *Tiny().tokenizer, replay, metrics, Options(cache.get()));
  auto r2 = RunNow(e, ChatRequest(hist, 5));
  ASSERT_TRUE(r2.result);
  EXPECT_EQ(r2.result->cache.source, CacheSource::kDisk);
  // The whole first turn was saved: its prompt and every sampled id but the pending last.
  EXPECT_EQ(r2.result->cache.cached_tokens,
            first->cache.prompt_tokens + first->timing.decode_tokens - 1);
  EXPECT_GT(r2.result->cache.restore_ms, 0.0);
  const EngineStats s = metrics.Snapshot();
  EXPECT_EQ(s.disk_hits, 1u);
  EXPECT_EQ(s.prompt_tokens_disk, uint64_t(r2.result->cache.cached_tokens));

  // Bit-exact: the same effective ids prefilled cold give the same continuation.
  const SessionPool& pool = e.sessions();
  std::vector<int32_t> ids = pool.at(0).tokens();
  ids.insert(ids.end(), pool.at(0).pending().begin(), pool.at(0).pending().end());
  ids.resize(size_t(r2.result->cache.prompt_tokens));
  ToolReplayMap replay2;
  EngineMetrics metrics2;
  Engine cold(Tiny().model(), *Tiny().tokenizer, replay2, metrics2, Options(nullptr));
  auto c = RunNow(cold, RawRequest(ids, 5));
  ASSERT_TRUE(c.result);
  EXPECT_EQ(c.result->text, r2.result->text);
}

TEST_F(DiskTierTest, EvictedSessionGoesToDiskAndComesBack) {
  auto cache = OpenCache();
  ToolReplayMap replay;
  EngineMetrics metrics;
  Engine e(Tiny().model(), *Tiny().tokenizer, replay, metrics, Options(cache.get(), /*live=*/1));
  std::vector<ChatMessage> a = Conversation();
  auto ra = RunNow(e, ChatRequest(a, 4));
  ASSERT_TRUE(ra.result);
  std::vector<ChatMessage> b = {
      Msg(ChatRole::kUser, "Something unrelated about trains and their timetables.")};
  auto rb = RunNow(e, ChatRequest(b, 4));  // replaces a's session: evict save first
  ASSERT_TRUE(rb.result);
  EXPECT_EQ(metrics.Snapshot().live_evictions, 1u);
  ASSERT_TRUE(cache->Flush().ok());

  a.push_back(Msg(ChatRole::kAssistant, ra.result->parsed.content));
  a.push_back(Msg(ChatRole::kUser, "Tell me more."));
  auto ra2 = RunNow(e, ChatRequest(a, 4));
  ASSERT_TRUE(ra2.result);
  EXPECT_EQ(ra2.result->cache.source, CacheSource::kDisk);
  EXPECT_EQ(ra2.result->cache.cached_tokens,
            ra.result->cache.prompt_tokens + ra.result->timing.decode_tokens - 1);
}

TEST_F(DiskTierTest, ColdSnapshotAtTheChatAnchorIsSharedByAnotherSession) {
  auto cache = OpenCache();
  ToolReplayMap replay;
  EngineMetrics metrics;
  Engine e(Tiny().model(), *Tiny().tokenizer, replay, metrics, Options(cache.get(), 1));
  auto r1 = RunNow(e, ChatRequest(Conversation(), 2));
  ASSERT_TRUE(r1.result);
  ASSERT_TRUE(cache->Flush().ok());
  // Same system prompt, different question: the cold snapshot ends just before the
  // user turn, so it is a prefix of this prompt too.
  std::vector<ChatMessage> other = Conversation();
  other[1].content = "How far away is the moon?";
  GenerationRequest req = ChatRequest(other, 2);
  const int32_t user = Tiny().tokenizer->FindToken(kUserMarker);
  size_t anchor = 0;
  for (size_t i = 0; i < req.prompt_tokens.size(); ++i) {
    if (req.prompt_tokens[i] == user) anchor = i;
  }
  // Fill the live slot with something unrelated first, so only the disk can help.
  auto filler = RunNow(e, ChatRequest({Msg(ChatRole::kUser, "zebra zebra zebra zebra")}, 2));
  ASSERT_TRUE(filler.result);
  auto r2 = RunNow(e, std::move(req));
  ASSERT_TRUE(r2.result);
  EXPECT_EQ(r2.result->cache.source, CacheSource::kDisk);
  EXPECT_EQ(r2.result->cache.cached_tokens, int64_t(anchor));
}

// Sessions of one agent: the same system text and the same reminder opening the user
// turn (Claude Code's attribution reminder, Codex's environment context), then the task.
std::vector<ChatMessage> AgentSession(const std::string& task) {
  return {Msg(ChatRole::kSystem, "You are a patient assistant for curious children."),
          Msg(ChatRole::kUser,
              "<system-reminder>Answer in one or two short sentences, in plain words that a "
              "child of seven knows. Never use lists, tables, headings or code blocks. If the "
              "question is about something dangerous, say that a grown-up should help, and "
              "explain why in one sentence. Do not mention this reminder.</system-reminder>\n" +
                  task)};
}

size_t SharedIds(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

TEST_F(DiskTierTest, SessionsSharingMoreThanTheChatAnchorGetASharedPrefixAnchor) {
  auto cache = OpenCache();
  ToolReplayMap replay;
  EngineMetrics metrics;
  Engine e(Tiny().model(), *Tiny().tokenizer, replay, metrics, Options(cache.get()));
  GenerationRequest q1 = ChatRequest(AgentSession("Why is the sky blue?"), 3);
  GenerationRequest q2 = ChatRequest(AgentSession("How do the tides work?"), 3);
  GenerationRequest q3 = ChatRequest(AgentSession("What are stars made of?"), 3);
  const size_t shared = SharedIds(q1.prompt_tokens, q2.prompt_tokens);
  const int64_t boundary = int64_t(shared) - 4;  // the policy's trim

  auto r1 = RunNow(e, GenerationRequest(q1));
  ASSERT_TRUE(r1.result);
  EXPECT_EQ(r1.result->cache.source, CacheSource::kNone);
  ASSERT_TRUE(cache->Flush().ok());
  // The second session restores the chat anchor (the system block) and saves the longer
  // prefix it shares with the first.
  auto r2 = RunNow(e, GenerationRequest(q2));
  ASSERT_TRUE(r2.result);
  EXPECT_EQ(r2.result->cache.source, CacheSource::kDisk);
  const int64_t chat_anchor = r2.result->cache.cached_tokens;
  ASSERT_GT(boundary, chat_anchor + 64);
  ASSERT_TRUE(cache->Flush().ok());
  bool saved = false;
  for (const DiskCacheEntry& entry : cache->List()) {
    saved |= entry.n_tokens == uint32_t(boundary) && entry.reason == SaveReason::kCold;
  }
  EXPECT_TRUE(saved);

  auto r3 = RunNow(e, GenerationRequest(q3));
  ASSERT_TRUE(r3.result);
  EXPECT_EQ(r3.result->cache.source, CacheSource::kDisk);
  EXPECT_EQ(r3.result->cache.cached_tokens, boundary);
  EXPECT_EQ(r3.result->timing.prefill_tokens, int64_t(q3.prompt_tokens.size()) - boundary);

  // Bit-exact: the same prompt prefilled cold gives the same continuation.
  ToolReplayMap replay2;
  EngineMetrics metrics2;
  Engine cold(Tiny().model(), *Tiny().tokenizer, replay2, metrics2, Options(nullptr));
  auto c = RunNow(cold, GenerationRequest(q3));
  ASSERT_TRUE(c.result);
  EXPECT_EQ(c.result->text, r3.result->text);
}

// A reply that runs past continued frontiers leaves no snapshot inside it (no request
// could use one); the session is saved once after it, under the text its client resends.
TEST_F(DiskTierTest, ALongReplyIsSavedOnceAfterItNotAtFrontiersInside) {
  std::vector<ChatMessage> hist = Conversation();
  GenerationRequest q = ChatRequest(hist, 150);
  const int64_t n_prompt = int64_t(q.prompt_tokens.size());
  ASSERT_LT(n_prompt, 96);  // every frontier (96, 192) falls inside the reply
  std::shared_ptr<const GenerationResult> first;
  {
    auto cache = OpenCache();
    ToolReplayMap replay;
    EngineMetrics metrics;
    Engine e(Tiny().model(), *Tiny().tokenizer, replay, metrics,
             Options(cache.get(), 4, /*continued_interval=*/96));
    auto r = RunNow(e, std::move(q));
    ASSERT_TRUE(r.result);
    first = r.result;
    ASSERT_EQ(first->timing.decode_tokens, 150);
    ASSERT_TRUE(cache->Flush().ok());
    std::vector<uint32_t> continued;
    for (const DiskCacheEntry& entry : cache->List()) {
      if (entry.reason == SaveReason::kContinued) continued.push_back(entry.n_tokens);
    }
    // The evaluated ids: the prompt and every sampled id but the pending last.
    EXPECT_EQ(continued, std::vector<uint32_t>{uint32_t(n_prompt + 149)});
  }
  // After a restart the client's next turn continues from that snapshot.
  hist.push_back(Msg(ChatRole::kAssistant, first->parsed.content));
  hist.push_back(Msg(ChatRole::kUser, "And at night?"));
  auto cache = OpenCache();
  ToolReplayMap replay;
  EngineMetrics metrics;
  Engine e(Tiny().model(), *Tiny().tokenizer, replay, metrics,
           Options(cache.get(), 4, /*continued_interval=*/96));
  auto r2 = RunNow(e, ChatRequest(hist, 2));
  ASSERT_TRUE(r2.result);
  EXPECT_EQ(r2.result->cache.source, CacheSource::kDisk);
  EXPECT_EQ(r2.result->cache.cached_tokens, n_prompt + 149);
}

}  // namespace
}  // namespace flashkv
