// Issue 34 end to end: the real `flashkv serve` (tiny model, CPU) on loopback against a
// hostile shared store as its --kv-remote.
//
// - A real redis-server holding values another server wrote, then poisoned: a stored part
//   whose frame announces 2^20 parts (its CRC recomputed), a key of the wrong type, and a
//   manifest forged with valid CRCs that names another conversation's chunk (its entry
//   record rewritten to match). A second server with its own disk answers each request
//   200 with the tokens of a cold run, within --kv-remote-timeout-ms + a cold prefill,
//   while it answers another conversation and /health, and /metrics counts the refusals.
//   (The build before issue 34's first round aborted on the first: std::bad_alloc.)
// - A store behind tests/kv/fake_resp_server.h's FaultProxy that turns into a trickle (a
//   byte every 0.5 s) or an endless status line after a warm-up: the request is answered
//   as a cold run would be, within its deadline, while another request and /health are
//   served meanwhile.
//
// No assertion depends on the machine's speed: times are compared with the same test's
// own cold runs, with a multiplier and seconds of slack.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "fake_resp_server.h"
#include "kv_remote/remote_frame.h"
#include "kv_remote/remote_store.h"
#include "redis_server.h"
#include "serve_process.h"
#include "snapshot/snapshot_format.h"
#include "util/crc32c.h"

namespace flashkv {
namespace {

using testing::Chat;
using testing::ChatAnswer;
using testing::ChatBody;
using testing::FaultProxy;
using testing::HealthStatus;
using testing::Metric;
using testing::RedisServer;
using testing::ServeProcess;
using testing::TempDir;
using testing::Until;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The system prompt of one conversation: the topic first, so conversations share no
// prefix in any tier; long enough for several 128-token chunks.
std::string System(const std::string& topic) {
  std::string s = topic + " desk.";
  for (int i = 0; i < 30; ++i) {
    s += " Rule " + std::to_string(i) + ": answer questions about topic " + std::to_string(i) +
         " briefly and precisely.";
  }
  return s;
}

std::string Question(const std::string& topic) {
  return ChatBody(System(topic), "Describe the " + topic + " in one sentence.");
}

// Saves v2 entries in 128-token chunks, so an entry travels as a manifest plus chunks.
std::vector<std::string> Cached(const std::string& dir) {
  return {"--ctx",         "4096", "--kv-cache-min-tokens", "64", "--kv-disk-chunk-tokens", "128",
          "--kv-disk-dir", dir};
}

double MetricOr0(const ServeProcess& s, const std::string& name, const std::string& labels = "") {
  return Metric(s, name, labels).value_or(0);
}

void ExpectSameAsCold(const ChatAnswer& got, const ChatAnswer& cold, const std::string& what) {
  EXPECT_EQ(got.status, 200) << what << ": " << got.body;
  EXPECT_EQ(got.content, cold.content) << what;
  EXPECT_EQ(got.completion_tokens, cold.completion_tokens) << what;
  EXPECT_EQ(got.prompt_tokens, cold.prompt_tokens) << what;
  // Refused from the store and prefilled: nothing was reused.
  EXPECT_TRUE(got.cache.starts_with("none; reused=0")) << what << ": " << got.cache;
}

// The deadline every hostile-store request is held to: the tier's timeout plus its own
// prefill — measured as this test's cold run of the same prompt, three times over, plus
// five seconds, since a CI machine is slow and shared.
double Bound(double timeout_s, const ChatAnswer& cold) {
  return timeout_s + 3 * cold.seconds + 5;
}

// --- values in the store -------------------------------------------------------------

uint32_t U32(const std::string& s, size_t at) {
  uint32_t v;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}
uint64_t U64(const std::string& s, size_t at) {
  uint64_t v;
  std::memcpy(&v, s.data() + at, 8);
  return v;
}
void Put32(std::string& s, size_t at, uint32_t v) {
  std::memcpy(s.data() + at, &v, 4);
}

Sha1Digest ModelOf(const std::string& value) {
  Sha1Digest d;
  std::memcpy(d.data(), value.data() + 8, d.size());
  return d;
}

// One entry as another server mirrored it.
struct Stored {
  std::string entry_key;
  Sha1Digest model{};
  RemoteEntryRecord record;
  std::string manifest_name;  // "<sha1>.kv"
  std::string manifest;       // its bytes (one part)
};

Stored ReadEntry(const RedisServer& redis, const std::string& entry_key) {
  Stored e;
  e.entry_key = entry_key;
  const std::string value = redis.Command({"GET", entry_key});
  EXPECT_GE(value.size(), kRemoteFrameBytes) << entry_key;
  if (value.size() < kRemoteFrameBytes) return e;
  e.model = ModelOf(value);
  Expected<RemotePart> part = UnframeRemotePart(value, e.model, 0);
  EXPECT_TRUE(part.ok()) << part.status().ToString();
  if (!part.ok()) return e;
  Expected<RemoteEntryRecord> rec = DecodeRemoteEntryRecord(part->payload);
  EXPECT_TRUE(rec.ok()) << rec.status().ToString();
  if (!rec.ok()) return e;
  e.record = *rec;
  e.manifest_name = e.record.key + ".kv";
  const std::string m = redis.Command({"GET", RemoteObjectKey(e.model, e.manifest_name, 0)});
  Expected<RemotePart> mp = UnframeRemotePart(m, e.model, 0);
  EXPECT_TRUE(mp.ok()) << mp.status().ToString();
  if (mp.ok()) {
    EXPECT_EQ(mp->count, 1u);  // a manifest of the tiny model is far below one 32 MiB part
    e.manifest = std::string(mp->payload);
  }
  return e;
}

// The chunk list of a manifest: where its table row and its rows are.
struct ChunkList {
  size_t row = 0;      // its section table row
  size_t offset = 0;   // its first chunk row
  uint64_t count = 0;  // chunk rows
};

ChunkList ChunksOf(const std::string& m) {
  ChunkList c;
  const uint32_t sections = U32(m, 96);
  for (uint32_t i = 0; i < sections; ++i) {
    const size_t row = kSnapshotHeaderBytes + size_t(i) * kSnapshotSectionRowBytes;
    if (U32(m, row) == 6 && U32(m, row + 4) == kSnapshotChunksTag) {
      c.row = row;
      c.offset = size_t(U64(m, row + 8));
      c.count = U64(m, row + 16) / 32;
    }
  }
  return c;
}

std::string ChunkObjectName(const std::string& m, const ChunkList& list, uint64_t k) {
  Sha1Digest name;
  std::memcpy(name.data(), m.data() + list.offset + 32 * k, name.size());
  return Sha1Hex(name) + ".kvc";
}

// `victim`'s manifest naming `donor`'s chunk 0 in its own chunk 0's place, with the chunk
// list's, the section table's and the header's CRC recomputed: every CRC checks, the
// state is another conversation's. (CRCs detect damage, not forgery.)
std::string ForgeManifest(std::string victim, const std::string& donor) {
  const ChunkList v = ChunksOf(victim), d = ChunksOf(donor);
  std::memcpy(victim.data() + v.offset, donor.data() + d.offset, 32);
  Put32(victim, v.row + 24, Crc32c(std::string_view(victim).substr(v.offset, v.count * 32)));
  const uint32_t sections = U32(victim, 96);
  Put32(victim, 100,
        Crc32c(std::string_view(victim).substr(kSnapshotHeaderBytes,
                                               size_t(sections) * kSnapshotSectionRowBytes)));
  Put32(victim, 220, Crc32c(std::string_view(victim).substr(0, 220)));
  return victim;
}

// The entry keys the store holds now.
std::vector<std::string> EntryKeys(const RedisServer& redis) {
  std::vector<std::string> keys = redis.Keys("flashkv:1:*:entry:*");
  std::sort(keys.begin(), keys.end());
  return keys;
}

// --- the tests -------------------------------------------------------------------------

TEST(ServeHostileRemoteTest, PoisonedValuesInTheStoreCostOnePrefill) {
  RedisServer redis;
  ASSERT_TRUE(redis.Start());
  const std::string topics[3] = {"Harbour", "Mountain", "Desert"};

  // A writer computes three conversations cold (each save is mirrored: its cold anchor).
  ChatAnswer cold[3];
  Stored stored[3];
  {
    ServeProcess w;
    std::vector<std::string> args = Cached(TempDir("poison-w"));
    args.insert(args.end(), {"--kv-remote", redis.url()});
    ASSERT_TRUE(w.Start(args, TempDir("poison-w-log") + "/serve.log"));
    for (int i = 0; i < 3; ++i) {
      const std::vector<std::string> before = EntryKeys(redis);
      cold[i] = Chat(w, Question(topics[i]));
      ASSERT_EQ(cold[i].status, 200) << cold[i].body;
      ASSERT_TRUE(Until([&] {
        return MetricOr0(w, "flashkv_remote_uploads_total", "result=\"ok\"") >= i + 1 &&
               MetricOr0(w, "flashkv_remote_upload_queue") == 0;
      })) << "the save of conversation "
          << i << " was not mirrored";
      std::vector<std::string> added;
      for (const std::string& k : EntryKeys(redis)) {
        if (!std::binary_search(before.begin(), before.end(), k)) added.push_back(k);
      }
      ASSERT_EQ(added.size(), 1u) << "conversation " << i;
      stored[i] = ReadEntry(redis, added[0]);
      ASSERT_GE(ChunksOf(stored[i].manifest).count, 1u) << "no chunks in conversation " << i;
    }
    ASSERT_EQ(w.Stop(), std::optional<int>(0));
  }

  // 0: its manifest's part announces 2^20 parts, the CRC recomputed (once: an allocation
  // of count x part size, and every server sharing the store aborted).
  {
    const Stored& e = stored[0];
    ASSERT_EQ(redis.Command({"SET", RemoteObjectKey(e.model, e.manifest_name, 0),
                             FrameRemotePart(e.model, 0, 1u << 20, e.manifest)}),
              "OK");
  }
  // 1: its manifest's key holds a list (once: taken for a lost link, the tier backed off).
  {
    const std::string key = RemoteObjectKey(stored[1].model, stored[1].manifest_name, 0);
    ASSERT_EQ(redis.Command({"DEL", key}), "1");
    ASSERT_EQ(redis.Command({"RPUSH", key, "not a string"}), "1");
  }
  // 2: its manifest names conversation 0's first chunk, all CRCs valid, and its record
  // lists that chunk instead of its own (once: loaded, and the answer was wrong).
  {
    const Stored& e = stored[2];
    const ChunkList mine = ChunksOf(e.manifest);
    const ChunkList donor = ChunksOf(stored[0].manifest);
    const std::string forged = ForgeManifest(e.manifest, stored[0].manifest);
    ASSERT_EQ(forged.size(), e.manifest.size());
    ASSERT_EQ(redis.Command({"SET", RemoteObjectKey(e.model, e.manifest_name, 0),
                             FrameRemotePart(e.model, 0, 1, forged)}),
              "OK");
    const std::string own = ChunkObjectName(e.manifest, mine, 0);
    const std::string theirs = ChunkObjectName(stored[0].manifest, donor, 0);
    ASSERT_NE(own, theirs);
    std::string record = "flashkv-remote-entry 1\nkey " + e.record.key + "\ntokens " +
                         std::to_string(e.record.n_tokens) + "\n";
    bool replaced = false;
    for (const auto& [name, bytes] : e.record.objects) {
      if (name == own) {
        record += "object " + theirs + " " +
                  std::to_string(U64(stored[0].manifest, donor.offset + 24)) + "\n";
        replaced = true;
      } else {
        record += "object " + name + " " + std::to_string(bytes) + "\n";
      }
    }
    ASSERT_TRUE(replaced);
    ASSERT_EQ(redis.Command({"SET", e.entry_key, FrameRemotePart(e.model, 0, 1, record)}), "OK");
  }

  // A reader with its own (empty) disk finds each entry in the store and refuses it.
  constexpr double kTimeoutS = 2.0;
  ServeProcess r;
  std::vector<std::string> args = Cached(TempDir("poison-r"));
  args.insert(args.end(), {"--kv-remote", redis.url(), "--kv-remote-timeout-ms", "2000"});
  ASSERT_TRUE(r.Start(args, TempDir("poison-r-log") + "/serve.log"));
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(topics[i]);
    auto pending = std::async(std::launch::async, [&] { return Chat(r, Question(topics[i])); });
    // Meanwhile the server answers another conversation (in no tier) and /health.
    auto other =
        std::async(std::launch::async, [&] { return Chat(r, Question("Forest" + topics[i])); });
    int health = 0;
    do {
      health = HealthStatus(r);
    } while (health == 200 && pending.wait_for(milliseconds(20)) != std::future_status::ready);
    EXPECT_EQ(health, 200);
    const ChatAnswer got = pending.get();
    const ChatAnswer also = other.get();
    EXPECT_EQ(also.status, 200) << also.body;
    EXPECT_EQ(also.completion_tokens, 16);
    ExpectSameAsCold(got, cold[i], topics[i]);
    EXPECT_LE(got.seconds, Bound(kTimeoutS, cold[i]))
        << "cold " << cold[i].seconds << " s, remote timeout " << kTimeoutS << " s";
    ::testing::Test::RecordProperty("poisoned_" + topics[i] + "_ms", int(got.seconds * 1000));
    ::testing::Test::RecordProperty("cold_" + topics[i] + "_ms", int(cold[i].seconds * 1000));
  }
  EXPECT_TRUE(r.running());
  // The part-count bomb and the wrong type are damaged values; the forged manifest was
  // fetched (its frames are intact), refused when loaded and quarantined.
  EXPECT_GE(MetricOr0(r, "flashkv_remote_errors_total", "kind=\"damaged\""), 2);
  EXPECT_EQ(MetricOr0(r, "flashkv_remote_errors_total", "kind=\"connection\""), 0);
  EXPECT_EQ(MetricOr0(r, "flashkv_remote_backoff", "what=\"link\""), 0);
  EXPECT_GE(MetricOr0(r, "flashkv_disk_quarantined_total"), 1);
  EXPECT_EQ(MetricOr0(r, "flashkv_requests_total", "outcome=\"failed\""), 0);
  EXPECT_EQ(MetricOr0(r, "flashkv_cache_lookups_total", "tier=\"remote\",result=\"hit\""), 0);
  const std::string log = r.LogText();
  EXPECT_NE(log.find("token ids name"), std::string::npos) << "the forged manifest's refusal";
  EXPECT_EQ(r.Stop(), std::optional<int>(0));
}

// (b) a trickle, (c) an endless status line, each after a warm-up through a working store.
TEST(ServeHostileRemoteTest, ASlowOrEndlessStoreCostsAtMostItsDeadline) {
  // Cold references from a server without the shared tier.
  ChatAnswer warm_cold, cold_t, cold_e;
  {
    ServeProcess c;
    ASSERT_TRUE(c.Start({"--ctx", "4096"}, TempDir("slow-cold-log") + "/serve.log"));
    warm_cold = Chat(c, Question("Lighthouse"));
    cold_t = Chat(c, Question("Windmill"));
    cold_e = Chat(c, Question("Canal"));
    for (const ChatAnswer* a : {&warm_cold, &cold_t, &cold_e}) ASSERT_EQ(a->status, 200);
    ASSERT_EQ(c.Stop(), std::optional<int>(0));
  }
  struct Case {
    FaultProxy::Mode mode;
    const char* name;
    const ChatAnswer* cold;
    std::string topic;
  };
  const Case cases[] = {{FaultProxy::Mode::kTrickle, "trickle", &cold_t, "Windmill"},
                        {FaultProxy::Mode::kEndlessLine, "endless line", &cold_e, "Canal"}};
  constexpr double kTimeoutS = 5.0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    // A store of its own: the warm-up must miss it, be saved and be mirrored.
    RedisServer redis;
    ASSERT_TRUE(redis.Start());
    FaultProxy proxy(redis.port(), milliseconds(500));
    ServeProcess s;
    std::vector<std::string> args = Cached(TempDir("slow"));
    args.insert(args.end(), {"--kv-remote", proxy.url(), "--kv-remote-timeout-ms", "5000"});
    ASSERT_TRUE(s.Start(args, TempDir("slow-log") + "/serve.log"));
    // Warm-up through the working store: a cold run, saved and mirrored.
    const ChatAnswer warm = Chat(s, Question("Lighthouse"));
    ASSERT_EQ(warm.status, 200);
    EXPECT_EQ(warm.content, warm_cold.content);
    ASSERT_TRUE(Until([&] {
      return MetricOr0(s, "flashkv_remote_uploads_total", "result=\"ok\"") >= 1 &&
             MetricOr0(s, "flashkv_remote_upload_queue") == 0;
    }));
    ASSERT_EQ(MetricOr0(s, "flashkv_remote_backoff", "what=\"link\""), 0);

    proxy.Set(c.mode);
    auto pending = std::async(std::launch::async, [&] { return Chat(s, Question(c.topic)); });
    // While its lookup waits on the store, the server answers others: the warm-up's prompt
    // again (restored from the local tiers, never asking the store) and /health.
    const bool waited = Until(
        [&] {
          return MetricOr0(s, "flashkv_remote_fetches_waiting") >= 1 ||
                 pending.wait_for(milliseconds(0)) == std::future_status::ready;
        },
        seconds(60));
    ASSERT_TRUE(waited);
    const ChatAnswer other = Chat(s, Question("Lighthouse"));
    const int health = HealthStatus(s);
    const double waiting_after = MetricOr0(s, "flashkv_remote_fetches_waiting");
    const ChatAnswer got = pending.get();

    ExpectSameAsCold(got, *c.cold, c.name);
    EXPECT_LE(got.seconds, Bound(kTimeoutS, *c.cold))
        << "cold " << c.cold->seconds << " s, remote timeout " << kTimeoutS << " s";
    ::testing::Test::RecordProperty(std::string(c.name) + "_ms", int(got.seconds * 1000));
    ::testing::Test::RecordProperty(std::string(c.name) + "_cold_ms", int(c.cold->seconds * 1000));
    EXPECT_EQ(other.status, 200) << other.body;
    EXPECT_EQ(other.content, warm_cold.content);
    EXPECT_FALSE(other.cache.starts_with("none")) << other.cache;
    EXPECT_EQ(health, 200);
    if (c.mode == FaultProxy::Mode::kTrickle) {
      // The trickle holds the lookup for its whole deadline (5 s): the other request and
      // /health were answered within it, not after it.
      EXPECT_GE(waiting_after, 1) << "the other request waited for the stalled lookup";
    }
    EXPECT_GE(proxy.faulted(), 1u);
    // A store that misbehaves is counted and backed off like one that is down.
    EXPECT_GE(MetricOr0(s, "flashkv_remote_errors_total", "kind=\"connection\""), 1);
    EXPECT_EQ(MetricOr0(s, "flashkv_remote_backoff", "what=\"link\""), 1);
    EXPECT_EQ(MetricOr0(s, "flashkv_requests_total", "outcome=\"failed\""), 0);
    EXPECT_EQ(s.Stop(SIGTERM, seconds(60)), std::optional<int>(0));
  }
}

}  // namespace
}  // namespace flashkv
