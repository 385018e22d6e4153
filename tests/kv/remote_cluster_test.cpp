// The shared KV tier against a real three-master Redis Cluster (tests/kv/redis_cluster.h):
// key slots and redirect parsing; a store given one seed node follows MOVED to every
// node (objects' parts spread over all three) and ASK during a real slot migration; a
// second disk cache restores a mirrored entry bit-exactly through the cluster; a killed
// node turns lookups into plain misses and the local tiers serve.
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "kv_disk/disk_cache.h"
#include "kv_remote/remote_address.h"
#include "kv_remote/remote_cluster.h"
#include "kv_remote/remote_store.h"
#include "kv_remote/remote_tier.h"
#include "kv_test_util.h"
#include "redis_cluster.h"

namespace flashkv {
namespace {

using testing::BytePattern;
using testing::LayerOf;
using testing::Logits;
using testing::MakeTempDir;
using testing::RandomState;
using testing::RedisCluster;
using testing::SmallShape;
using testing::TestIdentity;
using testing::Tokens;

const Sha1Digest kModel = Sha1Of("model-a");

TEST(RemoteClusterSlotTest, KeySlotsAndHashTagsAreRedisClusters) {
  // Values from the Redis Cluster specification and redis-cli CLUSTER KEYSLOT.
  EXPECT_EQ(RedisKeySlot("123456789"), 12739);  // the CRC16/XMODEM check value 0x31C3
  EXPECT_EQ(RedisKeySlot("foo"), 12182);
  EXPECT_EQ(RedisKeySlot("bar"), 5061);
  EXPECT_EQ(RedisKeySlot("{user1000}.following"), RedisKeySlot("user1000"));
  EXPECT_EQ(RedisKeySlot("foo{}{bar}"), RedisKeySlot("foo{}{bar}"));
  EXPECT_NE(RedisKeySlot("foo{}{bar}"), RedisKeySlot("bar"));  // an empty tag hashes it all
  EXPECT_EQ(RedisKeySlot("foo{{bar}}zap"), RedisKeySlot("{bar"));
  EXPECT_EQ(RedisKeySlot("foo{bar}{zap}"), RedisKeySlot("bar"));
}

TEST(RemoteClusterSlotTest, RedirectsParseAndAnythingElseIsNotOne) {
  const RemoteNode from{"10.0.0.1", 7000};
  auto m = ParseRemoteRedirect("MOVED 3999 127.0.0.1:6381", from);
  ASSERT_TRUE(m.has_value());
  EXPECT_FALSE(m->ask);
  EXPECT_EQ(m->slot, 3999);
  EXPECT_EQ(m->node, (RemoteNode{"127.0.0.1", 6381}));
  auto a = ParseRemoteRedirect("ASK 12 :7002", from);  // Redis 7: the same host
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->ask);
  EXPECT_EQ(a->node, (RemoteNode{"10.0.0.1", 7002}));
  auto v6 = ParseRemoteRedirect("MOVED 1 ::1:7003", from);
  ASSERT_TRUE(v6.has_value());
  EXPECT_EQ(v6->node, (RemoteNode{"::1", 7003}));
  for (const char* bad : {"ERR unknown command", "MOVED", "MOVED 16384 h:1", "MOVED x h:1",
                          "ASK 1 nohost", "MOVED 1 h:0", "MOVED 1 h:65536", "OOM command"}) {
    EXPECT_FALSE(ParseRemoteRedirect(bad, from).has_value()) << bad;
  }
}

class RemoteClusterTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cluster_.Start()); }

  RemoteStoreOptions StoreOptions() {
    RemoteStoreOptions o;
    o.address = *ParseRemoteAddress(cluster_.url());
    o.model = kModel;
    o.part_bytes = 1000;
    return o;
  }

  RedisCluster cluster_;
};

TEST_F(RemoteClusterTest, StoreFollowsMovedToEveryNodeAndRoundTripsBitExact) {
  RemoteStore store(StoreOptions());
  ASSERT_TRUE(store.Ping().ok());
  EXPECT_FALSE(store.cluster());                  // nothing redirected yet: a plain RESP client
  const std::string obj = BytePattern(24500, 7);  // 25 parts, each its own key and slot
  ASSERT_TRUE(store.PutObject("big.kv", obj).ok());
  EXPECT_TRUE(store.cluster());
  EXPECT_GE(store.redirects(), 1u);
  // The slot map routes straight to the owners from then on: few redirects for 25 keys.
  EXPECT_LT(store.redirects(), 5u);
  int on[RedisCluster::kNodes] = {};
  for (uint32_t i = 0; i < 25; ++i) {
    const int owner = cluster_.OwnerOf(RemoteObjectKey(kModel, "big.kv", i));
    ASSERT_GE(owner, 0);
    EXPECT_EQ(cluster_.node(owner).Command({"EXISTS", RemoteObjectKey(kModel, "big.kv", i)}), "1");
    ++on[owner];
  }
  for (int n : on) EXPECT_GT(n, 0);  // the parts live on all three masters
  auto has = store.HasObject("big.kv", obj.size());
  ASSERT_TRUE(has.ok());
  EXPECT_TRUE(*has);

  // A fresh client (its own connections, no map yet) reads everything back.
  RemoteStore reader(StoreOptions());
  auto back = reader.GetObject("big.kv", obj.size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, obj);
  const std::string key = Sha1Hex(Sha1Of("ids"));
  ASSERT_TRUE(store.PutEntry("official/q8", {key, 70, {{"big.kv", obj.size()}}}).ok());
  auto rec = reader.GetEntry("official/q8", key);
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->n_tokens, 70u);
  auto lens = reader.Lengths("official/q8", 1, 100, 8);
  ASSERT_TRUE(lens.ok()) << lens.status().ToString();
  EXPECT_EQ(*lens, std::vector<uint32_t>{70});
  ASSERT_TRUE(reader.Ping().ok());  // every master answers
}

TEST_F(RemoteClusterTest, AskDuringASlotMigrationThenMovedWhenItEnds) {
  const std::string part0 = RemoteObjectKey(kModel, "mig.kv", 0);
  const uint16_t slot = RedisKeySlot(part0);
  const int src = cluster_.OwnerOf(part0);
  ASSERT_GE(src, 0);
  const int dst = (src + 1) % RedisCluster::kNodes;
  const std::string src_id = cluster_.NodeId(src), dst_id = cluster_.NodeId(dst);
  const std::string s = std::to_string(slot);
  // The real migration protocol: the target imports, the source migrates; keys the
  // source does not hold are answered with ASK.
  ASSERT_EQ(cluster_.node(dst).Command({"CLUSTER", "SETSLOT", s, "IMPORTING", src_id}), "OK");
  ASSERT_EQ(cluster_.node(src).Command({"CLUSTER", "SETSLOT", s, "MIGRATING", dst_id}), "OK");

  RemoteStore store(StoreOptions());
  const std::string obj = BytePattern(600, 3);  // one part: one key, in the migrating slot
  ASSERT_TRUE(store.PutObject("mig.kv", obj).ok());
  const uint64_t after_put = store.redirects();
  EXPECT_GE(after_put, 1u);  // ASK (and MOVED first when the seed is not the source)
  auto back = store.GetObject("mig.kv", obj.size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, obj);
  EXPECT_GT(store.redirects(), after_put);  // asked again: the map still names the source

  // The migration ends: the slot belongs to the target; the store's map is now wrong.
  for (int i = 0; i < RedisCluster::kNodes; ++i) {
    ASSERT_EQ(cluster_.node(i).Command({"CLUSTER", "SETSLOT", s, "NODE", dst_id}), "OK") << i;
  }
  EXPECT_EQ(cluster_.node(dst).Command({"EXISTS", part0}), "1");
  const uint64_t before = store.redirects();
  back = store.GetObject("mig.kv", obj.size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, obj);
  EXPECT_EQ(store.redirects(), before + 1);  // one MOVED, then the refreshed map
  back = store.GetObject("mig.kv", obj.size());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(store.redirects(), before + 1);
}

TEST_F(RemoteClusterTest, TierRestoresThroughTheClusterAndANodeKilledIsServedLocally) {
  CpuBackend be{nullptr};
  RemoteTierOptions to;
  to.store = StoreOptions();
  to.store.model = TestIdentity().model;
  to.store.part_bytes = 4096;
  to.numerics = TestIdentity().numerics;
  to.backoff_min_ms = 20;
  to.backoff_max_ms = 200;
  auto open = [&](const std::string& dir) {
    DiskCacheOptions o;
    o.dir = dir;
    o.identity = TestIdentity();
    o.chunk_tokens = 16;
    auto c = DiskCache::Open(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(*c);
  };

  RemoteTier tier_a(to);
  auto a = open(MakeTempDir("cluster-a"));
  a->SetStoredHook([&](const DiskStoredEntry& e) {
    tier_a.Enqueue(RemoteUpload{e.key, e.n_tokens, e.paths});
  });
  const auto ids = Tokens(60);
  KvState saved = RandomState(be, SmallShape(), 40, 40);
  const std::vector<int32_t> prefix(ids.begin(), ids.begin() + 40);
  SnapshotContent c;
  c.tokens = prefix;
  const auto logits = Logits(1000, 40.0f);
  c.logits = logits;
  c.reason = SaveReason::kCold;
  auto key = a->Save(saved, c);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  ASSERT_TRUE(a->Flush().ok());
  ASSERT_TRUE(tier_a.Flush(10000));
  ASSERT_EQ(tier_a.stats().uploads, 1u);
  EXPECT_GE(tier_a.stats().redirects, 1u);

  // Another server with its own disk: fetched through the cluster, kept, restored.
  RemoteTier tier_b(to);
  auto b = open(MakeTempDir("cluster-b"));
  auto fetched = tier_b.Fetch(ids, 1, 1000, [&](std::string_view name, uint64_t bytes) {
    return b->HasChunk(name, bytes);
  });
  ASSERT_TRUE(fetched.ok()) << fetched.status().ToString();
  EXPECT_EQ(fetched->key, *key);
  std::vector<DiskImportObject> objs;
  for (const RemoteObject& o : fetched->objects) objs.push_back({o.name, o.bytes});
  ASSERT_TRUE(b->Import(fetched->key, fetched->n_tokens, objs).ok());
  KvState dst = RandomState(be, SmallShape(), 5, 1);
  auto hit = b->Load(DiskLookup{.tokens = ids, .text = {}}, dst);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  EXPECT_EQ(dst.n_tokens(), 40);
  for (int l = 0; l < 3; ++l) EXPECT_EQ(LayerOf(dst, l), LayerOf(saved, l)) << l;
  EXPECT_EQ(hit->logits, logits);

  // The master holding the length index dies (no replica takes over). Lookups become
  // plain misses, the tier backs off (its probe pings every master), and the local disk
  // still serves the entry.
  const int index_node = cluster_.OwnerOf(RemoteLengthsKey(to.store.model, to.numerics));
  ASSERT_GE(index_node, 0);
  cluster_.node(index_node).Stop();
  RemoteTier tier_c(to);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(tier_c.Fetch(ids, 1, 1000).status().code(), StatusCode::kNotFound);
  }
  auto again = tier_b.Fetch(Tokens(60, 3), 1, 1000);
  EXPECT_EQ(again.status().code(), StatusCode::kNotFound);
  for (int i = 0; i < 100 && !tier_c.stats().backoff; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GE(tier_c.stats().errors, 1u);
  EXPECT_TRUE(tier_c.stats().backoff);
  KvState local = RandomState(be, SmallShape(), 5, 2);
  auto served = b->Load(DiskLookup{.tokens = ids, .text = {}}, local);
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  for (int l = 0; l < 3; ++l) EXPECT_EQ(LayerOf(local, l), LayerOf(saved, l)) << l;
}

}  // namespace
}  // namespace flashkv
