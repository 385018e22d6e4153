#include "kv_disk/disk_cache.h"

#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kv/prefix_index.h"
#include "kv_test_util.h"
#include "snapshot/snapshot_codec.h"
#include "util/file_io.h"

namespace flashkv {
namespace {

using testing::LayerOf;
using testing::Logits;
using testing::MakeTempDir;
using testing::RandomState;
using testing::SmallShape;
using testing::TestIdentity;
using testing::Tokens;

constexpr int kVocab = 1000;

DiskCacheOptions Options(const std::string& dir, uint64_t budget = uint64_t(64) << 20) {
  DiskCacheOptions o;
  o.dir = dir;
  o.budget_bytes = budget;
  o.identity = TestIdentity();
  return o;
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

int CountFiles(const std::string& dir, std::string_view needle) {
  int n = 0;
  auto list = ListDirectory(dir);
  for (const DirEntry& e : *list) n += e.name.find(needle) != std::string::npos;
  return n;
}

class DiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("diskcache"); }

  // Saves a random state of the first n ids of `tokens` with `text`.
  std::string SaveEntry(DiskCache& cache, const std::vector<int32_t>& tokens, int64_t n,
                        std::string text, uint32_t seed, SaveReason reason = SaveReason::kCold) {
    KvState st = RandomState(be_, SmallShape(), n, seed);
    const std::vector<int32_t> ids(tokens.begin(), tokens.begin() + n);
    const auto logits = Logits(kVocab, float(seed));
    SnapshotContent c;
    c.tokens = ids;
    c.logits = logits;
    c.text = text;
    c.reason = reason;
    auto key = cache.Save(st, c);
    EXPECT_TRUE(key.ok()) << key.status().ToString();
    EXPECT_TRUE(cache.Flush().ok());
    saved_[seed] = LayerOf(st, 1);
    return key.ok() ? *key : "";
  }

  CpuBackend be_{nullptr};
  std::string dir_;
  std::map<uint32_t, std::vector<float>> saved_;  // layer 1 of each saved state, by seed
};

TEST(PrefixIndexTest, TokenTrieFindsEveryPrefixAndMergesOnErase) {
  TokenPrefixIndex t;
  t.Insert("a", std::vector<int32_t>{1, 2, 3});
  t.Insert("b", std::vector<int32_t>{1, 2, 3, 4, 5});
  t.Insert("c", std::vector<int32_t>{1, 2, 9});
  t.Insert("d", std::vector<int32_t>{1});
  EXPECT_EQ(t.size(), 4u);
  using V = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(t.PrefixesOf(std::vector<int32_t>{1, 2, 3, 4, 5, 6}),
            (V{{"b", 5}, {"a", 3}, {"d", 1}}));
  EXPECT_EQ(t.PrefixesOf(std::vector<int32_t>{1, 2, 3, 4}), (V{{"a", 3}, {"d", 1}}));
  EXPECT_EQ(t.PrefixesOf(std::vector<int32_t>{1, 2, 9}), (V{{"c", 3}, {"d", 1}}));
  EXPECT_EQ(t.PrefixesOf(std::vector<int32_t>{2}), V{});
  const size_t nodes = t.node_count();
  EXPECT_TRUE(t.Erase(std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(t.Erase(std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(t.Erase(std::vector<int32_t>{1, 2}));
  EXPECT_EQ(t.PrefixesOf(std::vector<int32_t>{1, 2, 3, 4, 5}), (V{{"b", 5}, {"d", 1}}));
  EXPECT_LT(t.node_count(), nodes);
  for (auto ids : {std::vector<int32_t>{1, 2, 3, 4, 5}, std::vector<int32_t>{1, 2, 9},
                   std::vector<int32_t>{1}}) {
    EXPECT_TRUE(t.Erase(ids));
  }
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.node_count(), 1u);
}

TEST(PrefixIndexTest, TextIndexConfirmsBytes) {
  TextPrefixIndex t;
  std::map<std::string, std::string> texts = {{"a", "hello"}, {"b", "hello world"}, {"c", "help"}};
  for (const auto& [k, v] : texts) t.Insert(k, v);
  auto text_of = [&](const std::string& k) -> std::string_view { return texts[k]; };
  using V = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(t.PrefixesOf("hello world!", text_of), (V{{"b", 11}, {"a", 5}}));
  EXPECT_EQ(t.PrefixesOf("help me", text_of), (V{{"c", 4}}));
  EXPECT_EQ(t.PrefixesOf("hell", text_of), V{});
  t.Erase("a", "hello");
  EXPECT_EQ(t.PrefixesOf("hello world!", text_of), (V{{"b", 11}}));
}

TEST_F(DiskCacheTest, LongestTokenPrefixLoadsExactlyAndSurvivesRestart) {
  const auto ids = Tokens(60);
  std::string k20;
  {
    auto cache = DiskCache::Open(Options(dir_));
    ASSERT_TRUE(cache.ok()) << cache.status().ToString();
    SaveEntry(**cache, ids, 10, "", 10);
    k20 = SaveEntry(**cache, ids, 20, "", 20);
    SaveEntry(**cache, Tokens(60, 3), 30, "", 30);  // another branch
    EXPECT_TRUE((*cache)->Contains(std::vector<int32_t>(ids.begin(), ids.begin() + 20)));
    EXPECT_EQ(k20.size(), 40u);
    EXPECT_EQ(CountFiles(dir_, k20 + ".kv"), 1);
  }
  // A fresh process view: the index is rebuilt from headers and token sections.
  auto cache = DiskCache::Open(Options(dir_));
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ((*cache)->List().size(), 3u);
  KvState dst = RandomState(be_, SmallShape(), 40, 1);
  const std::vector<int32_t> request(ids.begin(), ids.begin() + 25);
  auto hit = (*cache)->Load(DiskLookup{.tokens = request, .text = {}}, dst);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  EXPECT_EQ(hit->entry.key, k20);
  EXPECT_FALSE(hit->by_text);
  EXPECT_EQ(dst.n_tokens(), 20);
  EXPECT_EQ(hit->tokens, std::vector<int32_t>(ids.begin(), ids.begin() + 20));
  EXPECT_EQ(hit->logits, Logits(kVocab, 20.0f));
  EXPECT_EQ(LayerOf(dst, 1), saved_[20]);
  EXPECT_EQ(hit->failed_candidates, 0);

  // min_tokens filters; the hit count was written in place.
  EXPECT_TRUE(
      (*cache)->Candidates(DiskLookup{.tokens = request, .text = {}, .min_tokens = 21}).empty());
  EXPECT_EQ((*cache)->Candidates(DiskLookup{.tokens = request, .text = {}}).size(), 2u);
  cache->reset();
  auto again = DiskCache::Open(Options(dir_));
  ASSERT_TRUE(again.ok());
  for (const DiskCacheEntry& e : (*again)->List()) {
    EXPECT_EQ(e.hit_count, e.key == k20 ? 1u : 0u) << e.key;
  }
  // Another branch of ids finds nothing.
  auto miss = (*again)->Load(DiskLookup{.tokens = Tokens(60, 7), .text = {}}, dst);
  EXPECT_EQ(miss.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(dst.n_tokens(), 20) << "a miss without candidates leaves the state alone";
}

// Version 2 is the only version written (docs/KV_FORMAT.md): chunking off (0), a chunk size
// the shape's ratios (4, 8) do not divide (12) and fewer tokens than a chunk (2048) all write
// a manifest without chunks; 16 writes two chunks. Each restores exactly.
TEST_F(DiskCacheTest, EverySaveWritesVersion2) {
  const auto ids = Tokens(40);
  for (uint32_t chunk : {0u, 12u, 16u, 2048u}) {
    const std::string dir = MakeTempDir("v2only");
    DiskCacheOptions o = Options(dir);
    o.chunk_tokens = chunk;
    auto cache = DiskCache::Open(o);
    ASSERT_TRUE(cache.ok()) << cache.status().ToString();
    const std::string key = SaveEntry(**cache, ids, 40, "", 40);
    auto f = File::OpenRead(JoinPath(dir, key + ".kv"));
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    auto h = ReadSnapshotHeader(*f);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    EXPECT_EQ(h->version, kSnapshotVersion) << chunk;
    EXPECT_EQ(h->n_chunks, chunk == 16 ? 2u : 0u) << chunk;
    EXPECT_EQ(h->chunk_tokens, chunk == 16 ? 16u : 0u) << chunk;
    KvState dst = RandomState(be_, SmallShape(), 3, 1);
    auto hit = (*cache)->Load(DiskLookup{.tokens = ids, .text = {}}, dst);
    ASSERT_TRUE(hit.ok()) << chunk << ": " << hit.status().ToString();
    EXPECT_EQ(dst.n_tokens(), 40);
    EXPECT_EQ(LayerOf(dst, 1), saved_[40]) << chunk;
  }
}

// A request whose tokenization differs at the seam still reuses the entry through its text.
TEST_F(DiskCacheTest, TextPrefixHit) {
  auto cache = DiskCache::Open(Options(dir_));
  ASSERT_TRUE(cache.ok());
  const auto ids = Tokens(30);
  SaveEntry(**cache, ids, 16, "<system>hello wor", 16);
  std::vector<int32_t> request = ids;
  request[10] = 999;  // different ids
  KvState dst = RandomState(be_, SmallShape(), 3, 1);
  auto hit = (*cache)->Load(DiskLookup{.tokens = request, .text = "<system>hello world, go"}, dst);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  EXPECT_TRUE(hit->by_text);
  EXPECT_EQ(hit->text_bytes, 17u);
  EXPECT_EQ(dst.n_tokens(), 16);
  EXPECT_EQ(LayerOf(dst, 1), saved_[16]);
  // Text that is not a byte prefix does not match.
  EXPECT_TRUE((*cache)->Candidates(DiskLookup{.tokens = request, .text = "<system>hello"}).empty());
}

// A text hit brings the entry's resume tail; the replay sections of every entry are read
// back after a restart through the cache (the engine opens no .kv file).
TEST_F(DiskCacheTest, TailAndReplaySectionsComeBackThroughTheCache) {
  const auto ids = Tokens(40);
  const std::vector<int32_t> tail = {7, 8};
  {
    auto cache = DiskCache::Open(Options(dir_));
    ASSERT_TRUE(cache.ok()) << cache.status().ToString();
    KvState st = RandomState(be_, SmallShape(), 24, 5);
    const std::vector<int32_t> first(ids.begin(), ids.begin() + 24);
    const auto logits = Logits(kVocab, 5.0f);
    SnapshotContent c;
    c.tokens = first;
    c.logits = logits;
    c.text = "visible turn";
    c.tail = tail;
    c.replay = "replay bytes";
    c.reason = SaveReason::kEvict;
    ASSERT_TRUE((*cache)->Save(st, c).ok());
    SaveEntry(**cache, Tokens(40, 9), 16, "", 16);  // no replay section
    ASSERT_TRUE((*cache)->Flush().ok());
  }
  auto cache = DiskCache::Open(Options(dir_));
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  EXPECT_EQ((*cache)->ReplaySections(), std::vector<std::string>{"replay bytes"});
  KvState dst = RandomState(be_, SmallShape(), 30, 1);
  const std::vector<int32_t> other = {1, 2, 3};  // ids that match nothing
  DiskLookup lookup;
  lookup.tokens = other;
  lookup.text = "visible turn and more";
  auto hit = (*cache)->Load(lookup, dst);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  EXPECT_TRUE(hit->by_text);
  EXPECT_EQ(hit->tail, tail);
  EXPECT_EQ(hit->replay, "replay bytes");
  EXPECT_TRUE(hit->extensions.empty());
}

TEST_F(DiskCacheTest, DamagedEntriesAreQuarantinedAndTheNextCandidateLoads) {
  const auto ids = Tokens(60);
  std::string k30, k40;
  {
    auto cache = DiskCache::Open(Options(dir_));
    ASSERT_TRUE(cache.ok());
    SaveEntry(**cache, ids, 20, "", 20);
    k30 = SaveEntry(**cache, ids, 30, "", 30);
    k40 = SaveEntry(**cache, ids, 40, "", 40);
  }
  // Damage the payload of the longest (found only at load) and the header of another
  // (found at the scan); leave a stale temp file and an unrelated file.
  const std::string p40 = JoinPath(dir_, k40 + ".kv");
  auto bytes = ReadWholeFile(p40);
  ASSERT_TRUE(bytes.ok());
  (*bytes)[bytes->size() - 100] ^= 1;
  {
    auto f = File::Create(p40);
    ASSERT_TRUE(f->Write(bytes->data(), bytes->size()).ok());
  }
  const std::string p30 = JoinPath(dir_, k30 + ".kv");
  {
    auto f = File::OpenReadWrite(p30);
    ASSERT_TRUE(f->WriteAt(60, "\xff", 1).ok());
  }
  ASSERT_TRUE(File::Create(JoinPath(dir_, k30 + ".kv.tmp.1.1")).ok());
  {
    auto f = File::Create(JoinPath(dir_, "notes.txt"));
    ASSERT_TRUE(f->Write("keep me", 7).ok());
  }

  auto cache = DiskCache::Open(Options(dir_));
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ(CountFiles(dir_, ".tmp."), 0) << "stale temp files are removed at start-up";
  EXPECT_EQ((*cache)->List().size(), 2u) << "the bad header was quarantined by the scan";
  EXPECT_EQ(CountFiles(JoinPath(dir_, "quarantine"), k30), 1);

  KvState dst = RandomState(be_, SmallShape(), 3, 1);
  auto hit = (*cache)->Load(DiskLookup{.tokens = ids, .text = {}}, dst);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  EXPECT_EQ(hit->failed_candidates, 1);
  EXPECT_EQ(dst.n_tokens(), 20);
  EXPECT_EQ(LayerOf(dst, 1), saved_[20]);
  EXPECT_EQ(CountFiles(JoinPath(dir_, "quarantine"), k40), 1);
  EXPECT_EQ((*cache)->List().size(), 1u);
  EXPECT_EQ((*cache)->stats().quarantined, 2u);
  EXPECT_EQ(CountFiles(dir_, "notes.txt"), 1) << "unrelated files are never deleted";
  // Budget accounting includes the quarantine and the unrelated file.
  EXPECT_EQ((*cache)->stats().used_bytes, DirBytes(dir_));
}

TEST_F(DiskCacheTest, QuarantineOffDeletes) {
  const auto ids = Tokens(20);
  std::string key;
  {
    auto cache = DiskCache::Open(Options(dir_));
    key = SaveEntry(**cache, ids, 12, "", 12);
  }
  {
    auto f = File::OpenReadWrite(JoinPath(dir_, key + ".kv"));
    ASSERT_TRUE(f->WriteAt(300, "\x01\x02", 2).ok());
  }
  DiskCacheOptions o = Options(dir_);
  o.quarantine = false;
  auto cache = DiskCache::Open(o);
  ASSERT_TRUE(cache.ok());
  EXPECT_TRUE((*cache)->List().empty());
  EXPECT_EQ(CountFiles(dir_, ".kv"), 0);
  EXPECT_EQ(CountFiles(dir_, "quarantine"), 0);
}

TEST_F(DiskCacheTest, AnotherModelsEntriesAreListedButNeverLoaded) {
  const auto ids = Tokens(20);
  {
    DiskCacheOptions o = Options(dir_);
    o.identity = TestIdentity("model-b");
    auto cache = DiskCache::Open(o);
    SaveEntry(**cache, ids, 12, "", 12);
  }
  auto cache = DiskCache::Open(Options(dir_));
  ASSERT_TRUE(cache.ok());
  ASSERT_EQ((*cache)->List().size(), 1u);
  EXPECT_FALSE((*cache)->List()[0].loadable);
  EXPECT_EQ((*cache)->stats().foreign_entries, 1u);
  KvState dst = RandomState(be_, SmallShape(), 3, 1);
  EXPECT_EQ((*cache)->Load(DiskLookup{.tokens = ids, .text = {}}, dst).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(dst.n_tokens(), 3);
  EXPECT_EQ(CountFiles(dir_, ".kv"), 1) << "not quarantined: it is valid for its model";
  // Saving the same ids for this model replaces it.
  SaveEntry(**cache, ids, 12, "", 13);
  ASSERT_EQ((*cache)->List().size(), 1u);
  EXPECT_TRUE((*cache)->List()[0].loadable);
}

TEST_F(DiskCacheTest, OneProcessPerDirectory) {
  auto a = DiskCache::Open(Options(dir_));
  ASSERT_TRUE(a.ok());
  auto b = DiskCache::Open(Options(dir_));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("locked"), std::string::npos) << b.status().ToString();
}

TEST_F(DiskCacheTest, DuplicateSaveKeepsTheEntry) {
  auto cache = DiskCache::Open(Options(dir_));
  const auto ids = Tokens(20);
  const std::string k = SaveEntry(**cache, ids, 12, "", 12);
  ASSERT_TRUE((*cache)->Touch(k).ok());
  SaveEntry(**cache, ids, 12, "", 99);  // same ids, different state: kept as is
  auto list = (*cache)->List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].hit_count, 1u);
  EXPECT_EQ((*cache)->stats().saves, 1u);
}

// The directory never exceeds the budget; eviction follows the value rule; the entry
// just written survives; an entry that would be evicted first is not admitted.
TEST_F(DiskCacheTest, BudgetAndValueEviction) {
  const uint64_t entry = SnapshotFileBytes(SmallShape(), 40, kVocab, 0, {});
  const uint64_t budget = entry * 3 + entry / 2;  // room for three 40-token entries
  auto cache = DiskCache::Open(Options(dir_, budget));
  ASSERT_TRUE(cache.ok());
  const std::string a = SaveEntry(**cache, Tokens(40, 1), 40, "", 1);
  const std::string b = SaveEntry(**cache, Tokens(40, 2), 40, "", 2);
  const std::string c = SaveEntry(**cache, Tokens(40, 3), 40, "", 3);
  EXPECT_LE(DirBytes(dir_), budget);
  // b is used: its decayed hits raise its value above a and c.
  ASSERT_TRUE((*cache)->Touch(b).ok());
  ASSERT_TRUE((*cache)->Touch(b).ok());
  ASSERT_TRUE((*cache)->Touch(c).ok());  // c more recently used than a, same value as a? no:
  // c has 1 hit, a has 0 → a has the lowest value and goes first.
  const std::string d = SaveEntry(**cache, Tokens(40, 4), 40, "", 4);
  EXPECT_LE(DirBytes(dir_), budget);
  auto keys = [&] {
    std::set<std::string> s;
    for (const auto& e : (*cache)->List()) s.insert(e.key);
    return s;
  };
  EXPECT_EQ(keys(), (std::set<std::string>{b, c, d}));
  // Next to go: d (0 hits, value 40/bytes) vs c (1 hit): d is the lowest, but it was just
  // written... a new 40-token entry e ties with d; the older (d) goes, e survives.
  const std::string e = SaveEntry(**cache, Tokens(40, 5), 40, "", 5);
  EXPECT_EQ(keys(), (std::set<std::string>{b, c, e}));
  EXPECT_LE(DirBytes(dir_), budget);

  // A short entry has fewer tokens per byte than every entry here: not admitted.
  KvState st = RandomState(be_, SmallShape(), 4, 6);
  const auto ids = Tokens(4, 6);
  const auto logits = Logits(kVocab);
  SnapshotContent content;
  content.tokens = ids;
  content.logits = logits;
  auto r = (*cache)->Save(st, content);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("first entry evicted"), std::string::npos)
      << r.status().ToString();
  EXPECT_EQ(keys(), (std::set<std::string>{b, c, e}));

  // An entry larger than the whole budget is refused.
  auto tiny = DiskCache::Open(Options(MakeTempDir("tiny"), entry / 2));
  ASSERT_TRUE(tiny.ok());
  KvState st40 = RandomState(be_, SmallShape(), 40, 7);
  const auto ids40 = Tokens(40, 7);
  content.tokens = ids40;
  EXPECT_EQ((*tiny)->Save(st40, content).status().code(), StatusCode::kResourceExhausted);

  // gc to a smaller budget keeps the most valuable (b: two hits).
  auto n = (*cache)->Collect(entry + entry / 2);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2);
  EXPECT_EQ(keys(), (std::set<std::string>{b}));
  EXPECT_LE(DirBytes(dir_), entry + entry / 2);
  EXPECT_EQ((*cache)->stats().used_bytes, DirBytes(dir_));
}

TEST_F(DiskCacheTest, StartupEvictsToABudgetThatShrank) {
  {
    auto cache = DiskCache::Open(Options(dir_));
    for (uint32_t i = 1; i <= 4; ++i) SaveEntry(**cache, Tokens(40, int32_t(i)), 40, "", i);
  }
  const uint64_t entry = SnapshotFileBytes(SmallShape(), 40, kVocab, 0, {});
  auto cache = DiskCache::Open(Options(dir_, entry * 2 + 100));
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ((*cache)->List().size(), 2u);
  EXPECT_LE(DirBytes(dir_), entry * 2 + 100);
}

TEST_F(DiskCacheTest, RemoveByKeyPrefix) {
  auto cache = DiskCache::Open(Options(dir_));
  const std::string k = SaveEntry(**cache, Tokens(20), 12, "", 12);
  EXPECT_FALSE((*cache)->Remove("ab").ok());
  ASSERT_TRUE((*cache)->Remove(k.substr(0, 8)).ok());
  EXPECT_TRUE((*cache)->List().empty());
  EXPECT_EQ(CountFiles(dir_, ".kv"), 0);
}

// kill -9 at random points of a writer loop never leaves a loadable partial entry.
TEST_F(DiskCacheTest, KillNineDuringWritesNeverLeavesPartialEntries) {
  std::mt19937 rng(1234);
  int killed_mid_run = 0;
  int temp_left = 0;  // rounds killed while a temp file was being written
  for (int round = 0; round < 50; ++round) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Child: write entries as fast as possible until killed.
      CpuBackend be(nullptr);
      auto cache = DiskCache::Open(Options(dir_, uint64_t(8) << 20));
      if (!cache.ok()) ::_exit(3);
      for (uint32_t i = 0;; ++i) {
        KvState st = RandomState(be, SmallShape(512), 500, i);
        const auto ids = Tokens(500, int32_t(round * 1000 + i));
        const auto logits = Logits(kVocab);
        SnapshotContent c;
        c.tokens = ids;
        c.logits = logits;
        c.text = "kill test";
        (void)(*cache)->Save(st, c);
        if (i % 3 == 0) (void)(*cache)->Flush();
      }
    }
    ::usleep(useconds_t(rng() % 40000));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    killed_mid_run += WIFSIGNALED(status);
    temp_left += CountFiles(dir_, ".tmp.") > 0;
    // Every .kv in the directory is complete and verifies; the next open cleans temps.
    auto list = ListDirectory(dir_);
    ASSERT_TRUE(list.ok());
    for (const DirEntry& e : *list) {
      Sha1Digest key;
      if (!ParseSnapshotFileName(e.name, &key)) continue;
      auto v = VerifySnapshotFile(JoinPath(dir_, e.name));
      ASSERT_TRUE(v.ok()) << "round " << round << ": " << v.status().ToString();
    }
    auto cache = DiskCache::Open(Options(dir_, uint64_t(8) << 20));
    ASSERT_TRUE(cache.ok()) << cache.status().ToString();
    EXPECT_EQ((*cache)->stats().quarantined, 0u);
    EXPECT_EQ(CountFiles(dir_, ".tmp."), 0);
  }
  EXPECT_EQ(killed_mid_run, 50);
  EXPECT_GT(temp_left, 5) << "the kills should often land inside a write";
  auto cache = DiskCache::Open(Options(dir_, uint64_t(8) << 20));
  EXPECT_GT((*cache)->List().size(), 0u) << "some writes completed between kills";
}

// A scratch tmpfs of `size`, mounted read-only when `ro`; unmounted on destruction. Needs
// CAP_SYS_ADMIN (root in CI); without it the test is skipped with the reason.
class ScratchMount {
 public:
  ScratchMount(const std::string& path, const char* opts) : path_(path) {
    ok_ = ::mount("tmpfs", path.c_str(), "tmpfs", 0, opts) == 0;
    if (!ok_) error_ = std::strerror(errno);
  }
  ~ScratchMount() {
    if (ok_) ::umount2(path_.c_str(), MNT_DETACH);
  }
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }

 private:
  std::string path_;
  bool ok_ = false;
  std::string error_;
};

TEST_F(DiskCacheTest, NoSpaceIsAClearErrorAndTheCacheKeepsWorking) {
  ScratchMount m(dir_, "size=256k");
  if (!m.ok()) GTEST_SKIP() << "cannot mount a tmpfs here: " << m.error();
  auto cache = DiskCache::Open(Options(dir_, uint64_t(64) << 20));  // budget > the disk
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  KvState big = RandomState(be_, SmallShape(2048), 2000, 1);
  const auto ids = Tokens(2000);
  const auto logits = Logits(kVocab);
  SnapshotContent c;
  c.tokens = ids;
  c.logits = logits;
  const std::string text(400000, 'x');  // the file is larger than the 256 KiB disk
  c.text = text;
  auto key = (*cache)->Save(big, c);
  ASSERT_TRUE(key.ok());
  Status st = (*cache)->Flush();
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
  EXPECT_NE(st.message().find("No space left"), std::string::npos) << st.ToString();
  EXPECT_EQ(CountFiles(dir_, ".tmp."), 0) << "the failed temp file is removed";
  EXPECT_TRUE((*cache)->List().empty());
  // Serving continues: a small entry still fits and loads.
  const std::string k = SaveEntry(**cache, Tokens(20), 12, "", 12);
  KvState dst = RandomState(be_, SmallShape(), 3, 1);
  auto hit = (*cache)->Load(DiskLookup{.tokens = Tokens(20), .text = {}}, dst);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  EXPECT_EQ(hit->entry.key, k);
  EXPECT_EQ((*cache)->stats().save_failures, 1u);
}

TEST_F(DiskCacheTest, ReadOnlyDirectoryStillServesLoads) {
  ScratchMount m(dir_, "size=1m,mode=0755");
  if (!m.ok()) GTEST_SKIP() << "cannot mount a tmpfs here: " << m.error();
  std::string key;
  {
    auto cache = DiskCache::Open(Options(dir_));
    ASSERT_TRUE(cache.ok()) << cache.status().ToString();
    key = SaveEntry(**cache, Tokens(20), 12, "", 12);
  }
  ASSERT_EQ(::mount("tmpfs", dir_.c_str(), "tmpfs", MS_REMOUNT | MS_RDONLY, nullptr), 0)
      << std::strerror(errno);
  auto cache = DiskCache::Open(Options(dir_));
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  KvState dst = RandomState(be_, SmallShape(), 3, 1);
  auto hit = (*cache)->Load(DiskLookup{.tokens = Tokens(20), .text = {}}, dst);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  EXPECT_EQ(hit->entry.key, key);
  EXPECT_EQ(LayerOf(dst, 1), saved_[12]);
  // Nothing is written: saves and collection say why.
  KvState st = RandomState(be_, SmallShape(), 5, 2);
  const auto ids = Tokens(5, 9);
  const auto logits = Logits(kVocab);
  SnapshotContent c;
  c.tokens = ids;
  c.logits = logits;
  auto saved = (*cache)->Save(st, c);
  ASSERT_FALSE(saved.ok());
  EXPECT_NE(saved.status().message().find("is read-only"), std::string::npos);
  EXPECT_FALSE((*cache)->Collect(0).ok());
  EXPECT_EQ((*cache)->List().size(), 1u);
}

}  // namespace
}  // namespace flashkv

namespace flashkv {
namespace {

// Saves queued back to back (each streamed while its copy runs, the next copy reusing
// the buffer of a written one), in small chunks with and without O_DIRECT: every entry
// verifies and restores bit for bit in a fresh cache.
TEST(DiskCacheStreamTest, BackToBackStreamedSavesRestoreExactly) {
  CpuBackend be(nullptr);
  const KvShape shape = SmallShape(2048);
  for (bool direct : {true, false}) {
    const std::string dir = MakeTempDir("diskcache-stream");
    DiskCacheOptions o = Options(dir);
    o.write.chunk_bytes = 4096;
    o.write.direct = direct;
    std::vector<std::vector<float>> layer1;
    {
      auto cache = DiskCache::Open(o);
      ASSERT_TRUE(cache.ok()) << cache.status().ToString();
      for (int i = 0; i < 4; ++i) {
        const int64_t n = 1000 + 150 * i;
        KvState st = RandomState(be, shape, n, uint32_t(100 + i));
        const auto ids = Tokens(n, i);
        const auto logits = Logits(kVocab, float(i));
        SnapshotContent c;
        c.tokens = ids;
        c.logits = logits;
        const std::string text(size_t(333 + i), 'x');
        c.text = text;
        auto key = (*cache)->Save(st, c);
        ASSERT_TRUE(key.ok()) << key.status().ToString();
        layer1.push_back(LayerOf(st, 1));
      }
      ASSERT_TRUE((*cache)->Flush().ok());
      EXPECT_EQ((*cache)->stats().saves, 4u);
    }
    auto cache = DiskCache::Open(o);
    ASSERT_TRUE(cache.ok());
    ASSERT_EQ((*cache)->List().size(), 4u);
    for (int i = 0; i < 4; ++i) {
      const int64_t n = 1000 + 150 * i;
      const auto ids = Tokens(n, i);
      for (const DiskCacheEntry& e : (*cache)->List()) {
        if (e.n_tokens == uint32_t(n)) {
          EXPECT_TRUE(VerifySnapshotFile(e.path).ok()) << e.path;
        }
      }
      KvState dst = RandomState(be, shape, 7, 1);
      auto hit = (*cache)->Load(DiskLookup{.tokens = ids, .text = {}}, dst);
      ASSERT_TRUE(hit.ok()) << hit.status().ToString();
      EXPECT_EQ(dst.n_tokens(), n);
      EXPECT_EQ(hit->logits, Logits(kVocab, float(i)));
      EXPECT_EQ(LayerOf(dst, 1), layer1[i]) << "direct " << direct << " entry " << i;
    }
  }
}

}  // namespace
}  // namespace flashkv
