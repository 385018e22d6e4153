// The shared tier's signed values (--kv-remote-key-file, docs/KV_FORMAT.md "Trust
// model"): with a secret, every value is an HMAC-SHA-256-signed frame bound to its store
// key; a reader with the secret refuses values that are unsigned, signed with another key,
// or moved to another key — each a forgery a CRC cannot see — and counts them.
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kv_remote/remote_address.h"
#include "kv_remote/remote_frame.h"
#include "kv_remote/remote_store.h"
#include "kv_remote/remote_tier.h"
#include "kv_test_util.h"
#include "redis_server.h"
#include "util/hmac_sha256.h"

namespace flashkv {
namespace {

using testing::BytePattern;
using testing::RedisServer;

const Sha1Digest kModel = Sha1Of("signed-model");
constexpr std::string_view kNumerics = "official/q8";
constexpr std::string_view kSecret = "a shared secret of 32 bytes......";

TEST(HmacSha256Test, MatchesRfc4231) {
  // RFC 4231 test case 2.
  const HmacSha256Digest d = HmacSha256("Jefe", {"what do ya want ", "for nothing?"});
  std::string hex;
  for (uint8_t b : d) hex += fmt::format("{:02x}", b);
  EXPECT_EQ(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_TRUE(DigestsEqual(d, std::string_view(reinterpret_cast<const char*>(d.data()), 32)));
  EXPECT_FALSE(DigestsEqual(d, "short"));
}

TEST(RemoteSignedFrameTest, SignedFramesCheckKeySecretAndEveryByte) {
  const std::string payload = BytePattern(500, 3);
  const std::string v = FrameRemotePart(kModel, 0, 1, payload, kSecret, "key-a");
  ASSERT_EQ(v.size(), kRemoteFrameBytes + payload.size() + kRemoteSignatureBytes);
  auto p = UnframeRemotePart(v, kModel, 0, kSecret, "key-a");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->payload, payload);
  // Under another key, with another secret, unsigned: refused as unsigned.
  EXPECT_EQ(UnframeRemotePart(v, kModel, 0, kSecret, "key-b").status().code(),
            StatusCode::kUnsupported);
  EXPECT_EQ(
      UnframeRemotePart(v, kModel, 0, "another secret of enough bytes", "key-a").status().code(),
      StatusCode::kUnsupported);
  EXPECT_EQ(UnframeRemotePart(FrameRemotePart(kModel, 0, 1, payload), kModel, 0, kSecret, "key-a")
                .status()
                .code(),
            StatusCode::kUnsupported);
  // Every flipped byte fails (the MAC or, for its own bytes, the comparison).
  for (size_t at = 0; at < v.size(); at += 5) {
    std::string bad = v;
    bad[at] = char(bad[at] ^ 0x20);
    EXPECT_FALSE(UnframeRemotePart(bad, kModel, 0, kSecret, "key-a").ok()) << at;
  }
  // A reader without a secret still reads a signed value (it trusts the store).
  auto open = UnframeRemotePart(v, kModel, 0);
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(open->payload, payload);
}

class RemoteSignedTierTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(redis_.Start()); }

  RemoteTierOptions Options(std::string_view secret) {
    RemoteTierOptions o;
    o.store.address = *ParseRemoteAddress(redis_.url());
    o.store.model = kModel;
    o.store.part_bytes = 4096;
    o.store.secret = std::string(secret);
    o.numerics = std::string(kNumerics);
    return o;
  }

  // An entry of `n` of `tokens`' ids, one object, written with `secret`; its name.
  std::string Put(std::string_view secret, const std::vector<int32_t>& tokens, uint32_t n,
                  const std::string& object_bytes) {
    RemoteStore store(Options(secret).store);
    const std::string key = Sha1Hex(Sha1Of(
        std::string_view(reinterpret_cast<const char*>(tokens.data()), n * sizeof(int32_t))));
    EXPECT_TRUE(store.PutObject(key + ".kv", object_bytes).ok());
    EXPECT_TRUE(
        store.PutEntry(kNumerics, RemoteEntryRecord{key, n, {{key + ".kv", object_bytes.size()}}})
            .ok());
    return key;
  }

  RedisServer redis_;
};

TEST_F(RemoteSignedTierTest, ForgedUnsignedAndMovedValuesAreRefused) {
  const auto tokens = testing::Tokens(64);
  const std::string object = BytePattern(10000, 5);
  const std::string key = Put(kSecret, tokens, 40, object);
  {
    RemoteTier tier(Options(kSecret));
    auto got = tier.Fetch(tokens, 1, 64);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->objects.size(), 1u);
    EXPECT_EQ(got->objects[0].bytes, object);
  }
  // A writer without the secret replaces the object with its own (CRC-valid) bytes.
  Put("", tokens, 40, BytePattern(10000, 6));
  {
    RemoteTier tier(Options(kSecret));
    EXPECT_EQ(tier.Fetch(tokens, 1, 64).status().code(), StatusCode::kNotFound);
    EXPECT_EQ(tier.stats().unsigned_values, 1u);
    EXPECT_EQ(tier.stats().damaged, 0u);
    EXPECT_FALSE(tier.stats().backoff);
  }
  // One with another secret; then a validly signed part of another object moved here.
  Put("a different secret, also long", tokens, 40, BytePattern(10000, 6));
  {
    RemoteTier tier(Options(kSecret));
    EXPECT_EQ(tier.Fetch(tokens, 1, 64).status().code(), StatusCode::kNotFound);
    EXPECT_EQ(tier.stats().unsigned_values, 1u);
  }
  Put(kSecret, tokens, 40, object);
  const std::string other = Put(kSecret, tokens, 20, BytePattern(10000, 7));
  ASSERT_EQ(redis_.Command({"SET", RemoteObjectKey(kModel, key + ".kv", 0),
                            redis_.Command({"GET", RemoteObjectKey(kModel, other + ".kv", 0)})}),
            "OK");
  RemoteTier tier(Options(kSecret));
  auto got = tier.Fetch(tokens, 21, 64);  // the 40-token entry only
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(tier.stats().unsigned_values, 1u);
  // A reader without the secret trusts the store: it reads the signed values.
  RemoteTier open(Options(""));
  EXPECT_TRUE(open.Fetch(tokens, 1, 20).ok());
}

}  // namespace
}  // namespace flashkv
