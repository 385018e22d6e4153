// Snapshots written before a change still load, bit for bit. tests/data/fixtures/kv-legacy/
// holds one version-1 file and one version-2 manifest with its chunk, written by an
// earlier flashkv's writer on ds4-tiny (how: that folder's README); nothing in this
// repository regenerates them, so a change to the reader, the names or the codec that
// stops reading them fails here. Each is restored through DiskCache from a copy of the
// folder and must equal a fresh prefill of the same ids: every layer's rows and the
// logits, byte for byte, and the next tokens decode the same.
#include <cstring>
#include <filesystem>
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

const std::string kFixtures = std::string(FLASHKV_FIXTURES_DIR);
const std::string kModel = kFixtures + "/ds4-tiny/ds4-tiny.gguf";

// The 144 ids the fixtures hold: "The tide comes in and the tide goes out, and the moon
// pulls the sea a little each day." four times, tokenized by ds4-tiny (kv-legacy/README).
std::vector<int32_t> FixtureIds() {
  auto text = ReadWholeFile(kFixtures + "/kv-legacy/ids.txt");
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  std::vector<int32_t> ids;
  size_t at = 0;
  while (text.ok() && at < text->size()) {
    size_t end = text->find_first_of(" \n", at);
    if (end == std::string::npos) end = text->size();
    if (end > at) ids.push_back(int32_t(std::stol(text->substr(at, end - at))));
    at = end + 1;
  }
  return ids;
}

SnapshotIdentity Identity() {
  auto file = GgufFile::Open(kModel);
  EXPECT_TRUE(file.ok());
  auto fp = ModelFingerprint(*file);
  EXPECT_TRUE(fp.ok());
  return SnapshotIdentity{*fp, "official/q8"};
}

class LegacySnapshotTest : public ::testing::TestWithParam<const char*> {};

TEST_P(LegacySnapshotTest, LoadsAndRestoresBitExactly) {
  const std::string version = GetParam();
  // A copy: opening a cache directory locks it and may move files.
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) /
      ("flashkv-kv-legacy-" + version + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::copy(kFixtures + "/kv-legacy/" + version, dir,
                        std::filesystem::copy_options::recursive);
  const std::vector<int32_t> ids = FixtureIds();
  ASSERT_EQ(ids.size(), 144u);

  ThreadPool pool(2);
  CpuBackend be(&pool);
  auto model = Model::Load(kModel, be);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const int vocab = (*model)->config().n_vocab;
  DiskCacheOptions o;
  o.dir = dir.string();
  o.identity = Identity();
  o.chunk_tokens = version == "v1" ? 0 : 128;
  auto cache = DiskCache::Open(o);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  ASSERT_EQ((*cache)->stats().entries, 1u);
  EXPECT_EQ((*cache)->stats().quarantined, 0u);
  EXPECT_EQ((*cache)->stats().chunks, version == "v1" ? 0u : 1u);

  const int ctx = int(ids.size()) + 8;
  auto restored = (*model)->NewState(ctx);
  ASSERT_TRUE(restored.ok());
  auto hit = (*cache)->Load(
      DiskLookup{.tokens = ids, .text = {}, .min_tokens = 1, .max_tokens = int64_t(ids.size())},
      *restored);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  EXPECT_EQ(hit->tokens, ids);
  EXPECT_FALSE(hit->by_text);

  auto fresh = (*model)->NewState(ctx);
  ASSERT_TRUE(fresh.ok());
  std::vector<float> logits(size_t(vocab), 0.f);
  ASSERT_TRUE((*model)->Forward(ids, *fresh, LogitsFor::kLast, logits.data(), 256).ok());
  ASSERT_EQ(hit->logits.size(), logits.size());
  EXPECT_EQ(std::memcmp(hit->logits.data(), logits.data(), logits.size() * 4), 0);
  for (int l = 0; l < int(fresh->shape().layers.size()); ++l) {
    std::vector<float> want(fresh->LayerFloats(l)), got(restored->LayerFloats(l));
    ASSERT_TRUE(fresh->ReadLayer(l, want.data()).ok());
    ASSERT_TRUE(restored->ReadLayer(l, got.data()).ok());
    ASSERT_EQ(want.size(), got.size());
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0) << "layer " << l;
  }
  const std::vector<int32_t> next = {671, 259, 681, 465};
  std::vector<float> want(next.size() * size_t(vocab)), got(want.size());
  ASSERT_TRUE((*model)->Forward(next, *fresh, LogitsFor::kAll, want.data()).ok());
  ASSERT_TRUE((*model)->Forward(next, *restored, LogitsFor::kAll, got.data()).ok());
  EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0);
  cache->reset();
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Versions, LegacySnapshotTest, ::testing::Values("v1", "v2"));

}  // namespace
}  // namespace flashkv
