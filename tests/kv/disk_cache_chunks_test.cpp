// The disk tier with version-2 saves (16-token chunks on the small shape): continued saves
// write each chunk once, sessions sharing a prefix share its chunks, eviction frees only
// chunks no other manifest names, damage to a chunk quarantines it and its manifests and
// the next candidate loads, a crash leaves only unreferenced chunks, which start-up removes.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "chunk_test_util.h"
#include "kv_disk/disk_cache.h"
#include "kv_disk/disk_write_window.h"
#include "kv_test_util.h"
#include "util/file_io.h"

namespace flashkv {
namespace {

using testing::ExpectLayers;
using testing::GrownLayers;
using testing::Logits;
using testing::MakeTempDir;
using testing::SmallShape;
using testing::TestIdentity;
using testing::Tokens;
using testing::WriteGrown;

constexpr int kVocab = 1024;
constexpr uint32_t kChunk = 16;

DiskCacheOptions Options(const std::string& dir, uint64_t budget = uint64_t(64) << 20) {
  DiskCacheOptions o;
  o.dir = dir;
  o.budget_bytes = budget;
  o.identity = TestIdentity();
  o.chunk_tokens = kChunk;
  return o;
}

std::set<std::string> ChunkFiles(const std::string& dir) {
  std::set<std::string> out;
  auto list = ListDirectory(ChunkDirOf(dir));
  if (!list.ok()) return out;
  for (const DirEntry& e : *list) out.insert(e.name);
  return out;
}

// Every chunk named by some manifest in the directory, as file names.
std::set<std::string> ReferencedChunks(const std::string& dir) {
  std::set<std::string> out;
  auto view = InspectCacheDirectory(dir);
  EXPECT_TRUE(view.ok());
  for (const DiskCacheEntry& e : view->entries) {
    auto f = File::OpenRead(e.path);
    EXPECT_TRUE(f.ok());
    auto scan = ScanSnapshotFile(*f);
    EXPECT_TRUE(scan.ok());
    for (const SnapshotChunkRef& c : scan->chunks) out.insert(ChunkFileName(c.name));
  }
  return out;
}

// Sum of st_size of every regular file under dir (one level of subdirectories).
uint64_t DirBytes(const std::string& dir) {
  uint64_t total = 0;
  auto list = ListDirectory(dir);
  EXPECT_TRUE(list.ok());
  for (const DirEntry& e : *list) {
    total += e.size;
    if (e.is_dir) total += DirBytes(JoinPath(dir, e.name));
  }
  return total;
}

bool Exists(const std::string& path) {
  return File::OpenRead(path).ok();
}

class DiskCacheChunksTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("diskchunks"); }

  // Saves the state at n tokens of sequence `ids` (rows from `salt`), returns its layers.
  std::vector<std::vector<float>> Save(DiskCache& cache, const std::vector<int32_t>& ids, int64_t n,
                                       uint32_t salt, SaveReason reason = SaveReason::kContinued) {
    auto layers = GrownLayers(SmallShape(256), n, salt, uint32_t(n) * 7 + salt);
    auto st = KvState::Create(be_, SmallShape(256));
    EXPECT_TRUE(st.ok());
    WriteGrown(*st, layers, n);
    const std::vector<int32_t> prefix(ids.begin(), ids.begin() + n);
    const auto logits = Logits(kVocab, float(n));
    SnapshotContent c;
    c.tokens = prefix;
    c.logits = logits;
    const std::string text = fmt::format("t{}", n);
    c.text = text;
    c.reason = reason;
    auto key = cache.Save(*st, c);
    EXPECT_TRUE(key.ok()) << key.status().ToString();
    EXPECT_TRUE(cache.Flush().ok());
    return layers;
  }

  Expected<DiskHit> LoadExactly(DiskCache& cache, const std::vector<int32_t>& ids, int64_t n,
                                KvState& st) {
    return cache.Load(DiskLookup{.tokens = ids, .text = {}, .min_tokens = n, .max_tokens = n}, st);
  }

  // Every entry of `saved` (tokens → the layers saved) restores exactly, logits too.
  void ExpectRestores(DiskCache& cache, const std::vector<int32_t>& ids,
                      const std::map<int64_t, std::vector<std::vector<float>>>& saved) {
    for (const auto& [n, layers] : saved) {
      auto st = KvState::Create(be_, SmallShape(256));
      ASSERT_TRUE(st.ok());
      auto hit = LoadExactly(cache, ids, n, *st);
      ASSERT_TRUE(hit.ok()) << n << ": " << hit.status().ToString();
      ExpectLayers(*st, layers);
      EXPECT_EQ(hit->logits, Logits(kVocab, float(n)));
    }
  }

  CpuBackend be_{nullptr};
  std::string dir_;
};

TEST_F(DiskCacheChunksTest, ContinuedSavesWriteEachChunkOnceAndRestoreExactly) {
  const auto ids = Tokens(256, 3);
  std::map<int64_t, std::vector<std::vector<float>>> saved;
  {
    auto cache = DiskCache::Open(Options(dir_));
    ASSERT_TRUE(cache.ok());
    for (int64_t n = 40; n <= 256; n += 24) saved[n] = Save(**cache, ids, n, 1);
    const DiskCacheStats s = (*cache)->stats();
    EXPECT_EQ(s.chunks, 256u / kChunk - 0);  // every whole chunk of the longest, once
    EXPECT_EQ(s.chunks_written, s.chunks);
    EXPECT_GT(s.chunks_reused, 0u);
    EXPECT_EQ(s.entries, saved.size());
    // Physical: manifests + each chunk once; logical: every entry's whole state.
    EXPECT_EQ(s.used_bytes, DirBytes(dir_));
    EXPECT_GT(s.logical_bytes, s.chunk_bytes);
    EXPECT_EQ(ChunkFiles(dir_), ReferencedChunks(dir_));
  }
  // After a restart every entry restores bit-exactly (chunk headers re-read by the scan).
  auto cache = DiskCache::Open(Options(dir_));
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ((*cache)->stats().quarantined, 0u);
  ExpectRestores(**cache, ids, saved);
  // A save after the restart reuses the chunks the scan found.
  const uint64_t before = (*cache)->stats().chunks_written;
  (void)Save(**cache, Tokens(256, 3), 250, 1);
  EXPECT_EQ((*cache)->stats().chunks_written, before);
}

// Chunk files written whole after the capture (SnapshotWriteOptions::stream_chunks off)
// instead of streamed behind it: the same chunks, each once, and exact restores.
TEST_F(DiskCacheChunksTest, ChunksWrittenWholeAfterTheCaptureRestoreExactly) {
  const auto ids = Tokens(256, 5);
  DiskCacheOptions o = Options(dir_);
  o.write.stream_chunks = false;
  auto cache = DiskCache::Open(o);
  ASSERT_TRUE(cache.ok());
  std::map<int64_t, std::vector<std::vector<float>>> saved;
  for (int64_t n : {70, 140, 256}) saved[n] = Save(**cache, ids, n, 2);
  EXPECT_EQ((*cache)->stats().chunks_written, 256u / kChunk);
  EXPECT_EQ(ChunkFiles(dir_), ReferencedChunks(dir_));
  ExpectRestores(**cache, ids, saved);
}

TEST_F(DiskCacheChunksTest, SessionsSharingAPrefixShareItsChunks) {
  auto cache = DiskCache::Open(Options(dir_));
  ASSERT_TRUE(cache.ok());
  auto a = Tokens(256, 5);
  auto b = a;
  for (size_t i = 70; i < b.size(); ++i) b[i] = int32_t(900 + i % 50);  // diverge at 70
  const auto la = Save(**cache, a, 100, 1);
  EXPECT_EQ((*cache)->stats().chunks_written, 6u);
  // b's rows agree with a's on the shared prefix (salt 1 for both: same ids → same rows).
  const auto lb = Save(**cache, b, 100, 1);
  EXPECT_EQ((*cache)->stats().chunks_written, 6u + 2u);  // chunks 4, 5 are b's own
  EXPECT_EQ((*cache)->stats().chunks_reused, 4u);
  auto st = KvState::Create(be_, SmallShape(256));
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE(LoadExactly(**cache, b, 100, *st).ok());
  ExpectLayers(*st, lb);
  ASSERT_TRUE(LoadExactly(**cache, a, 100, *st).ok());
  ExpectLayers(*st, la);
}

TEST_F(DiskCacheChunksTest, EvictionFreesOnlyChunksNoOtherManifestNames) {
  auto cache = DiskCache::Open(Options(dir_));
  ASSERT_TRUE(cache.ok());
  auto a = Tokens(256, 5);
  auto b = a;
  for (size_t i = 70; i < b.size(); ++i) b[i] = int32_t(900 + i % 50);
  (void)Save(**cache, a, 100, 1);
  const auto lb = Save(**cache, b, 100, 1);
  ASSERT_EQ(ChunkFiles(dir_).size(), 8u);
  // Removing a frees its chunks 4 and 5 only; b's are untouched.
  const std::string key_a = Sha1Hex(TokensKey(std::span(a).first(100)));
  ASSERT_TRUE((*cache)->Remove(key_a).ok());
  ASSERT_TRUE((*cache)->Flush().ok());
  EXPECT_EQ(ChunkFiles(dir_).size(), 6u);
  EXPECT_EQ(ChunkFiles(dir_), ReferencedChunks(dir_));
  auto st = KvState::Create(be_, SmallShape(256));
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE(LoadExactly(**cache, b, 100, *st).ok());
  ExpectLayers(*st, lb);
  // A budget of nothing evicts b too, and with it every chunk.
  ASSERT_TRUE((*cache)->Collect(1).ok());
  ASSERT_TRUE((*cache)->Flush().ok());
  EXPECT_TRUE(ChunkFiles(dir_).empty());
  EXPECT_EQ((*cache)->stats().chunk_bytes, 0u);
}

TEST_F(DiskCacheChunksTest, DamagedChunkQuarantinesItsManifestsAndTheNextCandidateLoads) {
  const auto ids = Tokens(256, 9);
  auto cache = DiskCache::Open(Options(dir_));
  ASSERT_TRUE(cache.ok());
  const auto short_layers = Save(**cache, ids, 40, 2);  // chunks 0, 1
  (void)Save(**cache, ids, 90, 2);                      // + chunks 2..4
  const std::string c3 =
      JoinPath(ChunkDirOf(dir_), ChunkFileName(ChunkName(TestIdentity(), kChunk, 3, ids)));
  auto bytes = ReadWholeFile(c3);
  ASSERT_TRUE(bytes.ok());
  (*bytes)[bytes->size() - 3] ^= 0x20;
  {
    auto f = File::Create(c3);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->Write(bytes->data(), bytes->size()).ok());
  }
  auto st = KvState::Create(be_, SmallShape(256));
  ASSERT_TRUE(st.ok());
  auto hit = (*cache)->Load(
      DiskLookup{.tokens = ids, .text = {}, .min_tokens = 1, .max_tokens = 256}, *st);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  EXPECT_EQ(hit->entry.n_tokens, 40u);
  EXPECT_EQ(hit->failed_candidates, 1);
  ExpectLayers(*st, short_layers);
  // The manifest and the bad chunk went to quarantine; the rest is intact.
  EXPECT_EQ((*cache)->stats().quarantined, 2u);
  EXPECT_FALSE(Exists(c3));
  ASSERT_TRUE((*cache)->Flush().ok());
  EXPECT_EQ(ChunkFiles(dir_), ReferencedChunks(dir_));
}

TEST_F(DiskCacheChunksTest, AMissingChunkAtStartupQuarantinesItsManifest) {
  const auto ids = Tokens(256, 4);
  {
    auto cache = DiskCache::Open(Options(dir_));
    ASSERT_TRUE(cache.ok());
    (void)Save(**cache, ids, 40, 2);
    (void)Save(**cache, ids, 90, 2);
  }
  ASSERT_TRUE(RemoveFile(JoinPath(ChunkDirOf(dir_),
                                  ChunkFileName(ChunkName(TestIdentity(), kChunk, 4, ids))))
                  .ok());
  auto cache = DiskCache::Open(Options(dir_));
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ((*cache)->stats().quarantined, 1u);
  EXPECT_EQ((*cache)->stats().entries, 1u);
  ASSERT_TRUE((*cache)->Flush().ok());  // the sweep runs on the writer
  // Chunks 2, 3 were the 90-token manifest's alone: unreferenced now, removed.
  EXPECT_EQ(ChunkFiles(dir_), ReferencedChunks(dir_));
  EXPECT_EQ(ChunkFiles(dir_).size(), 2u);
}

TEST_F(DiskCacheChunksTest, EveryObjectWrittenOrRemovedIsReported) {
  std::vector<DiskObjectEvent> events;
  std::mutex mu;
  DiskCacheOptions o = Options(dir_);
  o.on_object = [&](const DiskObjectEvent& e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(e);
  };
  auto cache = DiskCache::Open(o);
  ASSERT_TRUE(cache.ok());
  const auto ids = Tokens(256, 6);
  (void)Save(**cache, ids, 40, 2);
  ASSERT_EQ(events.size(), 3u);  // two chunks, then the manifest naming them
  EXPECT_EQ(events[0].kind, DiskObjectEvent::Kind::kChunk);
  EXPECT_TRUE(events[0].name.starts_with("chunks/"));
  EXPECT_EQ(events[2].kind, DiskObjectEvent::Kind::kManifest);
  EXPECT_EQ(events[2].name, Sha1Hex(TokensKey(std::span(ids).first(40))) + ".kv");
  for (const DiskObjectEvent& e : events) {
    EXPECT_FALSE(e.removed);
    EXPECT_TRUE(Exists(JoinPath(dir_, e.name))) << e.name;
  }
  ASSERT_TRUE((*cache)->Remove(events[2].name.substr(0, 40)).ok());
  ASSERT_TRUE((*cache)->Flush().ok());
  ASSERT_EQ(events.size(), 6u);
  for (size_t i = 3; i < 6; ++i) EXPECT_TRUE(events[i].removed);
}

// kill -9 at random points of a loop of chunked saves (growing sequences that share chunks)
// never leaves a manifest naming a missing or partial chunk; the next start removes the
// temp files and every unreferenced chunk.
TEST_F(DiskCacheChunksTest, KillNineDuringChunkedWritesLeavesOnlyUnreferencedChunks) {
  std::mt19937 rng(4321);
  int killed = 0, orphans_seen = 0;
  for (int round = 0; round < 30; ++round) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto cache = DiskCache::Open(Options(dir_, uint64_t(2) << 20));
      if (!cache.ok()) ::_exit(3);
      const auto ids = Tokens(256, round % 4);  // four sequences: chunks shared across rounds
      for (int64_t n = 20;; n = n >= 250 ? 20 : n + 23) (void)Save(**cache, ids, n, round % 4);
    }
    ::usleep(useconds_t(rng() % 30000));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    killed += WIFSIGNALED(status);
    // Every manifest verifies with all its chunks (VerifySnapshotFile reads them whole).
    auto list = ListDirectory(dir_);
    ASSERT_TRUE(list.ok());
    for (const DirEntry& e : *list) {
      Sha1Digest key;
      if (!ParseSnapshotFileName(e.name, &key)) continue;
      auto v = VerifySnapshotFile(JoinPath(dir_, e.name));
      ASSERT_TRUE(v.ok()) << "round " << round << ": " << v.status().ToString();
    }
    const auto referenced = ReferencedChunks(dir_);
    for (const std::string& c : ChunkFiles(dir_)) orphans_seen += referenced.count(c) == 0;
    auto cache = DiskCache::Open(Options(dir_, uint64_t(2) << 20));
    ASSERT_TRUE(cache.ok()) << cache.status().ToString();
    ASSERT_TRUE((*cache)->Flush().ok());
    EXPECT_EQ((*cache)->stats().quarantined, 0u);
    EXPECT_EQ(ChunkFiles(dir_), ReferencedChunks(dir_)) << "round " << round;
  }
  EXPECT_EQ(killed, 30);
  EXPECT_GT(orphans_seen, 0) << "some kills should land between chunks and their manifest";
}

}  // namespace
}  // namespace flashkv

namespace flashkv {
namespace {

// The rolling 24-hour write budget: saves past it are skipped with the reason and counted;
// once the window has moved on, saves are admitted again.
TEST_F(DiskCacheChunksTest, WriteBudgetSkipsSavesBeyondIt) {
  int64_t now = 1'800'000'000'000;
  DiskCacheOptions o = Options(dir_);
  o.clock_ms = [&] { return now; };
  o.write_budget_bytes_per_day = 40 << 10;  // a few small saves
  auto cache = DiskCache::Open(o);
  ASSERT_TRUE(cache.ok());
  int admitted = 0;
  Status last;
  for (uint32_t s = 0; s < 40 && last.ok(); ++s) {
    const auto ids = Tokens(256, int32_t(100 + s));
    auto layers = GrownLayers(SmallShape(256), 100, s, s);
    auto st = KvState::Create(be_, SmallShape(256));
    ASSERT_TRUE(st.ok());
    WriteGrown(*st, layers, 100);
    const std::vector<int32_t> prefix(ids.begin(), ids.begin() + 100);
    const auto logits = Logits(kVocab);
    SnapshotContent c;
    c.tokens = prefix;
    c.logits = logits;
    c.reason = SaveReason::kCold;
    auto key = (*cache)->Save(*st, c);
    ASSERT_TRUE((*cache)->Flush().ok());
    last = key.status();
    admitted += key.ok();
  }
  ASSERT_EQ(last.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(last.message().find("write budget"), std::string::npos) << last.ToString();
  EXPECT_GT(admitted, 0);
  DiskCacheStats s = (*cache)->stats();
  EXPECT_EQ(s.save_skipped_write_budget, 1u);
  EXPECT_LE(s.bytes_written_24h, o.write_budget_bytes_per_day);
  EXPECT_EQ(s.bytes_written_by_reason[uint8_t(SaveReason::kCold)], s.bytes_written);
  // A day later the window is empty again.
  now += int64_t(24) * 3600 * 1000 + 1;
  EXPECT_EQ((*cache)->stats().bytes_written_24h, 0u);
  (void)Save(**cache, Tokens(256, 7), 100, 7);
  EXPECT_EQ((*cache)->stats().save_skipped_write_budget, 1u);
}

// The window survives a restart (the file in the cache directory), a damaged window file
// is ignored (the window starts empty), and an import from another tier is charged to it.
TEST_F(DiskCacheChunksTest, WriteBudgetWindowSurvivesRestartsAndCountsImports) {
  int64_t now = 1'800'000'000'000;
  DiskCacheOptions o = Options(dir_);
  o.clock_ms = [&] { return now; };
  o.write_budget_bytes_per_day = 40 << 10;
  auto try_save = [&](DiskCache& cache, uint32_t salt) -> Status {
    const auto ids = Tokens(256, int32_t(salt));
    auto layers = GrownLayers(SmallShape(256), 100, salt, salt);
    auto st = KvState::Create(be_, SmallShape(256));
    if (!st.ok()) return st.status();
    WriteGrown(*st, layers, 100);
    const std::vector<int32_t> prefix(ids.begin(), ids.begin() + 100);
    const auto logits = Logits(kVocab);
    SnapshotContent c;
    c.tokens = prefix;
    c.logits = logits;
    c.reason = SaveReason::kCold;
    Status saved = cache.Save(*st, c).status();
    Status flushed = cache.Flush();
    return saved.ok() ? flushed : saved;
  };
  uint64_t written = 0;
  {
    auto cache = DiskCache::Open(o);
    ASSERT_TRUE(cache.ok());
    ASSERT_TRUE(try_save(**cache, 1).ok());
    written = (*cache)->stats().bytes_written_24h;
    ASSERT_GT(written, 0u);
  }
  now += 3600 * 1000;
  {
    auto cache = DiskCache::Open(o);
    ASSERT_TRUE(cache.ok());
    EXPECT_EQ((*cache)->stats().bytes_written_24h, written);
    // Saves until the budget, counting the first process's bytes too.
    uint64_t more = 0;
    Status last;
    for (uint32_t s = 2; s < 40 && last.ok(); ++s) {
      last = try_save(**cache, s);
    }
    EXPECT_EQ(last.code(), StatusCode::kResourceExhausted);
    more = (*cache)->stats().bytes_written_24h;
    EXPECT_LE(more, o.write_budget_bytes_per_day);
    EXPECT_GT(more, written);
  }
  // A day after the last write the window is empty, restart or not.
  now += int64_t(24) * 3600 * 1000;
  {
    auto cache = DiskCache::Open(o);
    ASSERT_TRUE(cache.ok());
    EXPECT_EQ((*cache)->stats().bytes_written_24h, 0u);
  }
  // Damage: ignored with a log line, the window starts empty, and the next write stores
  // a good file again.
  const std::string wpath = JoinPath(dir_, std::string(kWriteWindowFileName));
  {
    auto f = File::Create(wpath);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->Write("FLKVWWIN garbage", 16).ok());
    ASSERT_TRUE(f->Close().ok());
  }
  now -= int64_t(24) * 3600 * 1000;  // the old buckets would count again if it were read
  {
    auto cache = DiskCache::Open(o);
    ASSERT_TRUE(cache.ok());
    EXPECT_EQ((*cache)->stats().bytes_written_24h, 0u);
  }
  // An import into another directory is charged to that directory's window.
  const std::string other = MakeTempDir("diskchunks-import");
  auto src = InspectCacheDirectory(dir_);
  ASSERT_TRUE(src.ok());
  ASSERT_FALSE(src->entries.empty());
  const DiskCacheEntry& e = src->entries.front();
  auto f = File::OpenRead(e.path);
  ASSERT_TRUE(f.ok());
  auto scan = ScanSnapshotFile(*f);
  ASSERT_TRUE(scan.ok());
  std::vector<std::string> bytes;
  std::vector<std::string> names;
  auto manifest = ReadWholeFile(e.path);
  ASSERT_TRUE(manifest.ok());
  bytes.push_back(*manifest);
  names.push_back(e.path.substr(e.path.find_last_of('/') + 1));
  for (const SnapshotChunkRef& c : scan->chunks) {
    auto cb = ReadWholeFile(JoinPath(ChunkDirOf(dir_), ChunkFileName(c.name)));
    ASSERT_TRUE(cb.ok());
    bytes.push_back(*cb);
    names.push_back(ChunkFileName(c.name));
  }
  uint64_t total = 0;
  std::vector<DiskImportObject> objects;
  for (size_t i = 0; i < bytes.size(); ++i) {
    objects.push_back({names[i], bytes[i]});
    total += bytes[i].size();
  }
  DiskCacheOptions ob = o;
  ob.dir = other;
  {
    auto b = DiskCache::Open(ob);
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE((*b)->Import(e.key, uint32_t(e.n_tokens), objects).ok());
    EXPECT_EQ((*b)->stats().bytes_written_24h, total);
  }
  auto b = DiskCache::Open(ob);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->stats().bytes_written_24h, total);
}

// Admission by worth: a save that extends a stored entry by a few tokens spares little
// prefill for the manifest it writes, and is skipped; a long one is admitted.
TEST_F(DiskCacheChunksTest, SavesNotWorthTheirWritesAreSkipped) {
  DiskCacheOptions o = Options(dir_);
  o.min_tokens_per_mib = 15000;  // small-shape manifests are ~8 KiB: ≥ 120 tokens each
  auto cache = DiskCache::Open(o);
  ASSERT_TRUE(cache.ok());
  const auto ids = Tokens(256, 11);
  (void)Save(**cache, ids, 200, 1);  // 200 tokens spared for ~8 KiB + chunks: admitted
  auto layers = GrownLayers(SmallShape(256), 210, 1, 3);
  auto st = KvState::Create(be_, SmallShape(256));
  ASSERT_TRUE(st.ok());
  WriteGrown(*st, layers, 210);
  const std::vector<int32_t> prefix(ids.begin(), ids.begin() + 210);
  const auto logits = Logits(kVocab);
  SnapshotContent c;
  c.tokens = prefix;
  c.logits = logits;
  auto key = (*cache)->Save(*st, c);  // 10 more tokens for another manifest
  ASSERT_FALSE(key.ok());
  EXPECT_NE(key.status().message().find("not worth"), std::string::npos) << key.status().ToString();
  EXPECT_EQ((*cache)->stats().save_skipped_not_worth, 1u);
  EXPECT_EQ((*cache)->stats().entries, 1u);
}

}  // namespace
}  // namespace flashkv

namespace flashkv {
namespace {

// Under a tight budget, saves of sessions that share a prefix evict by value: the directory
// never holds more than the budget, a chunk goes only with the last manifest naming it, and
// every entry left restores exactly.
TEST_F(DiskCacheChunksTest, TightBudgetEvictsManifestsAndOnlyTheirOwnChunks) {
  uint64_t one = 0;
  {
    const std::string probe = MakeTempDir("diskchunks-probe");
    auto cache = DiskCache::Open(Options(probe));
    ASSERT_TRUE(cache.ok());
    (void)Save(**cache, Tokens(256, 1), 100, 1);
    one = (*cache)->stats().used_bytes;
  }
  const uint64_t budget = one * 5 / 2;
  auto cache = DiskCache::Open(Options(dir_, budget));
  ASSERT_TRUE(cache.ok());
  const auto base = Tokens(256, 1);
  std::map<int, std::vector<std::vector<float>>> saved;
  std::map<int, std::vector<int32_t>> ids;
  for (int s = 0; s < 6; ++s) {
    ids[s] = base;  // the first 64 ids (4 chunks) shared, then each session's own
    for (size_t i = 64; i < base.size(); ++i) ids[s][i] = int32_t(500 + 37 * s + i % 11);
    saved[s] = Save(**cache, ids[s], 100, 1);
    ASSERT_TRUE((*cache)->Flush().ok());
    EXPECT_LE(DirBytes(dir_), budget) << "after session " << s;
    EXPECT_EQ(ChunkFiles(dir_), ReferencedChunks(dir_)) << "after session " << s;
  }
  EXPECT_GT((*cache)->stats().evictions, 0u);
  int left = 0;
  for (const auto& [s, layers] : saved) {
    auto st = KvState::Create(be_, SmallShape(256));
    ASSERT_TRUE(st.ok());
    auto hit = LoadExactly(**cache, ids[s], 100, *st);
    if (!hit.ok()) continue;  // evicted
    ++left;
    ExpectLayers(*st, layers);
  }
  EXPECT_GE(left, 2);  // the shared chunks are paid once: more than two fit in 2.5 entries
}

}  // namespace
}  // namespace flashkv
