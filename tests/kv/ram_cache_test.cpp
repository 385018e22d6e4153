// RamCache, the host-RAM tier: restores are bit-exact (also when the put's closed rows were
// still landing asynchronously) and carry the snapshot's ids, logits, text and extensions; lookups
// match by token prefix or text prefix, longest first and within the length bounds; the budget
// holds with least-recently-used eviction; evicted buffers are reused without pinning again, and
// every pinned buffer is unpinned once.
#include "kv_ram/ram_cache.h"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kv_test_util.h"

namespace flashkv {
namespace {

using testing::LayerOf;
using testing::Logits;
using testing::RandomState;
using testing::SmallShape;
using testing::TestIdentity;
using testing::Tokens;

constexpr int kVocab = 50;

// A CPU backend that records page-locking, as the CUDA backend would do it.
class PinRecordingBackend : public CpuBackend {
 public:
  PinRecordingBackend() : CpuBackend(nullptr) {}
  Status PinHost(void* p, size_t bytes) override {
    EXPECT_EQ(pinned.count(p), 0u) << "pinned twice";
    pinned[p] = bytes;
    ++pins;
    return Status::Ok();
  }
  void UnpinHost(void* p) override {
    EXPECT_EQ(pinned.count(p), 1u) << "unpinned without a pin";
    pinned.erase(p);
    ++unpins;
  }
  std::map<void*, size_t> pinned;
  int pins = 0, unpins = 0;
};

struct Saved {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
  std::string text;
};

class RamCacheTest : public ::testing::Test {
 protected:
  RamCacheOptions Options(uint64_t budget) {
    RamCacheOptions o;
    o.budget_bytes = budget;
    o.identity = TestIdentity();
    o.pin = &be_;
    o.standby = false;  // the pin counts below are the puts' own
    return o;
  }
  // Puts a random state of `n` tokens whose ids start with `tokens`' first n.
  Expected<std::string> Put(RamCache& ram, const KvState& st, const Saved& s,
                            std::vector<SnapshotExtension> ext = {},
                            std::span<const int32_t> tail = {}, std::string_view replay = {}) {
    SnapshotContent c;
    c.tokens = s.tokens;
    c.logits = s.logits;
    c.text = s.text;
    c.tail = tail;
    c.replay = replay;
    c.reason = SaveReason::kEvict;
    c.extensions = std::move(ext);
    return ram.Offer(st, c);
  }
  static uint64_t Bytes(int64_t n, const Saved& s, const std::vector<SnapshotExtension>& ext = {}) {
    return SnapshotFileBytes(SmallShape(64), n, kVocab, s.text.size(), ext);
  }
  static Saved Make(int64_t n, int32_t salt, std::string text) {
    return Saved{Tokens(n, salt), Logits(kVocab, float(n)), std::move(text)};
  }

  PinRecordingBackend be_;
};

TEST_F(RamCacheTest, RestoresBitExactlyWithIdsLogitsTextAndExtensions) {
  KvState src = RandomState(be_, SmallShape(64), 37, 1);
  const Saved s = Make(37, 0, "system prompt and turn one");
  const std::vector<SnapshotExtension> ext = {{SnapshotTag("TST1"), std::string("own", 3)}};
  const std::vector<int32_t> tail = {67305985, 9};
  {
    RamCache ram(Options(1 << 20));
    auto key = Put(ram, src, s, ext, tail, "replay");
    ASSERT_TRUE(key.ok()) << key.status().ToString();
    EXPECT_EQ(*key, Sha1Hex(TokensKey(s.tokens)));
    EXPECT_TRUE(ram.Contains(s.tokens));
    EXPECT_EQ(be_.pins, 1);

    // A longer request continues it by its ids.
    std::vector<int32_t> request = s.tokens;
    request.push_back(5);
    request.push_back(6);
    KvState dst = RandomState(be_, SmallShape(64), 50, 2);
    ResumeLookup lookup;
    lookup.tokens = request;
    auto hit = ram.Restore(lookup, dst);
    ASSERT_TRUE(hit.ok()) << hit.status().ToString();
    EXPECT_FALSE(hit->by_text);
    EXPECT_EQ(hit->tokens, s.tokens);
    EXPECT_EQ(hit->logits, s.logits);
    EXPECT_EQ(hit->text, s.text);
    EXPECT_EQ(hit->extensions, ext);
    EXPECT_EQ(hit->tail, tail);
    EXPECT_EQ(hit->replay, "replay");
    EXPECT_EQ(dst.n_tokens(), 37);
    uint64_t layer_bytes = 0;
    for (int l = 0; l < 3; ++l) {
      EXPECT_EQ(LayerOf(dst, l), LayerOf(src, l)) << "layer " << l;
      layer_bytes += dst.LayerFloats(l) * sizeof(float);
    }
    EXPECT_EQ(hit->bytes, layer_bytes);
    const RamCacheStats st = ram.stats();
    EXPECT_EQ(st.entries, 1u);
    EXPECT_EQ(st.hits, 1u);
    EXPECT_EQ(st.puts, 1u);
    EXPECT_EQ(st.bytes_out, layer_bytes);
    SnapshotContent all;
    all.tail = tail;
    all.replay = "replay";
    all.extensions = ext;
    EXPECT_EQ(st.used_bytes, Bytes(37, s, SnapshotExtensionsOf(all)));
  }
  // Destroying the tier unpins what it pinned, before the memory is freed.
  EXPECT_EQ(be_.unpins, 1);
  EXPECT_TRUE(be_.pinned.empty());
}

TEST_F(RamCacheTest, MatchesByTextWhenTheIdsDifferAndPrefersTheLongest) {
  RamCache ram(Options(1 << 20));
  KvState a = RandomState(be_, SmallShape(64), 20, 3);
  KvState b = RandomState(be_, SmallShape(64), 30, 4);
  const Saved sa = Make(20, 0, "<sys>tools</sys>");
  const Saved sb = Make(30, 0, "<sys>tools</sys><user>hi</user>");
  ASSERT_TRUE(Put(ram, a, sa).ok());
  ASSERT_TRUE(Put(ram, b, sb).ok());

  // Other ids (a client resent text that tokenizes differently), same text prefix: the
  // longest entry wins, by text.
  const std::vector<int32_t> other = Tokens(40, 999);
  const std::string text = sb.text + "<assistant>";
  KvState dst = RandomState(be_, SmallShape(64), 1, 5);
  ResumeLookup lookup;
  lookup.tokens = other;
  lookup.text = text;
  auto hit = ram.Restore(lookup, dst);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  EXPECT_TRUE(hit->by_text);
  EXPECT_EQ(hit->text_bytes, sb.text.size());
  EXPECT_EQ(hit->tokens, sb.tokens);
  for (int l = 0; l < 3; ++l) EXPECT_EQ(LayerOf(dst, l), LayerOf(b, l));

  // Length bounds: with at most 25 tokens only the shorter entry is usable.
  lookup.max_tokens = 25;
  hit = ram.Restore(lookup, dst);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->tokens, sa.tokens);
  lookup.min_tokens = 21;
  KvState untouched = RandomState(be_, SmallShape(64), 9, 6);
  const std::vector<float> before = LayerOf(untouched, 1);
  hit = ram.Restore(lookup, untouched);
  EXPECT_EQ(hit.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(untouched.n_tokens(), 9);
  EXPECT_EQ(LayerOf(untouched, 1), before);
  EXPECT_EQ(ram.stats().misses, 1u);
}

// The tier interface (kv/cache_tier.h): the RAM tier is tier 2, first in the resume order,
// and drops one entry by its key on request.
TEST_F(RamCacheTest, AsATierItComesFirstAndEvictsOneEntryByKey) {
  const Saved s1 = Make(30, 1, "one");
  const Saved s2 = Make(30, 2, "two");
  RamCache ram(Options(uint64_t(64) << 20));
  EXPECT_EQ(ram.source(), CacheSource::kRam);
  EXPECT_EQ(CacheTierNumber(ram.source()), 2);
  EXPECT_EQ(CacheTierNumber(CacheSource::kNone), 5);
  EXPECT_EQ(ResumeOrder(nullptr, &ram, nullptr), std::vector<CacheTier*>{&ram});
  KvState st = RandomState(be_, SmallShape(64), 30, 7);
  auto k1 = Put(ram, st, s1);
  ASSERT_TRUE(k1.ok());
  ASSERT_TRUE(Put(ram, st, s2).ok());
  ASSERT_TRUE(ram.Evict(*k1).ok());
  EXPECT_FALSE(ram.Contains(s1.tokens));
  EXPECT_TRUE(ram.Contains(s2.tokens));
  EXPECT_EQ(ram.Evict(*k1).code(), StatusCode::kNotFound);
  EXPECT_EQ(ram.stats().entries, 1u);
  EXPECT_EQ(be_.unpins, 1);  // its page-locked buffer was let go
}

TEST_F(RamCacheTest, EvictsLeastRecentlyUsedAndReusesTheEvictedBuffer) {
  const Saved s1 = Make(30, 1, "one");
  const Saved s2 = Make(30, 2, "two");
  const Saved s3 = Make(30, 3, "thr");
  // Room for two entries of 30 tokens, not three.
  RamCache ram(Options(2 * Bytes(30, s1) + Bytes(30, s1) / 2));
  KvState st = RandomState(be_, SmallShape(64), 30, 7);
  ASSERT_TRUE(Put(ram, st, s1).ok());
  ASSERT_TRUE(Put(ram, st, s2).ok());
  EXPECT_EQ(be_.pins, 2);
  // Using the first makes the second the least recently used.
  KvState dst = RandomState(be_, SmallShape(64), 1, 8);
  ResumeLookup lookup;
  lookup.tokens = s1.tokens;
  ASSERT_TRUE(ram.Restore(lookup, dst).ok());
  ASSERT_TRUE(Put(ram, st, s3).ok());
  EXPECT_TRUE(ram.Contains(s1.tokens));
  EXPECT_FALSE(ram.Contains(s2.tokens));
  EXPECT_TRUE(ram.Contains(s3.tokens));
  EXPECT_EQ(ram.stats().evictions, 1u);
  EXPECT_LE(ram.stats().used_bytes, ram.stats().budget_bytes);
  // The third took over the second's page-locked buffer: no new pin, none released.
  EXPECT_EQ(be_.pins, 2);
  EXPECT_EQ(be_.unpins, 0);

  // The same ids again replace their entry (no duplicate, the buffer reused).
  ASSERT_TRUE(Put(ram, st, s3).ok());
  EXPECT_EQ(ram.stats().entries, 2u);
  EXPECT_EQ(be_.pins, 2);
}

TEST_F(RamCacheTest, RefusesAnEntryLargerThanTheBudgetWithoutEvicting) {
  const Saved small = Make(10, 1, "s");
  const Saved big = Make(60, 2, "b");
  RamCache ram(Options(Bytes(10, small) + 64));
  KvState a = RandomState(be_, SmallShape(64), 10, 9);
  KvState b = RandomState(be_, SmallShape(64), 60, 10);
  ASSERT_TRUE(Put(ram, a, small).ok());
  auto r = Put(ram, b, big);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(ram.Contains(small.tokens));
  EXPECT_EQ(ram.stats().put_skipped, 1u);
  EXPECT_EQ(ram.stats().evictions, 0u);

  // A tier with no budget admits nothing.
  RamCache none(Options(0));
  EXPECT_EQ(Put(none, a, small).status().code(), StatusCode::kResourceExhausted);
}

TEST_F(RamCacheTest, RestoresIntoALargerContextAndRefusesOneTooSmall) {
  RamCache ram(Options(1 << 20));
  KvState src = RandomState(be_, SmallShape(64), 40, 11);
  const Saved s = Make(40, 0, "x");
  ASSERT_TRUE(Put(ram, src, s).ok());
  ResumeLookup lookup;
  lookup.tokens = s.tokens;
  // A state of context 32 cannot hold 40 tokens: the entry is not a candidate.
  KvState small = RandomState(be_, SmallShape(32), 3, 12);
  EXPECT_EQ(ram.Restore(lookup, small).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(small.n_tokens(), 3);
  KvState large = RandomState(be_, SmallShape(128), 3, 13);
  ASSERT_TRUE(ram.Restore(lookup, large).ok());
  for (int l = 0; l < 3; ++l) EXPECT_EQ(LayerOf(large, l), LayerOf(src, l));
}

TEST_F(RamCacheTest, TheStandbyBufferIsPageLockedAheadAndTakenOnce) {
  PinnedStandby standby(&be_);
  EXPECT_EQ(standby.Take(1000), nullptr);
  standby.Prepare(1 << 20);
  auto buf = standby.Take(1 << 20, /*wait=*/true);
  ASSERT_NE(buf, nullptr);
  EXPECT_TRUE(buf->pinned());
  EXPECT_GE(buf->capacity(), uint64_t(1) << 20);
  EXPECT_EQ(be_.pins, 1);
  EXPECT_EQ(standby.Take(1), nullptr);  // taken
  standby.Prepare(4096);
  EXPECT_EQ(standby.Take(8192, /*wait=*/true), nullptr);  // too small for that
  EXPECT_NE(standby.Take(4096, /*wait=*/true), nullptr);
  // Used as a put's buffer it keeps its pin: nothing is pinned again.
  KvState st = RandomState(be_, SmallShape(64), 37, 14);
  const Saved s = Make(37, 0, "x");
  SnapshotContent c;
  c.tokens = s.tokens;
  c.logits = s.logits;
  auto img = PrepareSnapshot(st, TestIdentity(), c, 1, buf.get());
  ASSERT_TRUE(img.ok());
  EXPECT_TRUE(img->pinned());
  EXPECT_EQ(img->capacity(), uint64_t(1) << 20);
  EXPECT_EQ(be_.pins, 2);  // the 4096-byte one
  buf.reset();
  img = Expected<SnapshotImage>(Internal("dropped"));  // frees the 1 MiB buffer
  EXPECT_EQ(be_.unpins, 2);  // both (the 4096-byte one went with its Take)
}

}  // namespace
}  // namespace flashkv
