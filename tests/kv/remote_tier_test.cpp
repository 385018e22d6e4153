// The shared KV tier end to end inside one process, against a real redis-server: a save
// in one disk cache is mirrored, a second cache with its own directory fetches the
// longest prefix, keeps it (Import) and restores it bit-exactly; damage falls back to a
// shorter entry; the store killed, back again, and full never fail a lookup. Saves are
// version 2 (16-token chunks): an entry is its manifest and the chunks it names, a chunk
// shared by two entries is stored once in the store and fetched once by the second cache.
#include "kv_remote/remote_tier.h"

#include <chrono>
#include <cstring>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "chunk_test_util.h"
#include "kv_disk/disk_cache.h"
#include "kv_remote/remote_address.h"
#include "kv_remote/remote_frame.h"
#include "kv_test_util.h"
#include "redis_server.h"
#include "util/file_io.h"

namespace flashkv {
namespace {

using testing::ExpectLayers;
using testing::GrownLayers;
using testing::LayerOf;
using testing::Logits;
using testing::MakeTempDir;
using testing::RandomState;
using testing::RedisServer;
using testing::SmallShape;
using testing::TestIdentity;
using testing::Tokens;
using testing::WriteGrown;

constexpr int kVocab = 1000;
constexpr uint32_t kChunk = 16;

class RemoteTierTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(redis_.Start()); }

  RemoteTierOptions TierOptions() {
    RemoteTierOptions o;
    o.store.address = *ParseRemoteAddress(redis_.url());
    o.store.model = TestIdentity().model;
    o.store.part_bytes = 4096;  // a tiny snapshot still spans several parts
    o.numerics = TestIdentity().numerics;
    o.backoff_min_ms = 20;
    o.backoff_max_ms = 200;
    return o;
  }

  std::unique_ptr<DiskCache> OpenCache(const std::string& dir, uint32_t chunk_tokens = kChunk,
                                       uint64_t budget = uint64_t(64) << 20) {
    DiskCacheOptions o;
    o.dir = dir;
    o.budget_bytes = budget;
    o.identity = TestIdentity();
    o.chunk_tokens = chunk_tokens;
    auto c = DiskCache::Open(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(*c);
  }

  // A cache whose saves are mirrored by `tier`.
  std::unique_ptr<DiskCache> MirroredCache(RemoteTier& tier, uint32_t chunk_tokens = kChunk) {
    auto cache = OpenCache(MakeTempDir("remote-a"), chunk_tokens);
    cache->SetStoredHook([&tier](const DiskStoredEntry& e) {
      tier.Enqueue(RemoteUpload{e.key, e.n_tokens, e.paths});
    });
    return cache;
  }

  std::string Save(DiskCache& cache, const std::vector<int32_t>& ids, int64_t n, uint32_t seed) {
    KvState st = RandomState(be_, SmallShape(), n, seed);
    const std::vector<int32_t> prefix(ids.begin(), ids.begin() + n);
    const auto logits = Logits(kVocab, float(seed));
    SnapshotContent c;
    c.tokens = prefix;
    c.logits = logits;
    c.reason = SaveReason::kCold;
    auto key = cache.Save(st, c);
    EXPECT_TRUE(key.ok()) << key.status().ToString();
    EXPECT_TRUE(cache.Flush().ok());
    saved_[seed] = {LayerOf(st, 0), LayerOf(st, 1), LayerOf(st, 2)};
    return key.ok() ? *key : "";
  }

  // Fetches for `request` through `tier` into `cache` and restores it; the hit's key.
  std::string FetchAndRestore(RemoteTier& tier, DiskCache& cache,
                              const std::vector<int32_t>& request, KvState& dst) {
    auto fetched = tier.Fetch(request, 1, 1000, [&cache](std::string_view name, uint64_t bytes) {
      return cache.HasChunk(name, bytes);
    });
    if (!fetched.ok()) return "";
    last_fetched_bytes_ = fetched->bytes;
    std::vector<DiskImportObject> objs;
    for (const RemoteObject& o : fetched->objects) objs.push_back({o.name, o.bytes});
    Status st = cache.Import(fetched->key, fetched->n_tokens, objs);
    EXPECT_TRUE(st.ok()) << st.ToString();
    auto hit = cache.Load(DiskLookup{.tokens = request, .text = {}}, dst);
    EXPECT_TRUE(hit.ok()) << hit.status().ToString();
    if (!hit.ok()) return "";
    EXPECT_EQ(hit->entry.key, fetched->key);
    return fetched->key;
  }

  // Saves the state at n tokens of sequence salt 0 (rows a function of the ids, so two
  // lengths share their closed chunks); returns its layers.
  std::vector<std::vector<float>> SaveGrown(DiskCache& cache, const std::vector<int32_t>& ids,
                                            int64_t n) {
    auto layers = GrownLayers(SmallShape(), n, 0, uint32_t(n));
    auto st = KvState::Create(be_, SmallShape());
    EXPECT_TRUE(st.ok());
    WriteGrown(*st, layers, n);
    const std::vector<int32_t> prefix(ids.begin(), ids.begin() + n);
    const auto logits = Logits(kVocab, float(n));
    SnapshotContent c;
    c.tokens = prefix;
    c.logits = logits;
    c.reason = SaveReason::kContinued;
    EXPECT_TRUE(cache.Save(*st, c).ok());
    EXPECT_TRUE(cache.Flush().ok());
    return layers;
  }

  CpuBackend be_{nullptr};
  RedisServer redis_;
  uint64_t last_fetched_bytes_ = 0;
  std::map<uint32_t, std::vector<std::vector<float>>> saved_;
};

TEST_F(RemoteTierTest, SecondCacheRestoresTheLongestMirroredPrefixBitExact) {
  RemoteTier tier_a(TierOptions());
  auto a = MirroredCache(tier_a);
  const auto ids = Tokens(60);
  Save(*a, ids, 12, 12);
  const std::string k30 = Save(*a, ids, 30, 30);
  Save(*a, Tokens(60, 5), 40, 40);  // another conversation
  ASSERT_TRUE(tier_a.Flush(10000));
  RemoteTierStats sa = tier_a.stats();
  EXPECT_EQ(sa.uploads, 3u);
  EXPECT_GT(sa.bytes_written, 0u);

  // Another server: its own directory, its own connection.
  RemoteTier tier_b(TierOptions());
  const std::string dir_b = MakeTempDir("remote-b");
  auto b = OpenCache(dir_b);
  KvState dst = RandomState(be_, SmallShape(), 5, 1);
  const std::vector<int32_t> request(ids.begin(), ids.begin() + 45);
  ASSERT_EQ(FetchAndRestore(tier_b, *b, request, dst), k30);
  EXPECT_EQ(dst.n_tokens(), 30);
  for (int l = 0; l < 3; ++l) EXPECT_EQ(LayerOf(dst, l), saved_[30][l]) << l;
  RemoteTierStats sb = tier_b.stats();
  EXPECT_EQ(sb.hits, 1u);
  EXPECT_GT(sb.bytes_read, 0u);
  // Kept locally: a restart of B finds it on its own disk.
  b.reset();
  b = OpenCache(dir_b);
  EXPECT_EQ(b->List().size(), 1u);
  EXPECT_TRUE(b->Contains(std::vector<int32_t>(ids.begin(), ids.begin() + 30)));

  // Shorter than every entry, or another branch: a miss.
  EXPECT_EQ(
      tier_b.Fetch(std::vector<int32_t>(ids.begin(), ids.begin() + 10), 1, 1000).status().code(),
      StatusCode::kNotFound);
  EXPECT_EQ(tier_b.Fetch(Tokens(60, 9), 1, 1000).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(tier_b.stats().misses, 2u);
  // max_tokens bounds the candidates (the state's context).
  auto bounded = tier_b.Fetch(request, 1, 29);
  ASSERT_TRUE(bounded.ok());
  EXPECT_EQ(bounded->n_tokens, 12u);

  // Mirroring an entry another server stored already writes nothing.
  const uint64_t before = tier_a.stats().bytes_written;
  tier_b.Enqueue(RemoteUpload{k30, 30, {JoinPath(dir_b, k30 + ".kv")}});
  ASSERT_TRUE(tier_b.Flush(10000));
  EXPECT_EQ(tier_b.stats().bytes_written, 0u);
  EXPECT_EQ(tier_a.stats().bytes_written, before);
}

TEST_F(RemoteTierTest, DamagedOrForeignEntriesAreNeverLoadedAndAShorterOneServes) {
  RemoteTier tier_a(TierOptions());
  auto a = MirroredCache(tier_a);
  const auto ids = Tokens(60);
  const std::string k12 = Save(*a, ids, 12, 12);
  const std::string k30 = Save(*a, ids, 30, 30);
  ASSERT_TRUE(tier_a.Flush(10000));
  const Sha1Digest model = TestIdentity().model;
  const std::string part = RemoteObjectKey(model, k30 + ".kv", 1);
  std::string v = redis_.Command({"GET", part});
  ASSERT_GT(v.size(), kRemoteFrameBytes + 100);
  v[kRemoteFrameBytes + 77] = char(v[kRemoteFrameBytes + 77] ^ 0x40);
  ASSERT_EQ(redis_.Command({"SET", part, v}), "OK");

  RemoteTier tier_b(TierOptions());
  auto b = OpenCache(MakeTempDir("remote-b"));
  KvState dst = RandomState(be_, SmallShape(), 5, 1);
  const std::vector<int32_t> request(ids.begin(), ids.begin() + 40);
  ASSERT_EQ(FetchAndRestore(tier_b, *b, request, dst), k12);
  for (int l = 0; l < 3; ++l) EXPECT_EQ(LayerOf(dst, l), saved_[12][l]) << l;
  EXPECT_EQ(tier_b.stats().damaged, 1u);

  // The 12-token entry's object replaced by another model's intact value.
  const std::string p0 = RemoteObjectKey(model, k12 + ".kv", 0);
  const std::string raw = redis_.Command({"GET", p0});
  uint32_t parts = 0;
  std::memcpy(&parts, raw.data() + 32, 4);  // the frame's part count
  ASSERT_EQ(redis_.Command({"SET", p0,
                            FrameRemotePart(Sha1Of("model-b"), 0, parts,
                                            std::string_view(raw).substr(kRemoteFrameBytes))}),
            "OK");
  EXPECT_EQ(tier_b.Fetch(request, 1, 1000).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(tier_b.stats().foreign, 1u);
  EXPECT_EQ(tier_b.stats().damaged, 2u);
}

TEST_F(RemoteTierTest, StoreKilledMidRunNeverFailsALookupAndUploadsResumeWhenItReturns) {
  RemoteTier tier_a(TierOptions());
  auto a = MirroredCache(tier_a);
  const auto ids = Tokens(60);
  Save(*a, ids, 12, 12);
  ASSERT_TRUE(tier_a.Flush(10000));
  redis_.Stop();

  // Saves go on locally; their uploads wait. Lookups miss without waiting for the store.
  const std::string k30 = Save(*a, ids, 30, 30);
  for (int i = 0; i < 100 && !tier_a.stats().backoff; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(tier_a.stats().backoff);
  EXPECT_GE(tier_a.stats().errors, 1u);
  // In backoff a lookup is a plain miss (kNotFound, counted), never an error.
  const RemoteTierStats before = tier_a.stats();
  EXPECT_EQ(tier_a.Fetch(ids, 1, 1000).status().code(), StatusCode::kNotFound);
  const RemoteTierStats after = tier_a.stats();
  EXPECT_TRUE(after.backoff);
  EXPECT_EQ(after.misses, before.misses + 1);
  EXPECT_FALSE(tier_a.Flush(100));  // still queued

  ASSERT_TRUE(redis_.Start());  // empty: no persistence
  ASSERT_TRUE(tier_a.Flush(20000));
  EXPECT_FALSE(tier_a.stats().backoff);
  EXPECT_EQ(tier_a.stats().uploads, 2u);

  RemoteTier tier_b(TierOptions());
  auto b = OpenCache(MakeTempDir("remote-b"));
  KvState dst = RandomState(be_, SmallShape(), 5, 1);
  ASSERT_EQ(FetchAndRestore(tier_b, *b, ids, dst), k30);
  for (int l = 0; l < 3; ++l) EXPECT_EQ(LayerOf(dst, l), saved_[30][l]) << l;
}

TEST_F(RemoteTierTest, FullStoreRefusesUploadsWhileLookupsGoOn) {
  RemoteTier tier_a(TierOptions());
  auto a = MirroredCache(tier_a);
  const auto ids = Tokens(60);
  const std::string k12 = Save(*a, ids, 12, 12);
  ASSERT_TRUE(tier_a.Flush(10000));
  ASSERT_EQ(redis_.Command({"CONFIG", "SET", "maxmemory-policy", "noeviction"}), "OK");
  ASSERT_EQ(redis_.Command({"CONFIG", "SET", "maxmemory", "1"}), "OK");
  Save(*a, ids, 30, 30);
  for (int i = 0; i < 100 && tier_a.stats().refused == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GE(tier_a.stats().refused, 1u);
  EXPECT_TRUE(tier_a.stats().writes_backoff);
  EXPECT_FALSE(tier_a.stats().backoff);

  RemoteTier tier_b(TierOptions());
  auto b = OpenCache(MakeTempDir("remote-b"));
  KvState dst = RandomState(be_, SmallShape(), 5, 1);
  ASSERT_EQ(FetchAndRestore(tier_b, *b, ids, dst), k12);

  // Room again: the queued upload goes.
  ASSERT_EQ(redis_.Command({"CONFIG", "SET", "maxmemory", "0"}), "OK");
  ASSERT_TRUE(tier_a.Flush(20000));
  EXPECT_FALSE(tier_a.stats().writes_backoff);
  EXPECT_EQ(tier_a.stats().uploads, 2u);
}

TEST_F(RemoteTierTest, FullQueueDropsAndCounts) {
  RemoteTierOptions o = TierOptions();
  o.max_queued = 2;
  redis_.Stop();  // nothing drains the queue
  RemoteTier tier(o);
  for (int i = 0; i < 5; ++i) tier.Enqueue(RemoteUpload{Sha1Hex(Sha1Of(std::to_string(i))), 1, {}});
  for (int i = 0; i < 100 && !tier.stats().backoff; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const RemoteTierStats s = tier.stats();
  EXPECT_EQ(s.dropped, 3u);
  EXPECT_EQ(s.queued, 2u);
}

// Sum of the sizes of the regular files in `dir` whose names end with `suffix`.
uint64_t FileBytes(const std::string& dir, std::string_view suffix, size_t* count = nullptr) {
  uint64_t total = 0;
  size_t n = 0;
  auto list = ListDirectory(dir);
  if (!list.ok()) return 0;
  for (const DirEntry& e : *list) {
    if (e.is_regular && e.name.ends_with(suffix)) {
      total += e.size;
      ++n;
    }
  }
  if (count != nullptr) *count = n;
  return total;
}

TEST_F(RemoteTierTest, EntriesSharingAChunkStoreAndFetchItOnce) {
  RemoteTier tier_a(TierOptions());
  const std::string dir_a = MakeTempDir("remote-a");
  auto a = OpenCache(dir_a);
  a->SetStoredHook([&tier_a](const DiskStoredEntry& e) {
    tier_a.Enqueue(RemoteUpload{e.key, e.n_tokens, e.paths});
  });
  const auto ids = Tokens(60);
  const auto l20 = SaveGrown(*a, ids, 20);  // chunk 0
  const auto l40 = SaveGrown(*a, ids, 40);  // chunks 0 and 1
  ASSERT_TRUE(tier_a.Flush(10000));
  EXPECT_EQ(tier_a.stats().uploads, 2u);
  size_t manifests = 0, chunks = 0;
  const uint64_t manifest_bytes = FileBytes(dir_a, ".kv", &manifests);
  const uint64_t chunk_bytes = FileBytes(ChunkDirOf(dir_a), kChunkSuffix, &chunks);
  ASSERT_EQ(manifests, 2u);
  ASSERT_EQ(chunks, 2u);
  // Every file once: the shared chunk was not uploaded again with the second entry.
  EXPECT_EQ(tier_a.stats().bytes_written, manifest_bytes + chunk_bytes);

  RemoteTier tier_b(TierOptions());
  const std::string dir_b = MakeTempDir("remote-b");
  auto b = OpenCache(dir_b);
  auto dst = KvState::Create(be_, SmallShape());
  ASSERT_TRUE(dst.ok());
  const std::vector<int32_t> r25(ids.begin(), ids.begin() + 25);
  ASSERT_FALSE(FetchAndRestore(tier_b, *b, r25, *dst).empty());
  EXPECT_EQ(dst->n_tokens(), 20);
  ExpectLayers(*dst, l20);
  EXPECT_EQ(b->stats().chunks_written, 1u);
  const uint64_t first = last_fetched_bytes_;

  // The longer entry: its manifest and chunk 1 come; chunk 0 is B's already.
  const std::vector<int32_t> r45(ids.begin(), ids.begin() + 45);
  ASSERT_FALSE(FetchAndRestore(tier_b, *b, r45, *dst).empty());
  EXPECT_EQ(dst->n_tokens(), 40);
  ExpectLayers(*dst, l40);
  EXPECT_EQ(b->stats().chunks_written, 2u);
  EXPECT_EQ(first + last_fetched_bytes_, manifest_bytes + chunk_bytes);
  size_t b_chunks = 0;
  EXPECT_EQ(FileBytes(ChunkDirOf(dir_b), kChunkSuffix, &b_chunks), chunk_bytes);
  EXPECT_EQ(b_chunks, 2u);

  // What B imported is its own: a restart's sweep keeps both chunks and both load.
  b.reset();
  b = OpenCache(dir_b);
  EXPECT_EQ(b->List().size(), 2u);
  EXPECT_EQ(FileBytes(ChunkDirOf(dir_b), kChunkSuffix), chunk_bytes);
  auto again = KvState::Create(be_, SmallShape());
  ASSERT_TRUE(again.ok());
  auto hit = b->Load(DiskLookup{.tokens = r45, .text = {}}, *again);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  ExpectLayers(*again, l40);
}

TEST_F(RemoteTierTest, ImportChecksChunksAndCountsOnlyMissingOnesAgainstTheBudget) {
  RemoteTier tier_a(TierOptions());
  auto a = MirroredCache(tier_a);
  const auto ids = Tokens(60);
  SaveGrown(*a, ids, 20);
  const auto l40 = SaveGrown(*a, ids, 40);
  ASSERT_TRUE(tier_a.Flush(10000));
  RemoteTier tier_b(TierOptions());
  auto f20 = tier_b.Fetch(std::vector<int32_t>(ids.begin(), ids.begin() + 20), 1, 1000);
  auto f40 = tier_b.Fetch(ids, 1, 1000);
  ASSERT_TRUE(f20.ok() && f40.ok());
  ASSERT_EQ(f40->objects.size(), 3u);  // manifest, chunk 0, chunk 1
  auto objects = [](const RemoteFetched& f) {
    std::vector<DiskImportObject> out;
    for (const RemoteObject& o : f.objects) out.push_back({o.name, o.bytes});
    return out;
  };

  // A damaged chunk is refused before anything is written; so is a stray name.
  const std::string dir_b = MakeTempDir("remote-b");
  {
    auto b = OpenCache(dir_b);
    RemoteFetched bad = *f40;
    for (RemoteObject& o : bad.objects) {
      if (o.name.ends_with(kChunkSuffix)) {
        o.bytes[o.bytes.size() - 3] ^= 0x10;
        break;
      }
    }
    EXPECT_EQ(b->Import(bad.key, bad.n_tokens, objects(bad)).code(), StatusCode::kCorrupt);
    std::vector<DiskImportObject> stray = objects(*f40);
    stray.push_back({"notes.txt", "x"});
    EXPECT_EQ(b->Import(f40->key, f40->n_tokens, stray).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(FileBytes(dir_b, ".kv"), 0u);
    EXPECT_EQ(FileBytes(ChunkDirOf(dir_b), kChunkSuffix), 0u);
    // A manifest without the chunks it names is not loadable here.
    std::vector<DiskImportObject> alone = objects(*f40);
    alone.resize(1);
    ASSERT_EQ(alone[0].name, f40->key + ".kv");
    EXPECT_EQ(b->Import(f40->key, f40->n_tokens, alone).code(), StatusCode::kCorrupt);
  }

  // A budget that holds the 20-token entry and the 40-token one only because chunk 0 is
  // shared: the second import is admitted without evicting the first.
  uint64_t total = 0;
  for (const RemoteObject& o : f40->objects) total += o.bytes.size();
  uint64_t m20 = 0;
  for (const RemoteObject& o : f20->objects) {
    if (o.name.ends_with(".kv")) m20 = o.bytes.size();
  }
  const std::string dir_c = MakeTempDir("remote-c");
  auto c = OpenCache(dir_c, kChunk, total + m20 + 64);
  ASSERT_TRUE(c->Import(f20->key, f20->n_tokens, objects(*f20)).ok());
  Status st = c->Import(f40->key, f40->n_tokens, objects(*f40));
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(c->List().size(), 2u);
  EXPECT_EQ(c->stats().chunks_written, 2u);
  auto dst = KvState::Create(be_, SmallShape());
  ASSERT_TRUE(dst.ok());
  auto hit = c->Load(DiskLookup{.tokens = ids, .text = {}}, *dst);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  ExpectLayers(*dst, l40);
}

TEST_F(RemoteTierTest, Version1EntriesStillMirrorAndRestore) {
  RemoteTier tier_a(TierOptions());
  auto a = MirroredCache(tier_a, /*chunk_tokens=*/0);
  const auto ids = Tokens(60);
  const std::string k30 = Save(*a, ids, 30, 30);
  ASSERT_TRUE(tier_a.Flush(10000));
  RemoteTier tier_b(TierOptions());
  auto b = OpenCache(MakeTempDir("remote-b"));
  KvState dst = RandomState(be_, SmallShape(), 5, 1);
  ASSERT_EQ(FetchAndRestore(tier_b, *b, ids, dst), k30);
  for (int l = 0; l < 3; ++l) EXPECT_EQ(LayerOf(dst, l), saved_[30][l]) << l;
}

}  // namespace
}  // namespace flashkv
