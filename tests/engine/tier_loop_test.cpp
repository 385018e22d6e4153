// The resume step's one loop over the snapshot tiers (engine.cpp ResumeFor, kv/cache_tier.h)
// with fake tiers put in EngineOptions::tiers: every tier is asked in order until one
// restores; a miss and a damaged entry go on to the next tier; a restored entry that
// cannot serve the request fails it without asking further; no hit is a cold prefill.
// The hit itself comes from a real RAM tier behind a fake that names itself the disk, so
// the loop, not the tier, decides what the request reports.
#include <gtest/gtest.h>

#include "kv/cache_tier.h"
#include "kv_ram/ram_cache.h"
#include "snapshot/model_fingerprint.h"
#include "tiny_engine_util.h"

namespace flashkv {
namespace {

using testing::RawRequest;
using testing::RunNow;
using testing::Tiny;

class FakeTier : public CacheTier {
 public:
  enum class Mode { kMiss, kDamaged, kBadTail, kDelegate };
  FakeTier(CacheSource source, Mode mode, CacheTier* inner = nullptr)
      : source_(source), mode_(mode), inner_(inner) {}

  CacheSource source() const override { return source_; }
  Expected<TierHit> Restore(const ResumeLookup& lookup, KvState& state) override {
    ++restores;
    switch (mode_) {
      case Mode::kMiss:
        return NotFound("fake tier: no entry");
      case Mode::kDamaged:
        return Corrupt("fake tier: entry failed its checks");
      case Mode::kBadTail: {
        // A text hit whose tail holds an id no vocabulary has.
        TierHit hit;
        hit.by_text = true;
        hit.text = std::string(lookup.text.substr(0, 4));
        hit.tokens.assign(lookup.tokens.begin(), lookup.tokens.begin() + 2);
        hit.tail = {1 << 30};
        return hit;
      }
      case Mode::kDelegate:
        return inner_->Restore(lookup, state);
    }
    return NotFound("fake tier");
  }
  Expected<std::string> Offer(const KvState& state, const SnapshotContent& content) override {
    if (inner_ == nullptr) return ResourceExhausted("fake tier keeps nothing");
    return inner_->Offer(state, content);
  }
  Status Evict(std::string_view key) override { return NotFound("fake tier: no {}", key); }

  int restores = 0;
  void set_mode(Mode mode) { mode_ = mode; }

 private:
  CacheSource source_;
  Mode mode_;
  CacheTier* inner_;
};

std::vector<int32_t> Ids(int n, int salt) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[size_t(i)] = 100 + (i * 37 + salt * 11) % 800;
  return ids;
}

class TierLoopTest : public ::testing::Test {
 protected:
  static EngineOptions Options(std::vector<CacheTier*> tiers, RamCache* ram = nullptr) {
    EngineOptions o;
    o.ctx_size = 512;
    o.live_sessions = 1;
    o.prefill_chunk = 32;
    o.ram = ram;
    o.tiers = std::move(tiers);
    CachePolicyOptions p;
    p.min_tokens = 16;
    p.boundary_align_tokens = 16;
    p.boundary_trim_tokens = 4;
    auto policy = CachePolicy::Create(p);
    EXPECT_TRUE(policy.ok());
    o.policy = *policy;
    return o;
  }

  // A RAM tier holding the state of `prompt`: its session is evicted there by the next
  // request of an engine with one live session.
  std::unique_ptr<RamCache> RamHolding(const std::vector<int32_t>& prompt) {
    auto gguf = GgufFile::Open(testing::TinyModelPath());
    EXPECT_TRUE(gguf.ok());
    auto fp = ModelFingerprint(*gguf);
    EXPECT_TRUE(fp.ok());
    RamCacheOptions ro;
    ro.budget_bytes = uint64_t(256) << 20;
    ro.identity = SnapshotIdentity{*fp, "official/q8"};
    auto ram = std::make_unique<RamCache>(ro);
    ToolReplayMap replay;
    EngineMetrics metrics;
    Engine e(Tiny().model(), *Tiny().tokenizer, replay, metrics, Options({}, ram.get()));
    EXPECT_TRUE(RunNow(e, RawRequest(prompt, 1)).result);
    EXPECT_TRUE(RunNow(e, RawRequest(Ids(40, 9), 1)).result);
    EXPECT_GE(ram->stats().entries, 1u);
    return ram;
  }

  ToolReplayMap replay_;
  EngineMetrics metrics_;
};

TEST_F(TierLoopTest, EveryTierMissesThenTheRequestPrefillsCold) {
  FakeTier ram(CacheSource::kRam, FakeTier::Mode::kMiss);
  FakeTier disk(CacheSource::kDisk, FakeTier::Mode::kMiss);
  Engine e(Tiny().model(), *Tiny().tokenizer, replay_, metrics_, Options({&ram, &disk}));
  auto out = RunNow(e, RawRequest(Ids(48, 1), 2));
  ASSERT_TRUE(out.result) << out.error.ToString();
  EXPECT_EQ(out.result->cache.source, CacheSource::kNone);
  EXPECT_EQ(out.result->cache.cached_tokens, 0);
  EXPECT_EQ(ram.restores, 1);
  EXPECT_EQ(disk.restores, 1);
}

TEST_F(TierLoopTest, ADamagedEntryFallsThroughToTheNextTierWhichRestores) {
  const std::vector<int32_t> prompt = Ids(64, 2);
  std::unique_ptr<RamCache> held = RamHolding(prompt);
  FakeTier damaged(CacheSource::kRam, FakeTier::Mode::kDamaged);
  FakeTier disk(CacheSource::kDisk, FakeTier::Mode::kDelegate, held.get());
  FakeTier after(CacheSource::kRemote, FakeTier::Mode::kMiss);
  std::vector<int32_t> longer = prompt;
  for (int32_t id : Ids(8, 3)) longer.push_back(id);

  Engine e(Tiny().model(), *Tiny().tokenizer, replay_, metrics_,
           Options({&damaged, &disk, &after}));
  auto out = RunNow(e, RawRequest(longer, 3));
  ASSERT_TRUE(out.result) << out.error.ToString();
  EXPECT_EQ(damaged.restores, 1);
  EXPECT_EQ(disk.restores, 1);
  EXPECT_EQ(after.restores, 0);  // the first hit wins
  EXPECT_EQ(out.result->cache.source, CacheSource::kDisk);
  EXPECT_EQ(out.result->cache.detail, "disk-token");
  EXPECT_EQ(out.result->cache.cached_tokens, int64_t(prompt.size()));
  EXPECT_EQ(out.result->cache.prompt_tokens, int64_t(longer.size()));

  // The same entry through the tiers' own order gives the same tokens.
  ToolReplayMap replay;
  EngineMetrics metrics;
  Engine direct(Tiny().model(), *Tiny().tokenizer, replay, metrics, Options({}, held.get()));
  auto same = RunNow(direct, RawRequest(longer, 3));
  ASSERT_TRUE(same.result) << same.error.ToString();
  EXPECT_EQ(same.result->cache.source, CacheSource::kRam);
  EXPECT_EQ(same.result->ids, out.result->ids);
}

TEST_F(TierLoopTest, ARestoredEntryThatCannotServeFailsTheRequestWithoutAskingFurther) {
  FakeTier bad(CacheSource::kRam, FakeTier::Mode::kBadTail);
  FakeTier disk(CacheSource::kDisk, FakeTier::Mode::kMiss);
  Engine e(Tiny().model(), *Tiny().tokenizer, replay_, metrics_, Options({&bad, &disk}));
  auto out = RunNow(e, RawRequest(Ids(48, 4), 2));
  ASSERT_FALSE(out.result);
  EXPECT_EQ(out.error.code(), StatusCode::kCorrupt) << out.error.ToString();
  EXPECT_EQ(bad.restores, 1);
  EXPECT_EQ(disk.restores, 0);
  // The failed request gave its slot back: with one live session, the next one is served.
  bad.set_mode(FakeTier::Mode::kMiss);
  auto next = RunNow(e, RawRequest(Ids(48, 4), 2));
  ASSERT_TRUE(next.result) << next.error.ToString();
  EXPECT_EQ(next.result->cache.source, CacheSource::kNone);
  EXPECT_EQ(disk.restores, 1);
}

}  // namespace
}  // namespace flashkv
