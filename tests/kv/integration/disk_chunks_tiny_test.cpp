// Version-2 snapshots on the ds4-tiny fixture (window 128, ratio-4 + indexer and ratio-128
// layers): two sessions that share a system prompt share its chunks, and a restore that
// reads the other session's chunks is the state this session computed, bit for bit; a
// conversation grown through many continued saves writes about its final state once.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../chunk_test_util.h"
#include "backend/cpu/cpu_backend.h"
#include "gguf/gguf_file.h"
#include "kv_disk/disk_cache.h"
#include "model/model.h"
#include "snapshot/model_fingerprint.h"
#include "util/file_io.h"
#include "util/thread_pool.h"

namespace flashkv {
namespace {

const std::string kModel = std::string(FLASHKV_FIXTURES_DIR) + "/ds4-tiny/ds4-tiny.gguf";

SnapshotIdentity Identity() {
  auto file = GgufFile::Open(kModel);
  EXPECT_TRUE(file.ok());
  auto fp = ModelFingerprint(*file);
  EXPECT_TRUE(fp.ok());
  return SnapshotIdentity{*fp, "official/q8"};
}

std::string TempDir(const char* what) {
  std::string tmpl = ::testing::TempDir() + what + ".XXXXXX";
  EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

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

std::vector<int32_t> RandomIds(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = int32_t(rng() % 1019);
  return t;
}

TEST(DiskChunksTiny, SessionsSharingASystemPromptShareItsChunksBitExactly) {
  ThreadPool pool(2);
  CpuBackend be(&pool);
  auto model = Model::Load(kModel, be);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const int vocab = (*model)->config().n_vocab;
  const auto system = RandomIds(300, 1);  // chunks [0, 128) and [128, 256) are its own
  auto session = [&](uint32_t seed) {
    auto ids = system;
    const auto user = RandomIds(70, seed);
    ids.insert(ids.end(), user.begin(), user.end());
    return ids;
  };
  const auto a = session(2), b = session(3);
  const std::string dir = TempDir("tinychunks");
  DiskCacheOptions o;
  o.dir = dir;
  o.identity = Identity();
  o.chunk_tokens = 128;
  auto cache = DiskCache::Open(o);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();

  // Each session prefills on its own (different prefill chunking, too) and is saved.
  auto run = [&](const std::vector<int32_t>& ids, int chunk, std::vector<float>* logits) {
    auto st = (*model)->NewState(int(ids.size()) + 8);
    EXPECT_TRUE(st.ok());
    logits->resize(size_t(vocab));
    EXPECT_TRUE((*model)->Forward(ids, *st, LogitsFor::kLast, logits->data(), chunk).ok());
    SnapshotContent c;
    c.tokens = ids;
    c.logits = *logits;
    c.reason = SaveReason::kCold;
    EXPECT_TRUE((*cache)->Save(*st, c).ok());
    EXPECT_TRUE((*cache)->Flush().ok());
    return std::move(*st);
  };
  std::vector<float> la, lb;
  KvState sa = run(a, 64, &la);
  EXPECT_EQ((*cache)->stats().chunks_written, 2u);
  KvState sb = run(b, 37, &lb);
  // b's save reused the system prompt's two chunks that a wrote.
  EXPECT_EQ((*cache)->stats().chunks_written, 2u);
  EXPECT_EQ((*cache)->stats().chunks_reused, 2u);
  EXPECT_EQ((*cache)->stats().chunks, 2u);

  // Restored b (rows [0, 256) from a's chunks) is b's live state bit for bit, and decodes
  // as b's uninterrupted run does.
  auto restored = (*model)->NewState(int(b.size()) + 8);
  ASSERT_TRUE(restored.ok());
  auto hit = (*cache)->Load(DiskLookup{.tokens = b,
                                       .text = {},
                                       .min_tokens = int64_t(b.size()),
                                       .max_tokens = int64_t(b.size())},
                            *restored);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  for (int l = 0; l < int(sb.shape().layers.size()); ++l) {
    std::vector<float> want(sb.LayerFloats(l)), got(restored->LayerFloats(l));
    ASSERT_TRUE(sb.ReadLayer(l, want.data()).ok());
    ASSERT_TRUE(restored->ReadLayer(l, got.data()).ok());
    ASSERT_EQ(want.size(), got.size());
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0) << "layer " << l;
  }
  EXPECT_EQ(hit->logits, lb);
  const auto next = RandomIds(4, 9);
  std::vector<float> want(next.size() * size_t(vocab)), got(want.size());
  ASSERT_TRUE((*model)->Forward(next, sb, LogitsFor::kAll, want.data()).ok());
  ASSERT_TRUE((*model)->Forward(next, *restored, LogitsFor::kAll, got.data()).ok());
  EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0);
}

// The bound: a conversation grown to 64k tokens through eight continued saves (every
// 8,192 tokens, 2,048-token chunks) writes at most 1.3× its final state and keeps at most
// 1.2× on disk (unchunked files write and keep the sum of all eight, 4.5×). The states have the
// tiny model's shape with rows made up per (layer, row) — a real 64k-token prefill is too
// slow for CI — while restores are checked bit for bit. Each manifest carries the window
// ring and the frontiers (~0.8 MB here, ~1,200 tokens of rows; DS4 Flash: ~24 MB, ~1,750
// tokens), so the bound needs intervals of a few thousand tokens.
TEST(DiskChunksTiny, GrowingConversationWritesAndKeepsAboutItsFinalState) {
  CpuBackend be(nullptr);
  auto model = Model::Load(kModel, be);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  constexpr int64_t kFinal = 65536, kStep = 8192;
  auto state = (*model)->NewState(int(kFinal));
  ASSERT_TRUE(state.ok());
  const KvShape shape = state->shape();
  const int vocab = (*model)->config().n_vocab;
  const std::string dir = TempDir("tinygrow");
  DiskCacheOptions o;
  o.dir = dir;
  o.identity = Identity();
  o.budget_bytes = uint64_t(1) << 30;
  auto cache = DiskCache::Open(o);
  ASSERT_TRUE(cache.ok());
  const auto ids = RandomIds(size_t(kFinal), 5);
  const std::vector<float> logits(size_t(vocab), 0.5f);
  for (int64_t n = kStep; n <= kFinal; n += kStep) {
    testing::WriteGrown(*state, testing::GrownLayers(shape, n, 1, uint32_t(n)), n);
    SnapshotContent c;
    c.tokens = std::span(ids).first(size_t(n));
    c.logits = logits;
    c.reason = SaveReason::kContinued;
    ASSERT_TRUE((*cache)->Save(*state, c).ok());
    ASSERT_TRUE((*cache)->Flush().ok());
  }
  const DiskCacheStats s = (*cache)->stats();
  const uint64_t final_state = SnapshotFileBytes(shape, kFinal, vocab, 0, {});
  const double written = double(s.bytes_written) / double(final_state);
  const double kept = double(DirBytes(dir)) / double(final_state);
  std::printf(
      "grown to %lld tokens in %lld continued saves: final state %.1f MiB, written %.3fx, "
      "kept %.3fx, logical %.3fx\n",
      (long long)kFinal, (long long)(kFinal / kStep), final_state / 1048576.0, written, kept,
      double(s.logical_bytes) / double(final_state));
  EXPECT_LE(written, 1.3);
  EXPECT_LE(kept, 1.2);
  EXPECT_EQ(s.chunks_written, uint64_t(kFinal / 2048));
  EXPECT_EQ(s.bytes_written_by_reason[uint8_t(SaveReason::kContinued)], s.bytes_written);

  // Every one of the eight restores is the state that was saved.
  for (int64_t n = kStep; n <= kFinal; n += kStep) {
    auto hit = (*cache)->Load(
        DiskLookup{.tokens = ids, .text = {}, .min_tokens = n, .max_tokens = n}, *state);
    ASSERT_TRUE(hit.ok()) << n << ": " << hit.status().ToString();
    testing::ExpectLayers(*state, testing::GrownLayers(shape, n, 1, uint32_t(n)));
  }
}

}  // namespace
}  // namespace flashkv

namespace flashkv {
namespace {

// A simulated agent day for docs/PERFORMANCE.md (runs only with FLASHKV_AGENT_DAY=1): eight
// agent conversations on the ds4-tiny shape share an 8,192-token system prompt and grow to
// 24k … 64k tokens; each gets the saves CachePolicy makes by default — a cold anchor at the
// prompt, a continued save every 10,240 tokens, an evict save at its end — once through
// unchunked files and once through chunks (2,048 tokens), in the same run. Then
// every conversation's last entry is restored from disk with its pages dropped from the
// page cache, and the rate printed (compare `dd iflag=direct` on the same files).
TEST(DiskChunksTiny, AgentDaySimulation) {
  if (std::getenv("FLASHKV_AGENT_DAY") == nullptr) GTEST_SKIP() << "set FLASHKV_AGENT_DAY=1";
  CpuBackend be(nullptr);
  auto model = Model::Load(kModel, be);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  constexpr int64_t kSystem = 8192, kStep = 10240;
  const std::vector<int64_t> lengths = {24000, 30000, 36000, 42000, 48000, 54000, 60000, 64000};
  auto state = (*model)->NewState(64000);
  ASSERT_TRUE(state.ok());
  const KvShape shape = state->shape();
  const int vocab = (*model)->config().n_vocab;
  const std::vector<float> logits(size_t(vocab), 0.25f);
  const auto system = RandomIds(size_t(kSystem), 77);
  const char* root = std::getenv("FLASHKV_AGENT_DAY_DIR");
  struct Run {
    uint32_t chunk;
    std::string dir;
    std::unique_ptr<DiskCache> cache;
  };
  std::vector<Run> runs;
  for (uint32_t chunk : {0u, 2048u}) {
    Run r;
    r.chunk = chunk;
    r.dir = root ? JoinPath(root, chunk ? "v2" : "v1") : TempDir(chunk ? "day-v2" : "day-v1");
    ASSERT_TRUE(CreateDirectories(r.dir).ok());
    DiskCacheOptions o;
    o.dir = r.dir;
    o.identity = Identity();
    o.chunk_tokens = chunk;
    o.budget_bytes = uint64_t(64) << 30;
    auto c = DiskCache::Open(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    r.cache = std::move(*c);
    runs.push_back(std::move(r));
  }
  uint64_t saves = 0, final_states = 0;
  std::vector<std::vector<int32_t>> convs;
  for (size_t a = 0; a < lengths.size(); ++a) {
    auto ids = system;
    const auto own = RandomIds(size_t(lengths[a] - kSystem), uint32_t(100 + a));
    ids.insert(ids.end(), own.begin(), own.end());
    std::vector<std::pair<int64_t, SaveReason>> points = {{kSystem, SaveReason::kCold}};
    for (int64_t n = kStep; n < lengths[a]; n += kStep)
      points.push_back({n, SaveReason::kContinued});
    points.push_back({lengths[a], SaveReason::kEvict});
    for (const auto& [n, reason] : points) {
      testing::WriteGrown(*state,
                          testing::GrownLayers(shape, n, uint32_t(a + 1), uint32_t(n), kSystem), n);
      SnapshotContent c;
      c.tokens = std::span(ids).first(size_t(n));
      c.logits = logits;
      c.reason = reason;
      for (Run& r : runs) {
        ASSERT_TRUE(r.cache->Save(*state, c).ok());
        ASSERT_TRUE(r.cache->Flush().ok());
      }
      ++saves;
    }
    final_states += SnapshotFileBytes(shape, lengths[a], vocab, 0, {});
    convs.push_back(std::move(ids));
  }
  std::printf("agent day: %zu conversations, %llu saves, final states %.1f MiB\n", lengths.size(),
              (unsigned long long)saves, final_states / 1048576.0);
  std::printf(
      "| format | written MiB | on disk MiB | written / final states | on disk / final |\n"
      "|---|---|---|---|---|\n");
  for (Run& r : runs) {
    const DiskCacheStats s = r.cache->stats();
    std::printf("| %s | %.1f | %.1f | %.2fx | %.2fx |\n",
                r.chunk ? "v2 (2,048-token chunks)" : "v1", s.bytes_written / 1048576.0,
                DirBytes(r.dir) / 1048576.0, double(s.bytes_written) / double(final_states),
                double(DirBytes(r.dir)) / double(final_states));
  }
  // Restores of every conversation's longest entry, each with the directory dropped from
  // the page cache first, both formats in turn, twice (v1 first, then v2 first).
  auto drop = [](const std::string& dir) {
    for (const std::string& d : {dir, ChunkDirOf(dir)}) {
      auto list = ListDirectory(d);
      if (!list.ok()) continue;
      for (const DirEntry& e : *list) {
        if (auto f = File::OpenRead(JoinPath(d, e.name)); e.is_regular && f.ok()) f->DropCache();
      }
    }
  };
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < 2; ++i) {
      Run& r = runs[size_t(pass == 0 ? i : 1 - i)];
      double bytes = 0, secs = 0;
      for (size_t a = 0; a < convs.size(); ++a) {
        drop(r.dir);  // also the shared prompt's chunks the previous restore read
        auto hit = r.cache->Load(
            DiskLookup{
                .tokens = convs[a], .text = {}, .min_tokens = lengths[a], .max_tokens = lengths[a]},
            *state);
        ASSERT_TRUE(hit.ok()) << hit.status().ToString();
        bytes += double(hit->bytes);
        secs += hit->load_ms / 1000.0;
      }
      std::printf("restore pass %d %s: %.1f MiB in %.3f s = %.0f MiB/s\n", pass,
                  r.chunk ? "v2" : "v1", bytes / 1048576.0, secs, bytes / 1048576.0 / secs);
    }
  }
}

}  // namespace
}  // namespace flashkv
