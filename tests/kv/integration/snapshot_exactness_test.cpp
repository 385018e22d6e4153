// Exactness of disk snapshots on a real DS4-layout model (shared fixture ds4-tiny: window
// 128, ratio-4 + indexer and ratio-128 layers). The parent prefills a prompt, snapshots
// the state at many positions — inside and at compressor block boundaries, before and
// after the sliding window fills — and writes them to a cache directory; a fresh process
// (this binary re-executed) restores each one and decodes. Its logits must equal the
// uninterrupted run's bit for bit.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

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
constexpr int kPromptLen = 300;
constexpr int kDecode = 6;  // tokens decoded after each restore
const std::vector<int> kPositions = {1,   3,   4,   5,   64,  127, 128, 129,
                                     131, 132, 200, 255, 256, 257, 260, 290};

std::vector<int32_t> Prompt() {
  std::mt19937 rng(77);
  std::vector<int32_t> t(kPromptLen + kDecode);
  for (auto& x : t) x = int32_t(rng() % 1019);
  return t;
}

SnapshotIdentity Identity() {
  auto file = GgufFile::Open(kModel);
  EXPECT_TRUE(file.ok());
  auto fp = ModelFingerprint(*file);
  EXPECT_TRUE(fp.ok());
  return SnapshotIdentity{*fp, "official/q8"};
}

// chunk_tokens 0: manifests without chunks (the whole state in one file); 128 (the ratio-128 layers' window): version-2
// manifests whose chunks [0, 128) and [128, 256) are written by the first save past them and
// referenced by every later one.
DiskCacheOptions CacheOptions(const std::string& dir, uint32_t chunk_tokens) {
  DiskCacheOptions o;
  o.dir = dir;
  o.identity = Identity();
  o.chunk_tokens = chunk_tokens;
  return o;
}

// The child: restores every snapshot through DiskCache and decodes, writing per position
// [1 + kDecode, n_vocab] logits (restored, then each decoded token's) to out_dir/<p>.f32.
TEST(SnapshotExactnessChild, RestoreAndDecode) {
  const char* dir = std::getenv("FLASHKV_KV_EXACT_DIR");
  if (dir == nullptr) GTEST_SKIP() << "runs only as the child of SnapshotExactness";
  ThreadPool pool(2);
  CpuBackend be(&pool);
  auto model = Model::Load(kModel, be);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const int vocab = (*model)->config().n_vocab;
  const char* chunk = std::getenv("FLASHKV_KV_EXACT_CHUNK");
  auto cache = DiskCache::Open(CacheOptions(dir, chunk ? uint32_t(std::atoi(chunk)) : 0));
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  const auto prompt = Prompt();
  for (int p : kPositions) {
    auto state = (*model)->NewState(kPromptLen + kDecode);
    ASSERT_TRUE(state.ok());
    // Ask with the whole prompt: the longest prefix is p exactly when max_tokens == p.
    auto hit = (*cache)->Load(
        DiskLookup{.tokens = prompt, .text = {}, .min_tokens = p, .max_tokens = p}, *state);
    ASSERT_TRUE(hit.ok()) << p << ": " << hit.status().ToString();
    ASSERT_EQ(state->n_tokens(), p);
    std::vector<float> out = hit->logits;
    std::vector<float> rows(size_t(kDecode) * vocab);
    ASSERT_TRUE(
        (*model)
            ->Forward(std::span(prompt).subspan(p, kDecode), *state, LogitsFor::kAll, rows.data())
            .ok());
    out.insert(out.end(), rows.begin(), rows.end());
    auto f = File::Create(JoinPath(dir, "out-" + std::to_string(p) + ".f32"));
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->Write(out.data(), out.size() * 4).ok());
  }
}

class SnapshotExactness : public ::testing::TestWithParam<uint32_t> {};

TEST_P(SnapshotExactness, RestoredStatesDecodeBitIdentically) {
  const uint32_t chunk_tokens = GetParam();
  char tmpl[] = "/tmp/kvexact.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ThreadPool pool(2);
  CpuBackend be(&pool);
  auto model = Model::Load(kModel, be);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const int vocab = (*model)->config().n_vocab;
  const auto prompt = Prompt();

  // Reference: one uninterrupted pass, logits for every position.
  std::vector<float> ref(prompt.size() * size_t(vocab));
  {
    auto st = (*model)->NewState(int(prompt.size()));
    ASSERT_TRUE(st.ok());
    ASSERT_TRUE((*model)->Forward(prompt, *st, LogitsFor::kAll, ref.data(), 64).ok());
  }

  // Snapshots at every position, from one incremental prefill paused there.
  {
    auto cache = DiskCache::Open(CacheOptions(dir, chunk_tokens));
    ASSERT_TRUE(cache.ok());
    auto st = (*model)->NewState(kPromptLen);
    ASSERT_TRUE(st.ok());
    std::vector<float> logits(vocab);
    int done = 0;
    for (int p : kPositions) {
      ASSERT_TRUE((*model)
                      ->Forward(std::span(prompt).subspan(done, p - done), *st, LogitsFor::kLast,
                                logits.data(), 37)
                      .ok());
      done = p;
      SnapshotContent c;
      const std::vector<int32_t> ids(prompt.begin(), prompt.begin() + p);
      c.tokens = ids;
      c.logits = logits;
      c.reason = SaveReason::kManual;
      ASSERT_TRUE((*cache)->Save(*st, c).ok());
    }
    ASSERT_TRUE((*cache)->Flush().ok());
    // Two chunks, each written once and shared by every later save.
    EXPECT_EQ((*cache)->stats().chunks, chunk_tokens == 128 ? 2u : 0u);
  }

  // A fresh process restores and decodes.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("FLASHKV_KV_EXACT_DIR", dir.c_str(), 1);
    ::setenv("FLASHKV_KV_EXACT_CHUNK", std::to_string(chunk_tokens).c_str(), 1);
    ::execl("/proc/self/exe", "kv_exactness_test",
            "--gtest_filter=SnapshotExactnessChild.RestoreAndDecode", nullptr);
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child failed: " << status;

  for (int p : kPositions) {
    auto bytes = ReadWholeFile(JoinPath(dir, "out-" + std::to_string(p) + ".f32"));
    ASSERT_TRUE(bytes.ok()) << p;
    ASSERT_EQ(bytes->size(), size_t(1 + kDecode) * vocab * 4);
    const float* got = reinterpret_cast<const float*>(bytes->data());
    // Row 0: the restored next-token logits = reference row p-1; then rows p .. p+kDecode-1.
    for (int r = 0; r <= kDecode; ++r) {
      const float* want = ref.data() + size_t(p - 1 + r) * vocab;
      EXPECT_EQ(std::memcmp(got + size_t(r) * vocab, want, size_t(vocab) * 4), 0)
          << "position " << p << ", decoded row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, SnapshotExactness, ::testing::Values(0u, 128u),
                         [](const auto& info) {
                           return info.param == 0 ? std::string("Unchunked")
                                                  : "V2Chunk" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace flashkv
