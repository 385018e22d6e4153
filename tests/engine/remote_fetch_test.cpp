// The remote tier off the engine's worker thread (engine_remote.cpp): a real redis-server
// holds an entry another engine computed; this engine reaches it through a proxy that
// can hold the store's answers (tests/engine/pausable_proxy.h), so its lookup is slow for
// as long as the test wants, without depending on any speed. While the lookup waits,
// another session's tokens keep coming and the waiting request has seen no event; when
// the store answers, the request restores the entry (x-flashkv-cache: remote) and
// generates what a cold run does. A client that leaves during the lookup gets its
// cancellation at once, and the next request for the same prefix is a remote hit.
#include <filesystem>

#include <gtest/gtest.h>

#include "../kv/redis_server.h"
#include "engine/engine.h"
#include "kv_remote/remote_address.h"
#include "pausable_proxy.h"
#include "snapshot/model_fingerprint.h"
#include "tiny_engine_util.h"

namespace flashkv {
namespace {

using testing::Drain;
using testing::PausableProxy;
using testing::RawRequest;
using testing::RedisServer;
using testing::RunNow;
using testing::Tiny;

std::vector<int32_t> Ids(int n, int salt) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[size_t(i)] = 100 + (i * 37 + salt * 11) % 800;
  return ids;
}

class RemoteFetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(redis_.Start());
    auto gguf = GgufFile::Open(testing::TinyModelPath());
    ASSERT_TRUE(gguf.ok());
    auto fp = ModelFingerprint(*gguf);
    ASSERT_TRUE(fp.ok());
    identity_ = SnapshotIdentity{*fp, "official/q8"};
  }

  std::string Dir(const char* what) {
    const auto d = std::filesystem::path(::testing::TempDir()) /
                   (std::string("flashkv-remote-fetch-") + what + "-" + std::to_string(::getpid()) +
                    "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(d);
    dirs_.push_back(d);
    return d.string();
  }
  void TearDown() override {
    for (const auto& d : dirs_) std::filesystem::remove_all(d);
  }

  std::unique_ptr<DiskCache> OpenCache(const std::string& dir) {
    DiskCacheOptions o;
    o.dir = dir;
    o.identity = identity_;
    auto c = DiskCache::Open(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(*c);
  }

  RemoteTierOptions TierOptions(int port) {
    RemoteTierOptions o;
    o.store.address = *ParseRemoteAddress("redis://127.0.0.1:" + std::to_string(port));
    o.store.model = identity_.model;
    // Held answers must not time out: the proxy decides when the store answers.
    o.store.command_timeout_ms = 120000;
    o.numerics = identity_.numerics;
    return o;
  }

  EngineOptions Options(DiskCache* disk, RemoteTier* remote) {
    EngineOptions o;
    o.ctx_size = 512;
    o.live_sessions = 4;
    o.prefill_chunk = 32;
    o.disk = disk;
    o.remote = remote;
    CachePolicyOptions p;
    p.min_tokens = 16;
    p.boundary_align_tokens = 16;
    p.boundary_trim_tokens = 4;
    auto policy = CachePolicy::Create(p);
    EXPECT_TRUE(policy.ok());
    o.policy = *policy;
    return o;
  }

  // Another server computes `prompt` (one sampled token stays pending, so the shutdown
  // snapshot holds exactly the prompt) and mirrors it to the store.
  void MirrorFromAnotherServer(const std::vector<int32_t>& prompt) {
    RemoteTier tier(TierOptions(redis_.port()));
    auto cache = OpenCache(Dir("a"));
    cache->SetStoredHook([&tier](const DiskStoredEntry& e) {
      tier.Enqueue(RemoteUpload{e.key, e.n_tokens, e.paths});
    });
    ToolReplayMap replay;
    EngineMetrics metrics;
    Engine e(Tiny().model(), *Tiny().tokenizer, replay, metrics, Options(cache.get(), nullptr));
    auto r = RunNow(e, RawRequest(prompt, 1));
    ASSERT_TRUE(r.result) << r.error.ToString();
    e.OnShutdown();
    ASSERT_TRUE(tier.Flush(20000));
    ASSERT_GE(tier.stats().uploads, 1u);
  }

  // The ids a cold engine (no tiers) generates for `request`.
  std::vector<int32_t> ColdIds(GenerationRequest request) {
    ToolReplayMap replay;
    EngineMetrics metrics;
    Engine e(Tiny().model(), *Tiny().tokenizer, replay, metrics, Options(nullptr, nullptr));
    auto r = RunNow(e, std::move(request));
    EXPECT_TRUE(r.result) << r.error.ToString();
    return r.result ? r.result->ids : std::vector<int32_t>{};
  }

  static GenerationRequest Streaming(int salt) {
    GenerationRequest r = RawRequest(Ids(20, salt), 450);
    r.eval.never_eos = true;  // runs its length: it is still streaming whatever happens
    return r;
  }

  RedisServer redis_;
  SnapshotIdentity identity_;
  std::vector<std::filesystem::path> dirs_;
};

TEST_F(RemoteFetchTest, OtherSessionsKeepStreamingWhileALookupWaitsForTheStore) {
  const std::vector<int32_t> shared = Ids(96, 1);
  MirrorFromAnotherServer(shared);
  std::vector<int32_t> prompt = shared;
  for (int32_t id : Ids(12, 2)) prompt.push_back(id);
  const std::vector<int32_t> cold = ColdIds(RawRequest(prompt, 8));
  ASSERT_EQ(cold.size(), 8u);

  PausableProxy proxy(redis_.port());
  RemoteTier tier(TierOptions(proxy.port()));
  auto cache = OpenCache(Dir("b"));
  ToolReplayMap replay;
  EngineMetrics metrics;
  Engine engine(Tiny().model(), *Tiny().tokenizer, replay, metrics, Options(cache.get(), &tier));
  Scheduler sched(engine, metrics);
  sched.Start();

  // A session streams (its own lookup missed: no entry as short as its prompt).
  auto streaming = std::make_shared<RequestHandle>(Streaming(3));
  ASSERT_TRUE(sched.Submit(streaming));
  auto next_text = [&](RequestHandle& h) {
    while (auto ev = h.Next(std::chrono::milliseconds(30000))) {
      if (ev->kind == GenerationEvent::Kind::kText) return true;
      if (ev->kind == GenerationEvent::Kind::kDone || ev->kind == GenerationEvent::Kind::kError) {
        return false;
      }
    }
    return false;
  };
  ASSERT_TRUE(next_text(*streaming));

  // The store stops answering; a request that needs it is asked for and waits.
  proxy.Pause();
  auto waiting = std::make_shared<RequestHandle>(RawRequest(prompt, 8));
  ASSERT_TRUE(sched.Submit(waiting));
  ASSERT_TRUE(proxy.WaitForRequestWhilePaused(std::chrono::milliseconds(30000)));
  // The worker is not blocked: the other session's tokens keep coming, and the waiting
  // request has seen nothing yet (its lookup cannot have an answer).
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(next_text(*streaming)) << i;
  EXPECT_FALSE(waiting->Next(std::chrono::milliseconds(0)).has_value());
  EXPECT_FALSE(waiting->finished());
  EXPECT_EQ(metrics.Snapshot().remote_fetches_waiting, 1) << "/metrics shows the waiting request";

  proxy.Resume();
  auto out = Drain(*waiting);
  ASSERT_TRUE(out.result) << out.error.ToString();
  ASSERT_FALSE(out.events.empty());
  EXPECT_EQ(out.events.front().kind, GenerationEvent::Kind::kStarted);
  EXPECT_EQ(out.result->cache.source, CacheSource::kRemote);
  EXPECT_EQ(out.result->cache.cached_tokens, int64_t(shared.size()));
  EXPECT_EQ(out.result->ids, cold);  // restored bit-exactly: the cold run's tokens
  EXPECT_GT(out.result->timing.restore_ms, 0.0);
  EXPECT_EQ(tier.stats().hits, 1u);
  EXPECT_EQ(metrics.Snapshot().remote_fetches_waiting, 0);

  streaming->Cancel();
  Drain(*streaming);
  sched.Stop(/*drain=*/false);
}

TEST_F(RemoteFetchTest, ACancelDuringTheLookupEndsAtOnceAndTheNextRequestHits) {
  const std::vector<int32_t> shared = Ids(80, 4);
  MirrorFromAnotherServer(shared);
  std::vector<int32_t> prompt = shared;
  for (int32_t id : Ids(10, 5)) prompt.push_back(id);

  PausableProxy proxy(redis_.port());
  RemoteTier tier(TierOptions(proxy.port()));
  auto cache = OpenCache(Dir("b"));
  ToolReplayMap replay;
  EngineMetrics metrics;
  Engine engine(Tiny().model(), *Tiny().tokenizer, replay, metrics, Options(cache.get(), &tier));
  Scheduler sched(engine, metrics);
  sched.Start();

  proxy.Pause();
  auto leaving = std::make_shared<RequestHandle>(RawRequest(prompt, 4));
  ASSERT_TRUE(sched.Submit(leaving));
  ASSERT_TRUE(proxy.WaitForRequestWhilePaused(std::chrono::milliseconds(30000)));
  leaving->Cancel();
  // Answered while the store still holds its reply: the worker did not wait for it.
  auto gone = Drain(*leaving);
  EXPECT_FALSE(gone.result);
  EXPECT_EQ(gone.error.code(), StatusCode::kCancelled);

  proxy.Resume();
  auto again = std::make_shared<RequestHandle>(RawRequest(prompt, 4));
  ASSERT_TRUE(sched.Submit(again));
  auto hit = Drain(*again);
  ASSERT_TRUE(hit.result) << hit.error.ToString();
  EXPECT_EQ(hit.result->cache.source, CacheSource::kRemote);
  EXPECT_EQ(hit.result->cache.cached_tokens, int64_t(shared.size()));
  sched.Stop(/*drain=*/true);
}

}  // namespace
}  // namespace flashkv
