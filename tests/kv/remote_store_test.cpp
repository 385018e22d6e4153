// The shared KV tier's address parsing, value framing and RESP client, against a real
// redis-server (tests/kv/redis_server.h): round trips of multi-part objects, entries and
// the length index, and every kind of damage a stored value can have.
#include "kv_remote/remote_store.h"

#include <string>

#include <gtest/gtest.h>

#include "kv_remote/remote_address.h"
#include "kv_remote/remote_frame.h"
#include "kv_test_util.h"
#include "redis_server.h"

namespace flashkv {
namespace {

using testing::BytePattern;
using testing::RedisServer;

const Sha1Digest kModel = Sha1Of("model-a");
const Sha1Digest kOther = Sha1Of("model-b");

TEST(RemoteAddressTest, ParsesHostPortAndDatabase) {
  auto a = ParseRemoteAddress("redis://127.0.0.1:6380/3");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 6380);
  EXPECT_EQ(a->db, 3);
  auto b = ParseRemoteAddress("redis://cache-1.internal:6379");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->db, 0);
  EXPECT_EQ(b->ToString(), "redis://cache-1.internal:6379/0");
  auto c = ParseRemoteAddress("redis://[::1]:7000/0");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->ToString(), "redis://[::1]:7000/0");
}

TEST(RemoteAddressTest, RejectsEverythingElseClearly) {
  for (const char* bad :
       {"", "redis://", "http://h:1", "rediss://h:1", "redis://h", "redis://:6379", "redis://h:0",
        "redis://h:65536", "redis://h:12x", "redis://user:pw@h:1", "redis://h:1/x",
        "redis://h:1/1/2", "redis://h:1?db=2", "redis://h/../etc:1", "redis://[::1:1",
        "redis://h h:1", "unix:///tmp/redis.sock"}) {
    auto a = ParseRemoteAddress(bad);
    ASSERT_FALSE(a.ok()) << bad;
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(a.status().message().find("redis://HOST:PORT"), std::string::npos) << bad;
  }
}

TEST(RemoteFrameTest, RoundTripAndEveryDamageIsCaught) {
  const std::string payload = BytePattern(1000, 1);
  const std::string v = FrameRemotePart(kModel, 2, 5, payload);
  ASSERT_EQ(v.size(), kRemoteFrameBytes + payload.size());
  auto p = UnframeRemotePart(v, kModel, 2);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->payload, payload);
  EXPECT_EQ(p->count, 5u);

  // Every single bit flip, header and payload, is damage (or, in the fingerprint, a CRC
  // failure too: the CRC covers the header).
  for (size_t byte = 0; byte < v.size(); byte += 7) {
    std::string bad = v;
    bad[byte] = char(bad[byte] ^ 0x10);
    auto q = UnframeRemotePart(bad, kModel, 2);
    ASSERT_FALSE(q.ok()) << byte;
    EXPECT_EQ(q.status().code(), StatusCode::kCorrupt) << byte;
  }
  // Truncated anywhere.
  for (size_t n : {size_t(0), size_t(10), kRemoteFrameBytes, v.size() - 1}) {
    auto q = UnframeRemotePart(std::string_view(v).substr(0, n), kModel, 2);
    ASSERT_FALSE(q.ok()) << n;
    EXPECT_EQ(q.status().code(), StatusCode::kCorrupt) << n;
  }
  // Another model's value, intact: refused, not damage.
  auto f = UnframeRemotePart(FrameRemotePart(kOther, 2, 5, payload), kModel, 2);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kFailedPrecondition);
  // A part moved to another index.
  auto m = UnframeRemotePart(v, kModel, 3);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kCorrupt);
}

class RemoteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(redis_.Start()); }

  RemoteStoreOptions Options(const Sha1Digest& model = kModel) {
    RemoteStoreOptions o;
    o.address = *ParseRemoteAddress(redis_.url());
    o.model = model;
    o.part_bytes = 1000;  // several parts for a few KiB
    return o;
  }

  RedisServer redis_;
};

TEST_F(RemoteStoreTest, ObjectsEntriesAndLengthsRoundTrip) {
  RemoteStore store(Options());
  ASSERT_TRUE(store.Ping().ok());
  const std::string obj = BytePattern(3500, 2);
  auto has = store.HasObject("abc.kv", obj.size());
  ASSERT_TRUE(has.ok());
  EXPECT_FALSE(*has);
  ASSERT_TRUE(store.PutObject("abc.kv", obj).ok());
  has = store.HasObject("abc.kv", obj.size());
  ASSERT_TRUE(has.ok());
  EXPECT_TRUE(*has);
  auto back = store.GetObject("abc.kv", obj.size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, obj);
  // Four parts under their own keys.
  EXPECT_EQ(redis_.Command({"EXISTS", RemoteObjectKey(kModel, "abc.kv", 3)}), "1");
  EXPECT_EQ(redis_.Command({"EXISTS", RemoteObjectKey(kModel, "abc.kv", 4)}), "0");
  auto empty = store.GetObject("none.kv", 10);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kNotFound);
  // A name that could leave the cache directory is never used.
  EXPECT_EQ(store.PutObject("../x.kv", obj).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.GetObject("a/b", 1).status().code(), StatusCode::kInvalidArgument);

  const std::string key = Sha1Hex(Sha1Of("ids"));
  RemoteEntryRecord rec{key, 70, {{"abc.kv", obj.size()}}};
  ASSERT_TRUE(store.PutEntry("official/q8", rec).ok());
  for (uint32_t n : {20u, 150u, 90u}) {
    RemoteEntryRecord other{Sha1Hex(Sha1Of(std::to_string(n))), n, {{"abc.kv", obj.size()}}};
    ASSERT_TRUE(store.PutEntry("official/q8", other).ok());
  }
  auto got = store.GetEntry("official/q8", key);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->n_tokens, 70u);
  ASSERT_EQ(got->objects.size(), 1u);
  EXPECT_EQ(got->objects[0].first, "abc.kv");
  EXPECT_EQ(got->objects[0].second, obj.size());
  EXPECT_EQ(store.GetEntry("official/f32", key).status().code(), StatusCode::kNotFound);
  auto lens = store.Lengths("official/q8", 1, 100, 8);
  ASSERT_TRUE(lens.ok());
  EXPECT_EQ(*lens, (std::vector<uint32_t>{90, 70, 20}));
  lens = store.Lengths("official/q8", 30, 1000, 2);
  ASSERT_TRUE(lens.ok());
  EXPECT_EQ(*lens, (std::vector<uint32_t>{150, 90}));
  // Another model sees nothing of this one.
  RemoteStore other(Options(kOther));
  lens = other.Lengths("official/q8", 1, 1000, 8);
  ASSERT_TRUE(lens.ok());
  EXPECT_TRUE(lens->empty());
}

TEST_F(RemoteStoreTest, DamagedForeignAndTruncatedValuesAreNeverReturned) {
  RemoteStore store(Options());
  const std::string obj = BytePattern(2500, 3);
  ASSERT_TRUE(store.PutObject("o.kv", obj).ok());
  const std::string k1 = RemoteObjectKey(kModel, "o.kv", 1);
  const std::string good = redis_.Command({"GET", k1});
  ASSERT_EQ(good.size(), kRemoteFrameBytes + 1000);

  std::string flipped = good;
  flipped[kRemoteFrameBytes + 500] = char(flipped[kRemoteFrameBytes + 500] ^ 1);
  ASSERT_EQ(redis_.Command({"SET", k1, flipped}), "OK");
  EXPECT_EQ(store.GetObject("o.kv", obj.size()).status().code(), StatusCode::kCorrupt);

  ASSERT_EQ(redis_.Command({"SET", k1, good.substr(0, good.size() - 10)}), "OK");
  EXPECT_EQ(store.GetObject("o.kv", obj.size()).status().code(), StatusCode::kCorrupt);

  ASSERT_EQ(redis_.Command({"SET", k1, FrameRemotePart(kOther, 1, 3, obj.substr(1000, 1000))}),
            "OK");
  EXPECT_EQ(store.GetObject("o.kv", obj.size()).status().code(), StatusCode::kFailedPrecondition);

  ASSERT_EQ(redis_.Command({"SET", k1, "not a flashkv value"}), "OK");
  EXPECT_EQ(store.GetObject("o.kv", obj.size()).status().code(), StatusCode::kCorrupt);

  // A part evicted by the store damages the object.
  ASSERT_EQ(redis_.Command({"DEL", k1}), "1");
  EXPECT_EQ(store.GetObject("o.kv", obj.size()).status().code(), StatusCode::kCorrupt);

  ASSERT_EQ(redis_.Command({"SET", k1, good}), "OK");
  auto back = store.GetObject("o.kv", obj.size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, obj);

  // Entry records: damage and a record filed under another entry's name.
  const std::string key = Sha1Hex(Sha1Of("ids"));
  ASSERT_TRUE(store.PutEntry("n", RemoteEntryRecord{key, 5, {{"o.kv", obj.size()}}}).ok());
  const std::string ek = RemoteEntryKey(kModel, "n", key);
  std::string rec = redis_.Command({"GET", ek});
  rec[rec.size() - 3] = char(rec[rec.size() - 3] ^ 4);
  ASSERT_EQ(redis_.Command({"SET", ek, rec}), "OK");
  EXPECT_EQ(store.GetEntry("n", key).status().code(), StatusCode::kCorrupt);
  const std::string other = Sha1Hex(Sha1Of("other"));
  ASSERT_TRUE(store.PutEntry("n", RemoteEntryRecord{other, 5, {{"o.kv", obj.size()}}}).ok());
  ASSERT_EQ(
      redis_.Command({"SET", ek, redis_.Command({"GET", RemoteEntryKey(kModel, "n", other)})}),
      "OK");
  EXPECT_EQ(store.GetEntry("n", key).status().code(), StatusCode::kCorrupt);
}

TEST_F(RemoteStoreTest, UnreachableStoreIsAnIoErrorAndTheConnectionComesBack) {
  RemoteStore store(Options());
  ASSERT_TRUE(store.PutObject("a.kv", "xyz").ok());
  redis_.Stop();
  EXPECT_EQ(store.GetObject("a.kv", 3).status().code(), StatusCode::kIoError);
  EXPECT_EQ(store.Ping().code(), StatusCode::kIoError);
  ASSERT_TRUE(redis_.Start());
  EXPECT_TRUE(store.Ping().ok());
  EXPECT_EQ(store.GetObject("a.kv", 3).status().code(), StatusCode::kNotFound);  // no persistence
}

TEST_F(RemoteStoreTest, FullStoreRefusesWritesAsResourceExhausted) {
  RemoteStore store(Options());
  ASSERT_EQ(redis_.Command({"CONFIG", "SET", "maxmemory-policy", "noeviction"}), "OK");
  ASSERT_EQ(redis_.Command({"CONFIG", "SET", "maxmemory", "1"}), "OK");
  const Status st = store.PutObject("big.kv", BytePattern(5000, 4));
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
  EXPECT_TRUE(store.Ping().ok());  // reads still answered
}

TEST_F(RemoteStoreTest, SelectsTheDatabase) {
  RemoteStoreOptions o = Options();
  o.address.db = 2;
  RemoteStore store(o);
  ASSERT_TRUE(store.PutObject("d.kv", "abc").ok());
  EXPECT_EQ(redis_.Command({"EXISTS", RemoteObjectKey(kModel, "d.kv", 0)}), "0");  // db 0
  RemoteStore again(o);
  auto back = again.GetObject("d.kv", 3);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, "abc");
}

}  // namespace
}  // namespace flashkv
