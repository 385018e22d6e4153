// Version-2 snapshots at the codec level: a captured state split into content-addressed
// chunk files plus a manifest restores bit-exactly; chunks are shared by name; damage to
// any chunk or to the manifest is refused (kCorrupt) and leaves the state cleared.
#include "snapshot/snapshot_chunks.h"

#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

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
constexpr uint32_t kChunk = 16;  // ratios 4 and 8 of SmallShape divide it

struct Saved {
  std::string path;
  std::vector<SnapshotChunkRef> refs;
  int chunks_written = 0;
};

// Saves `st` as a manifest + chunks under `dir` (chunks/ made on demand); chunks already
// in `store` (name → ref) are referenced, not written.
// `edit` may rewrite the chunk files (and their refs) before the manifest is made.
Saved SaveChunked(const std::string& dir, const KvState& st, const std::vector<int32_t>& tokens,
                  std::map<std::string, SnapshotChunkRef>* store, std::string_view text = "t",
                  std::vector<int32_t> tail = {}, std::string replay = "",
                  const std::function<void(std::vector<SnapshotChunkRef>*)>& edit = {}) {
  SnapshotContent c;
  c.tokens = tokens;
  const std::vector<float> logits = Logits(kVocab, float(tokens.size()));
  c.logits = logits;
  c.text = text;
  c.tail = tail;
  c.replay = replay;
  c.reason = SaveReason::kContinued;
  c.extensions = {SnapshotExtension{SnapshotTag("TST1"), "blob"}};
  auto full = CaptureSnapshot(st, TestIdentity(), c, 1700000000000);
  EXPECT_TRUE(full.ok()) << full.status().ToString();
  Saved out;
  ChunkSink sink;
  sink.chunk_dir = ChunkDirOf(dir);
  EXPECT_TRUE(CreateDirectories(sink.chunk_dir).ok());
  sink.tmp_tag = "test";
  sink.existing = [&](const Sha1Digest& name) -> std::optional<SnapshotChunkRef> {
    auto it = store->find(Sha1Hex(name));
    if (it == store->end()) return std::nullopt;
    return it->second;
  };
  sink.written = [&](const SnapshotChunkRef& ref) {
    (*store)[Sha1Hex(ref.name)] = ref;
    ++out.chunks_written;
  };
  auto refs = WriteImageChunks(*full, kChunk, sink);
  EXPECT_TRUE(refs.ok()) << refs.status().ToString();
  if (edit) edit(&*refs);
  out.refs = *refs;
  auto manifest = MakeManifestImage(*full, kChunk, *refs);
  EXPECT_TRUE(manifest.ok()) << manifest.status().ToString();
  out.path = JoinPath(dir, Sha1Hex(full->key()) + ".kv");
  auto f = File::Create(out.path);
  EXPECT_TRUE(f.ok());
  EXPECT_TRUE(WriteSnapshotImage(*manifest, *f).ok());
  EXPECT_TRUE(f->Close().ok());
  return out;
}

std::string ChunkPath(const std::string& dir, const SnapshotChunkRef& ref) {
  return JoinPath(ChunkDirOf(dir), ChunkFileName(ref.name));
}

void ExpectSameState(const KvState& a, const KvState& b) {
  ASSERT_EQ(a.n_tokens(), b.n_tokens());
  for (int l = 0; l < int(a.shape().layers.size()); ++l) {
    const auto x = LayerOf(a, l), y = LayerOf(b, l);
    ASSERT_EQ(x.size(), y.size());
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * 4), 0) << "layer " << l;
  }
}

// Below one chunk, at chunk edges and between them: every float comes back, the kv
// sections and the writer's extensions too, and the manifest is smaller than v1 by
// exactly the chunked rows.
TEST(SnapshotChunksTest, RoundTripIsExactAtManyPositions) {
  CpuBackend be(nullptr);
  for (int64_t n : {5, 15, 16, 17, 31, 32, 33, 47, 48, 63}) {
    const std::string dir = MakeTempDir("chunks");
    KvState st = RandomState(be, SmallShape(), n, uint32_t(n));
    const auto tokens = Tokens(n);
    std::map<std::string, SnapshotChunkRef> store;
    Saved s = SaveChunked(dir, st, tokens, &store, "text", {7, 8}, "replay");
    EXPECT_EQ(s.refs.size(), size_t(n / kChunk));
    EXPECT_EQ(s.chunks_written, int(n / kChunk));

    KvState dst = RandomState(be, SmallShape(), 40, 999);
    auto loaded = LoadSnapshot(s.path, TestIdentity(), dst);
    ASSERT_TRUE(loaded.ok()) << n << ": " << loaded.status().ToString();
    ExpectSameState(st, dst);
    EXPECT_EQ(loaded->tokens, tokens);
    EXPECT_EQ(loaded->logits, Logits(kVocab, float(n)));
    EXPECT_EQ(loaded->text, "text");
    EXPECT_EQ(loaded->tail, (std::vector<int32_t>{7, 8}));
    EXPECT_EQ(loaded->replay, "replay");
    ASSERT_EQ(loaded->extensions.size(), 1u);  // the chunk list is not the caller's
    EXPECT_EQ(loaded->extensions[0].tag, SnapshotTag("TST1"));
    EXPECT_EQ(loaded->header.version, kSnapshotVersion);
    EXPECT_EQ(loaded->header.n_chunks, uint32_t(n / kChunk));

    auto v = VerifySnapshotFile(s.path);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    auto f = File::OpenRead(s.path);
    ASSERT_TRUE(f.ok());
    auto scan = ScanSnapshotFile(*f);
    ASSERT_TRUE(scan.ok()) << scan.status().ToString();
    EXPECT_EQ(scan->chunks, s.refs);
  }
}

// The chunk name is a function of the identity, the chunk size and the ids up to the
// chunk's end: a longer save of the same sequence and another sequence with the same
// first 16 ids reference chunk 0 without writing it again.
TEST(SnapshotChunksTest, ChunksAreSharedByPrefix) {
  CpuBackend be(nullptr);
  const std::string dir = MakeTempDir("chunks-share");
  std::map<std::string, SnapshotChunkRef> store;
  KvState a = RandomState(be, SmallShape(), 40, 1);
  auto ta = Tokens(40);
  Saved sa = SaveChunked(dir, a, ta, &store);
  EXPECT_EQ(sa.chunks_written, 2);

  // Same first 20 ids, other ids after: chunk 0 shared, chunk 1 its own. The state is a
  // copy of a's (equal rows for equal ids, as the model makes them).
  auto tb = ta;
  for (size_t i = 20; i < tb.size(); ++i) tb[i] = 999 - int32_t(i);
  Saved sb = SaveChunked(dir, a, tb, &store);
  EXPECT_EQ(sb.chunks_written, 1);
  EXPECT_EQ(sb.refs[0], sa.refs[0]);
  EXPECT_NE(sb.refs[1].name, sa.refs[1].name);

  // The same sequence grown: both old chunks shared, one new.
  KvState c = RandomState(be, SmallShape(), 40, 1);
  ASSERT_TRUE(c.SetTokenCount(50).ok());
  for (int l = 0; l < 3; ++l) {
    std::vector<float> v(c.LayerFloats(l), 0.5f);
    ASSERT_TRUE(c.WriteLayer(l, v.data()).ok());
  }
  auto tc = Tokens(50);
  Saved sc = SaveChunked(dir, c, tc, &store);
  EXPECT_EQ(sc.chunks_written, 1);
  EXPECT_EQ(sc.refs[0], sa.refs[0]);
  EXPECT_EQ(sc.refs[1], sa.refs[1]);

  // Another identity or chunk size names other chunks.
  SnapshotIdentity other = TestIdentity("model-b");
  EXPECT_NE(ChunkName(other, kChunk, 0, ta), ChunkName(TestIdentity(), kChunk, 0, ta));
  EXPECT_NE(ChunkName(TestIdentity(), 8, 1, ta), ChunkName(TestIdentity(), kChunk, 0, ta));

  // Every manifest restores what it references (b: a's rows; its own chunk 1).
  KvState dst = RandomState(be, SmallShape(), 3, 5);
  ASSERT_TRUE(LoadSnapshot(sb.path, TestIdentity(), dst).ok());
  ExpectSameState(a, dst);
  ASSERT_TRUE(LoadSnapshot(sa.path, TestIdentity(), dst).ok());
  ExpectSameState(a, dst);
}

TEST(SnapshotChunksTest, ChunkSizeMustHoldWholeWindows) {
  EXPECT_EQ(CheckChunkTokens(SmallShape(), 12).code(), StatusCode::kInvalidArgument);  // 8 ∤ 12
  EXPECT_EQ(CheckChunkTokens(SmallShape(), 0).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckChunkTokens(SmallShape(), 8).ok());
  // Ratio 4 overlap+indexer: 4 rows of 4 + 4 rows of 2; ratio 8: 2 rows of 4.
  EXPECT_EQ(ChunkPayloadBytes(SmallShape(), 16), uint64_t((16 + 8 + 8) * 4));
}

// Chunk files of version 2 (a 64-byte header, one payload CRC), as earlier builds wrote
// them, still restore bit-exactly (read whole, then uploaded); a flipped payload bit in one
// is still refused and leaves the state cleared.
TEST(SnapshotChunksTest, VersionTwoChunksStillLoad) {
  CpuBackend be(nullptr);
  const std::string dir = MakeTempDir("chunks-v2");
  KvState a = RandomState(be, SmallShape(), 40, 7);
  std::map<std::string, SnapshotChunkRef> store;
  auto downgrade = [&](std::vector<SnapshotChunkRef>* refs) {
    for (SnapshotChunkRef& ref : *refs) {
      const std::string path = ChunkPath(dir, ref);
      auto bytes = ReadWholeFile(path);
      ASSERT_TRUE(bytes.ok());
      auto h = VerifyChunkBytes(*bytes, ChunkFileName(ref.name));
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      EXPECT_EQ(h->version, kChunkVersion);
      ChunkHeader old = *h;
      old.version = kChunkVersionV2;
      old.layers.clear();
      std::string file(kChunkHeaderBytes, '\0');
      EncodeChunkHeader(old, reinterpret_cast<uint8_t*>(file.data()));
      file += bytes->substr(h->header_bytes);
      auto f = File::Create(path);
      ASSERT_TRUE(f.ok());
      ASSERT_TRUE(f->Write(file.data(), file.size()).ok());
      ASSERT_TRUE(f->Close().ok());
      auto v = VerifyChunkFile(path);
      ASSERT_TRUE(v.ok()) << v.status().ToString();
      EXPECT_EQ(v->version, kChunkVersionV2);
      ref.file_bytes = file.size();
    }
  };
  Saved s = SaveChunked(dir, a, Tokens(40), &store, "t", {}, "", downgrade);
  ASSERT_EQ(s.refs.size(), 2u);
  KvState dst = RandomState(be, SmallShape(), 3, 5);
  auto r = LoadSnapshot(s.path, TestIdentity(), dst);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectSameState(a, dst);
  ASSERT_TRUE(VerifySnapshotFile(s.path).ok());
  const std::string path = ChunkPath(dir, s.refs[1]);
  auto good = ReadWholeFile(path);
  ASSERT_TRUE(good.ok());
  std::string bad = *good;
  bad[kChunkHeaderBytes + 5] ^= 0x04;
  auto f = File::Create(path);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->Write(bad.data(), bad.size()).ok());
  ASSERT_TRUE(f->Close().ok());
  KvState dirty = RandomState(be, SmallShape(), 30, 3);
  auto r2 = LoadSnapshot(s.path, TestIdentity(), dirty);
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.status().code(), StatusCode::kCorrupt) << r2.status().ToString();
  EXPECT_EQ(dirty.n_tokens(), 0);
}

// A layer's rows of a chunk are uploaded as soon as their own CRC holds: damage to the last
// layer of the last chunk is still refused after the earlier rows reached the state, and
// the state is cleared.
TEST(SnapshotChunksTest, DamageInTheLastLayerBlockClearsTheState) {
  CpuBackend be(nullptr);
  const std::string dir = MakeTempDir("chunks-late");
  KvState a = RandomState(be, SmallShape(), 40, 9);
  std::map<std::string, SnapshotChunkRef> store;
  Saved s = SaveChunked(dir, a, Tokens(40), &store);
  ASSERT_EQ(s.refs.size(), 2u);
  const std::string path = ChunkPath(dir, s.refs[1]);
  auto good = ReadWholeFile(path);
  ASSERT_TRUE(good.ok());
  std::string bad = *good;
  bad[bad.size() - 1] ^= 0x80;
  auto f = File::Create(path);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->Write(bad.data(), bad.size()).ok());
  ASSERT_TRUE(f->Close().ok());
  KvState dirty = RandomState(be, SmallShape(), 30, 3);
  auto r = LoadSnapshot(s.path, TestIdentity(), dirty);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(r.status().message().find("layer"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(dirty.n_tokens(), 0);
}

// Whether files in `dir` can be read through O_DIRECT (tmpfs before Linux 6.6 cannot).
bool DirectReadsWork(const std::string& dir) {
  const std::string probe = JoinPath(dir, "direct-probe");
  auto w = File::Create(probe);
  EXPECT_TRUE(w.ok() && w->Write("x", 1).ok() && w->Close().ok());
  auto f = File::OpenRead(probe);
  const bool ok = f.ok() && f->SetDirectIo(true).ok();
  EXPECT_TRUE(RemoveFile(probe).ok());
  return ok;
}

// Many chunks through 1–8 readers (each streaming its own chunk files), through the page
// cache and through O_DIRECT in reads of one block and of 1 MiB, in one buffered read per
// layer and in reads of 16 MiB: the same state every time, every byte counted once, and
// O_DIRECT used exactly where asked for and the filesystem has it — in the test's
// temporary directory and in /dev/shm (tmpfs).
TEST(SnapshotChunksTest, LoadIsIndependentOfReadersAndDirectReads) {
  CpuBackend be(nullptr);
  std::vector<std::string> dirs = {MakeTempDir("chunks-readers")};
  if (::access("/dev/shm", W_OK) == 0) {
    std::string tmpl = "/dev/shm/flashkv-chunks-readers.XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) dirs.push_back(tmpl);
  }
  for (const std::string& dir : dirs) {
    KvState st = RandomState(be, SmallShape(256), 200, 77);
    std::map<std::string, SnapshotChunkRef> store;
    Saved s = SaveChunked(dir, st, Tokens(200), &store);
    ASSERT_EQ(s.refs.size(), 12u);
    uint64_t chunk_file_bytes = 0;
    for (const SnapshotChunkRef& r : s.refs) chunk_file_bytes += r.file_bytes;
    const bool can_direct = DirectReadsWork(dir);
    std::optional<uint64_t> bytes_read;
    for (int readers : {1, 2, 3, 8}) {
      for (bool direct : {false, true}) {
        for (auto [chunk, step] :
             {std::pair{size_t(4096), size_t(4096)}, {size_t(16) << 20, size_t(1) << 20}}) {
          SnapshotLoadOptions o;
          o.readers = readers;
          o.direct = direct;
          o.chunk_bytes = chunk;
          o.direct_read_bytes = step;
          KvState dst = RandomState(be, SmallShape(256), 30, uint32_t(readers));
          auto r = LoadSnapshot(s.path, TestIdentity(), dst, o);
          const std::string what = fmt::format("{} readers={} direct={} chunk={} step={}", dir,
                                               readers, direct, chunk, step);
          ASSERT_TRUE(r.ok()) << what << ": " << r.status().ToString();
          ExpectSameState(st, dst);
          EXPECT_EQ(r->tokens, Tokens(200)) << what;
          EXPECT_EQ(r->direct_bytes, direct && can_direct ? chunk_file_bytes : 0u) << what;
          if (!bytes_read) bytes_read = r->bytes_read;
          EXPECT_EQ(r->bytes_read, *bytes_read) << what;
        }
      }
    }
    if (dir.starts_with("/dev/shm/")) (void)std::system(("rm -rf '" + dir + "'").c_str());
  }
}

class ChunkDamageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("chunk-damage");
    src_.emplace(RandomState(be_, SmallShape(), 40, 11));
    saved_ = SaveChunked(dir_, *src_, Tokens(40), &store_);
    ASSERT_EQ(saved_.refs.size(), 2u);
  }

  // Loads into a dirty state — with the default options (several readers, O_DIRECT where
  // the filesystem has it) and with one reader through the page cache; expects kCorrupt
  // naming `needle` and a cleared state.
  void ExpectCorrupt(const std::string& needle) {
    SnapshotLoadOptions buffered;
    buffered.readers = 1;
    buffered.direct = false;
    for (const SnapshotLoadOptions& o : {SnapshotLoadOptions{}, buffered}) {
      KvState dst = RandomState(be_, SmallShape(), 30, 3);
      auto r = LoadSnapshot(saved_.path, TestIdentity(), dst, o);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << r.status().ToString();
      EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().ToString();
      EXPECT_EQ(dst.n_tokens(), 0);
    }
    EXPECT_FALSE(VerifySnapshotFile(saved_.path).ok());
  }

  void Rewrite(const std::string& path, const std::string& bytes) {
    auto f = File::Create(path);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->Write(bytes.data(), bytes.size()).ok());
    ASSERT_TRUE(f->Close().ok());
  }

  CpuBackend be_{nullptr};
  std::string dir_;
  std::optional<KvState> src_;
  std::map<std::string, SnapshotChunkRef> store_;
  Saved saved_;
};

TEST_F(ChunkDamageTest, EveryPayloadBitFlipIsCaught) {
  const std::string path = ChunkPath(dir_, saved_.refs[1]);
  auto good = ReadWholeFile(path);
  ASSERT_TRUE(good.ok());
  const size_t head = ChunkHeaderBytesFor(uint32_t(SmallShape().layers.size()));
  for (size_t at = head; at < good->size(); at += 37) {
    std::string bad = *good;
    bad[at] ^= 0x10;
    Rewrite(path, bad);
    ExpectCorrupt("checksum");
  }
  Rewrite(path, *good);
  KvState dst = RandomState(be_, SmallShape(), 3, 5);
  ASSERT_TRUE(LoadSnapshot(saved_.path, TestIdentity(), dst).ok());
  ExpectSameState(*src_, dst);
}

TEST_F(ChunkDamageTest, HeaderFlipTruncationAndMissingChunkAreCaught) {
  const std::string path = ChunkPath(dir_, saved_.refs[0]);
  auto good = ReadWholeFile(path);
  ASSERT_TRUE(good.ok());
  // The fixed part, the layer table and its padding.
  for (size_t at = 0; at < ChunkHeaderBytesFor(uint32_t(SmallShape().layers.size())); ++at) {
    std::string bad = *good;
    bad[at] ^= 0x01;
    Rewrite(path, bad);
    ExpectCorrupt("chunk");
  }
  Rewrite(path, good->substr(0, good->size() - 4));
  ExpectCorrupt("truncated");
  Rewrite(path, good->substr(0, 10));
  ExpectCorrupt("truncated");
  ASSERT_TRUE(RemoveFile(path).ok());
  ExpectCorrupt("missing");
  // Another chunk under this one's name (a rename outside the cache).
  auto other = ReadWholeFile(ChunkPath(dir_, saved_.refs[1]));
  ASSERT_TRUE(other.ok());
  Rewrite(path, *other);
  ExpectCorrupt("names another chunk");
}

// CRCs detect damage, not forgery: a manifest whose every CRC is valid but whose chunk
// list names another sequence's (valid) chunk is refused, because the names are a hash
// chain over the manifest's own ids (issue 34: it was loaded and answered wrong tokens).
TEST_F(ChunkDamageTest, ManifestNamingAnotherSequencesChunkIsRefused) {
  KvState other = RandomState(be_, SmallShape(), 40, 12);
  Saved b = SaveChunked(dir_, other, Tokens(40, 1), &store_);
  ASSERT_EQ(b.refs.size(), 2u);
  ASSERT_NE(b.refs[1].name, saved_.refs[1].name);
  Saved forged = SaveChunked(dir_, *src_, Tokens(40), &store_, "t", {}, "",
                             [&](std::vector<SnapshotChunkRef>* refs) { (*refs)[1] = b.refs[1]; });
  ASSERT_EQ(forged.path, saved_.path);
  ExpectCorrupt("token ids name");
}

TEST_F(ChunkDamageTest, ManifestDamageIsCaught) {
  auto good = ReadWholeFile(saved_.path);
  ASSERT_TRUE(good.ok());
  auto h = VerifySnapshotFile(saved_.path);
  ASSERT_TRUE(h.ok());
  const SnapshotSection* list = nullptr;
  for (const SnapshotSection& s : h->sections) {
    if (s.kind == SnapshotSectionKind::kExtension && s.tag == kSnapshotChunksTag) list = &s;
  }
  ASSERT_NE(list, nullptr);
  for (uint64_t at = list->offset; at < list->offset + list->bytes; ++at) {
    std::string bad = *good;
    bad[at] ^= 0x04;
    Rewrite(saved_.path, bad);
    ExpectCorrupt("checksum");
  }
  // Every byte the header, the table or a section covers (not the stats block, not the
  // zero padding between sections, which no CRC covers in either version).
  auto covered = [&](uint64_t at) {
    if (at < kSnapshotStatsOffset) return true;
    if (at < kSnapshotHeaderBytes) return false;
    if (at < kSnapshotHeaderBytes + h->sections.size() * kSnapshotSectionRowBytes) return true;
    for (const SnapshotSection& s : h->sections) {
      if (at >= s.offset && at < s.offset + s.bytes) return true;
    }
    return false;
  };
  int flips = 0;
  for (size_t at = 0; at < good->size(); at += 7) {
    if (!covered(at)) continue;
    ++flips;
    std::string bad = *good;
    bad[at] ^= 0x40;
    Rewrite(saved_.path, bad);
    KvState dst = RandomState(be_, SmallShape(), 30, 3);
    auto r = LoadSnapshot(saved_.path, TestIdentity(), dst);
    ASSERT_FALSE(r.ok()) << "flip at " << at;
    EXPECT_EQ(dst.n_tokens(), 0);
  }
  EXPECT_GT(flips, 100);
  Rewrite(saved_.path, good->substr(0, good->size() - 1));
  ExpectCorrupt("truncated");
}

}  // namespace
}  // namespace flashkv
