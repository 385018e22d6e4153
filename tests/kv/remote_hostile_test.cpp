// The shared KV tier against a hostile or broken store (issue 34): poisoned values in a
// real redis-server (a part count of 2^32-1 with its CRC recomputed, keys of the wrong
// type, a value larger than its entry says) and a fault-injecting RESP server
// (tests/kv/fake_resp_server.h: trickling, endless, truncated, wrong-typed, huge-array and
// non-RESP replies). Every lookup ends as a miss within the tier's deadline, nothing is
// loaded, and the refusal is counted; a misbehaving link is backed off, a bad value is not.
#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fake_resp_server.h"
#include "kv_remote/remote_address.h"
#include "kv_remote/remote_frame.h"
#include "kv_remote/remote_store.h"
#include "kv_remote/remote_tier.h"
#include "kv_test_util.h"
#include "redis_server.h"

namespace flashkv {
namespace {

using testing::BytePattern;
using testing::FakeRespServer;
using testing::RedisServer;
using testing::RespFault;
using Clock = std::chrono::steady_clock;

const Sha1Digest kModel = Sha1Of("hostile-model");
constexpr std::string_view kNumerics = "official/q8";

RemoteTierOptions Options(const std::string& url, int timeout_ms = 2000) {
  RemoteTierOptions o;
  o.store.address = *ParseRemoteAddress(url);
  o.store.model = kModel;
  o.store.part_bytes = 4096;
  o.store.command_timeout_ms = timeout_ms;
  o.store.connect_timeout_ms = timeout_ms;
  o.numerics = std::string(kNumerics);
  o.backoff_min_ms = 20;
  o.backoff_max_ms = 200;
  return o;
}

// The entry name of `tokens`' first n ids (the SHA-1 of their bytes).
std::string EntryName(const std::vector<int32_t>& tokens, size_t n) {
  return Sha1Hex(
      Sha1Of(std::string_view(reinterpret_cast<const char*>(tokens.data()), n * sizeof(int32_t))));
}

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

class RemoteHostileTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(redis_.Start()); }

  // Stores an entry of `n` tokens made of one object of `bytes` bytes; its name.
  std::string StoreEntry(const std::vector<int32_t>& tokens, uint32_t n, size_t bytes) {
    RemoteStore store(Options(redis_.url()).store);
    const std::string key = EntryName(tokens, n);
    const std::string object = key + ".kv";
    EXPECT_TRUE(store.PutObject(object, BytePattern(bytes, 7)).ok());
    EXPECT_TRUE(store.PutEntry(kNumerics, RemoteEntryRecord{key, n, {{object, bytes}}}).ok());
    return key;
  }

  RedisServer redis_;
};

// A frame announcing 2^32-1 parts, CRC intact: once a reserve of count x part size that
// threw std::length_error / bad_alloc and aborted every server sharing the store.
TEST_F(RemoteHostileTest, PartCountBombIsRefusedNotAllocated) {
  const auto tokens = testing::Tokens(64);
  const std::string key = StoreEntry(tokens, 40, 4096 * 3);
  const std::string part0 = RemoteObjectKey(kModel, key + ".kv", 0);
  for (uint32_t count : {2u, 1000u, 1u << 20, 0xFFFFFFFFu}) {
    ASSERT_EQ(
        redis_.Command({"SET", part0, FrameRemotePart(kModel, 0, count, BytePattern(4096, 7))}),
        "OK");
    RemoteTier tier(Options(redis_.url()));
    auto got = tier.Fetch(tokens, 1, 64);
    ASSERT_FALSE(got.ok()) << count;
    EXPECT_EQ(got.status().code(), StatusCode::kNotFound) << count;
    EXPECT_EQ(tier.stats().damaged, 1u) << count;
    EXPECT_FALSE(tier.stats().backoff) << count;
  }
}

// A value larger than its entry record says is refused (not read whole and then compared).
TEST_F(RemoteHostileTest, ValueLargerThanItsEntrySaysIsRefused) {
  const auto tokens = testing::Tokens(64);
  const std::string key = StoreEntry(tokens, 40, 1000);
  ASSERT_EQ(redis_.Command({"SET", RemoteObjectKey(kModel, key + ".kv", 0),
                            FrameRemotePart(kModel, 0, 1, BytePattern(1 << 20, 7))}),
            "OK");
  RemoteTier tier(Options(redis_.url()));
  auto got = tier.Fetch(tokens, 1, 64);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(tier.stats().damaged, 1u);
  EXPECT_EQ(tier.stats().bytes_read, 0u);
  EXPECT_FALSE(tier.stats().backoff);
}

// WRONGTYPE is a bad value: counted as damaged, the link stays up (it once backed off the
// whole tier as if the store were down).
TEST_F(RemoteHostileTest, WrongTypedKeysAreBadValuesNotALostLink) {
  const auto tokens = testing::Tokens(64);
  const std::string key = StoreEntry(tokens, 40, 1000);
  const std::string entry = RemoteEntryKey(kModel, kNumerics, key);
  ASSERT_EQ(redis_.Command({"DEL", entry}), "1");
  ASSERT_EQ(redis_.Command({"LPUSH", entry, "x"}), "1");
  RemoteTier tier(Options(redis_.url()));
  EXPECT_EQ(tier.Fetch(tokens, 1, 64).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(tier.stats().damaged, 1u);
  EXPECT_EQ(tier.stats().errors, 0u);
  EXPECT_FALSE(tier.stats().backoff);

  const std::string lengths = RemoteLengthsKey(kModel, kNumerics);
  ASSERT_EQ(redis_.Command({"DEL", lengths}), "1");
  ASSERT_EQ(redis_.Command({"SET", lengths, "not a sorted set"}), "OK");
  EXPECT_EQ(tier.Fetch(tokens, 1, 64).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(tier.stats().damaged, 2u);
  EXPECT_EQ(tier.stats().errors, 0u);
  EXPECT_FALSE(tier.stats().backoff);
}

// Each fault: the lookup misses within its deadline (400 ms; the bound checked is 10 s, so
// a slow machine never fails it, while a client without a deadline of its own is held 20 s
// by the trickle and the endless line), and the tier goes on.
TEST(RemoteHostileStoreTest, MisbehavingServerNeverHoldsALookupPastItsDeadline) {
  const auto tokens = testing::Tokens(64);
  for (RespFault fault : {RespFault::kTrickle, RespFault::kEndlessLine, RespFault::kTruncated,
                          RespFault::kWrongType, RespFault::kHugeArray, RespFault::kGarbage}) {
    SCOPED_TRACE(int(fault));
    FakeRespServer server(fault);
    ASSERT_NE(server.port(), 0);
    RemoteTier tier(Options(server.url(), 400));
    const auto t0 = Clock::now();
    auto got = tier.Fetch(tokens, 1, 64);
    const double s = SecondsSince(t0);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
    EXPECT_LT(s, 10.0);
    const RemoteTierStats st = tier.stats();
    if (fault == RespFault::kWrongType || fault == RespFault::kHugeArray) {
      // A bad value: counted, the link is fine.
      EXPECT_EQ(st.damaged, 1u);
      EXPECT_FALSE(st.backoff);
    } else {
      // A store that misbehaves is backed off like one that is down.
      EXPECT_EQ(st.errors, 1u);
      EXPECT_TRUE(st.backoff);
    }
    // An endless line is read no further than a reply could be long.
    if (fault == RespFault::kEndlessLine) {
      EXPECT_LT(server.sent(), uint64_t(200) << 20);
    }
  }
}

}  // namespace
}  // namespace flashkv
