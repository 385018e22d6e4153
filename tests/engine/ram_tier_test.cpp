// The RAM tier in the engine (tier 2 of the cascade): an evicted live session comes back
// from RAM, bit-exactly (the same greedy tokens as from the live pool), ahead of the disk;
// a cold chat anchor kept in RAM serves the next session of the same system prompt; a disk
// hit is kept in RAM for the next one; the metrics count the tier and its bytes.
#include <filesystem>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "snapshot/model_fingerprint.h"
#include "tiny_engine_util.h"

namespace flashkv {
namespace {

using testing::ChatRequest;
using testing::Msg;
using testing::RunNow;
using testing::Tiny;

SnapshotIdentity TinyIdentity() {
  auto gguf = GgufFile::Open(testing::TinyModelPath());
  EXPECT_TRUE(gguf.ok());
  auto fp = ModelFingerprint(*gguf);
  EXPECT_TRUE(fp.ok());
  return SnapshotIdentity{*fp, "official/q8"};
}

class RamTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("flashkv-ram-tier-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<RamCache> OpenRam(uint64_t budget = uint64_t(256) << 20) {
    RamCacheOptions o;
    o.budget_bytes = budget;
    o.identity = TinyIdentity();
    o.pin = &Tiny().runtime->backend();
    return std::make_unique<RamCache>(o);
  }
  std::unique_ptr<DiskCache> OpenDisk() {
    DiskCacheOptions o;
    o.dir = dir_.string();
    o.identity = TinyIdentity();
    auto c = DiskCache::Open(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(*c);
  }
  static EngineOptions Options(RamCache* ram, DiskCache* disk, int live) {
    EngineOptions o;
    o.ctx_size = 512;
    o.live_sessions = live;
    o.prefill_chunk = 32;
    o.ram = ram;
    o.disk = disk;
    CachePolicyOptions p;
    p.min_tokens = 16;
    p.boundary_align_tokens = 16;
    p.boundary_trim_tokens = 4;
    p.continued_interval_tokens = 0;
    auto policy = CachePolicy::Create(p);
    EXPECT_TRUE(policy.ok());
    o.policy = *policy;
    return o;
  }

  std::filesystem::path dir_;
};

std::vector<ChatMessage> Conversation(const char* question) {
  return {Msg(ChatRole::kSystem,
              "You are a patient assistant. You explain the weather, the tides and the stars "
              "to curious children, in short sentences, without lists."),
          Msg(ChatRole::kUser, question)};
}

// The second turn of a conversation, after an unrelated request when `evict`.
std::shared_ptr<const GenerationResult> SecondTurn(Engine& e, bool evict) {
  std::vector<ChatMessage> hist = Conversation("Why is the sky blue in the afternoon?");
  auto r1 = RunNow(e, ChatRequest(hist, 5));
  EXPECT_TRUE(r1.result);
  if (evict) {
    auto other = RunNow(e, ChatRequest({Msg(ChatRole::kUser, "Name three trains.")}, 3));
    EXPECT_TRUE(other.result);
  }
  hist.push_back(Msg(ChatRole::kAssistant, r1.result->parsed.content));
  hist.push_back(Msg(ChatRole::kUser, "And at sunset?"));
  auto r2 = RunNow(e, ChatRequest(hist, 6));
  EXPECT_TRUE(r2.result);
  return r2.result;
}

TEST_F(RamTierTest, AnEvictedSessionComesBackFromRamWithTheLiveAnswer) {
  std::shared_ptr<const GenerationResult> live;
  {
    ToolReplayMap replay;
    EngineMetrics metrics;
    Engine e(Tiny().model(), *Tiny().tokenizer, replay, metrics, Options(nullptr, nullptr, 2));
    live = SecondTurn(e, /*evict=*/false);
    EXPECT_EQ(live->cache.source, CacheSource::kLive);
  }
  auto ram = OpenRam();
  auto disk = OpenDisk();
  ToolReplayMap replay;
  EngineMetrics metrics;
  Engine e(Tiny().model(), *Tiny().tokenizer, replay, metrics, Options(ram.get(), disk.get(), 1));
  auto r = SecondTurn(e, /*evict=*/true);
  // RAM comes before the disk, which holds the same evicted session.
  EXPECT_EQ(r->cache.source, CacheSource::kRam);
  EXPECT_EQ(r->cache.detail.rfind("ram-", 0), 0u) << r->cache.detail;
  EXPECT_EQ(r->cache.cached_tokens, live->cache.cached_tokens);
  EXPECT_GT(r->cache.restore_bytes, 0u);
  EXPECT_EQ(r->text, live->text);
  const EngineStats s = metrics.Snapshot();
  EXPECT_EQ(s.ram_hits, 1u);
  EXPECT_EQ(s.disk_hits, 0u);
  EXPECT_EQ(s.prompt_tokens_ram, uint64_t(r->cache.cached_tokens));
  EXPECT_EQ(s.restore_bytes_ram, r->cache.restore_bytes);
  EXPECT_TRUE(s.ram_enabled);
  EXPECT_GE(s.ram.entries, 1u);
  EXPECT_EQ(s.ram.bytes_out, r->cache.restore_bytes);
}

TEST_F(RamTierTest, TheColdAnchorInRamServesTheNextSessionOfTheSameSystemPrompt) {
  auto ram = OpenRam();
  ToolReplayMap replay;
  EngineMetrics metrics;
  // No disk: the RAM tier alone keeps the anchor.
  Engine e(Tiny().model(), *Tiny().tokenizer, replay, metrics, Options(ram.get(), nullptr, 4));
  auto a = RunNow(e, ChatRequest(Conversation("Why is the sky blue?"), 3));
  ASSERT_TRUE(a.result);
  EXPECT_EQ(a.result->cache.source, CacheSource::kNone);
  EXPECT_EQ(ram->stats().puts, 1u);  // the cold anchor
  auto b = RunNow(e, ChatRequest(Conversation("What makes the tides?"), 3));
  ASSERT_TRUE(b.result);
  EXPECT_EQ(b.result->cache.source, CacheSource::kRam);
  EXPECT_GE(b.result->cache.cached_tokens, 16);
  EXPECT_LT(b.result->cache.cached_tokens, b.result->cache.prompt_tokens);
}

TEST_F(RamTierTest, ADiskHitIsKeptInRamForTheNextSession) {
  {
    auto disk = OpenDisk();
    ToolReplayMap replay;
    EngineMetrics metrics;
    Engine e(Tiny().model(), *Tiny().tokenizer, replay, metrics, Options(nullptr, disk.get(), 4));
    ASSERT_TRUE(RunNow(e, ChatRequest(Conversation("Why is the sky blue?"), 3)).result);
    ASSERT_TRUE(disk->Flush().ok());
  }
  // A restarted server: empty RAM, the anchor on disk.
  auto ram = OpenRam();
  auto disk = OpenDisk();
  ToolReplayMap replay;
  EngineMetrics metrics;
  Engine e(Tiny().model(), *Tiny().tokenizer, replay, metrics, Options(ram.get(), disk.get(), 4));
  auto b = RunNow(e, ChatRequest(Conversation("What makes the tides?"), 3));
  ASSERT_TRUE(b.result);
  EXPECT_EQ(b.result->cache.source, CacheSource::kDisk);
  auto c = RunNow(e, ChatRequest(Conversation("Where do stars go by day?"), 3));
  ASSERT_TRUE(c.result);
  EXPECT_EQ(c.result->cache.source, CacheSource::kRam);
  EXPECT_EQ(c.result->cache.cached_tokens, b.result->cache.cached_tokens);
  EXPECT_EQ(metrics.Snapshot().disk_hits, 1u);
}

}  // namespace
}  // namespace flashkv
