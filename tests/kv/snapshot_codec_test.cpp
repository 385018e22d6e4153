#include "snapshot/snapshot_codec.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kv_test_util.h"
#include "util/crc32c.h"
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

std::string WriteImage(const std::string& dir, SnapshotImage& img, const char* name = "s.kv") {
  SealSnapshot(img);
  const std::string path = JoinPath(dir, name);
  auto f = File::Create(path);
  EXPECT_TRUE(f.ok());
  EXPECT_TRUE(WriteSnapshotImage(img, *f).ok());
  EXPECT_TRUE(f->Close().ok());
  return path;
}

SnapshotImage Capture(const KvState& st, const std::vector<int32_t>& tokens,
                      const std::vector<float>& logits, std::string_view text,
                      std::vector<SnapshotExtension> ext = {}) {
  SnapshotContent c;
  c.tokens = tokens;
  c.logits = logits;
  c.text = text;
  c.reason = SaveReason::kCold;
  c.extensions = std::move(ext);
  auto img = CaptureSnapshot(st, TestIdentity(), c, 1700000000000);
  EXPECT_TRUE(img.ok()) << img.status().ToString();
  return std::move(*img);
}

// Round trip at token counts below the window, at its edge, across compressor block
// boundaries (4 and 8) and beyond: every live float comes back exactly, into a dirty state.
TEST(SnapshotCodecTest, RoundTripIsExactAtManyPositions) {
  CpuBackend be(nullptr);
  const std::string dir = MakeTempDir("codec");
  for (int64_t n : {1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63}) {
    KvState st = RandomState(be, SmallShape(), n, uint32_t(n));
    const auto tokens = Tokens(n);
    const auto logits = Logits(kVocab, float(n));
    SnapshotImage img = Capture(st, tokens, logits, "text " + std::to_string(n),
                                {SnapshotExtension{SnapshotTag("TST1"), "blob"}});
    EXPECT_EQ(img.size(), SnapshotFileBytes(SmallShape(), n, kVocab, img.text().size(),
                                            std::vector{SnapshotExtension{1, "blob"}}));
    const std::string path = WriteImage(dir, img);

    KvState dst = RandomState(be, SmallShape(), 40, 999);  // dirty, different count
    auto loaded = LoadSnapshot(path, TestIdentity(), dst);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_EQ(dst.n_tokens(), n);
    EXPECT_EQ(loaded->tokens, tokens);
    EXPECT_EQ(loaded->logits, logits);
    EXPECT_EQ(loaded->text, "text " + std::to_string(n));
    ASSERT_EQ(loaded->extensions.size(), 1u);
    EXPECT_EQ(loaded->extensions[0].tag, SnapshotTag("TST1"));
    EXPECT_EQ(loaded->extensions[0].bytes, "blob");
    EXPECT_EQ(loaded->header.reason, SaveReason::kCold);
    EXPECT_EQ(loaded->header.created_ms, 1700000000000);
    uint64_t payload =
        kSnapshotHeaderBytes + img.header().sections.size() * kSnapshotSectionRowBytes;
    for (const SnapshotSection& s : img.header().sections) payload += s.bytes;
    EXPECT_EQ(loaded->bytes_read, payload) << "every byte but padding is read once";
    for (int l = 0; l < 3; ++l) {
      const auto a = LayerOf(st, l), b = LayerOf(dst, l);
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "n " << n << " layer " << l;
    }
    EXPECT_TRUE(VerifySnapshotFile(path).ok());
  }
}

// The container is written and parsed once, whatever holds its bytes (util/byte_io.h): a
// sealed image written into memory is its file byte for byte, and the header and sections
// parsed from those bytes are the file's; a value cut short reads as a truncated file.
TEST(SnapshotCodecTest, MemoryBytesAreTheFileBytes) {
  CpuBackend be(nullptr);
  const std::string dir = MakeTempDir("codec-memory");
  KvState st = RandomState(be, SmallShape(), 21, 5);
  const auto tokens = Tokens(21);
  const auto logits = Logits(kVocab, 2.0f);
  SnapshotImage img = Capture(st, tokens, logits, "in memory");
  const std::string path = WriteImage(dir, img);
  std::string bytes;
  StringSink sink(&bytes);
  ASSERT_TRUE(WriteSnapshotImage(img, sink).ok());
  auto file_bytes = ReadWholeFile(path);
  ASSERT_TRUE(file_bytes.ok());
  EXPECT_EQ(bytes, *file_bytes);

  auto f = File::OpenRead(path);
  ASSERT_TRUE(f.ok());
  auto from_file = ReadSnapshotHeader(*f);
  auto from_memory = ReadSnapshotHeader(MemorySource(bytes, "value"));
  ASSERT_TRUE(from_file.ok() && from_memory.ok()) << from_memory.status().ToString();
  EXPECT_EQ(from_memory->sections.size(), from_file->sections.size());
  EXPECT_EQ(from_memory->file_bytes, from_file->file_bytes);
  const SnapshotSection& text = *from_memory->Find(SnapshotSectionKind::kText);
  auto text_bytes = ReadSnapshotSection(MemorySource(bytes, "value"), text);
  ASSERT_TRUE(text_bytes.ok());
  EXPECT_EQ(*text_bytes, "in memory");

  const std::string cut = bytes.substr(0, bytes.size() - 1);
  EXPECT_EQ(ReadSnapshotHeader(MemorySource(cut, "value")).status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(ReadSnapshotSection(MemorySource(cut, "value"), *from_memory->sections.rbegin())
                .status()
                .code(),
            StatusCode::kCorrupt);
}

TEST(SnapshotCodecTest, KeyIsSha1OfLittleEndianIds) {
  const std::vector<int32_t> ids = {1, 0x01020304};
  const char bytes[] = {1, 0, 0, 0, 4, 3, 2, 1};
  EXPECT_EQ(TokensKey(ids), Sha1Of(std::string_view(bytes, 8)));
}

// The resume tail and the tool replay map are kv's own sections: extension rows tagged
// 'VKA1' (u32 ids) and 'KTM1' (bytes), before the writer's, exactly the bytes the engine
// wrote into files before kv defined them — so those files load with their tail.
TEST(SnapshotCodecTest, TailAndReplayAreKvSections) {
  CpuBackend be(nullptr);
  const std::string dir = MakeTempDir("codec");
  KvState st = RandomState(be, SmallShape(), 9, 4);
  const auto tokens = Tokens(9);
  const auto logits = Logits(kVocab);
  const std::vector<int32_t> tail = {0x01020304, 7};
  SnapshotContent c;
  c.tokens = tokens;
  c.logits = logits;
  c.text = "visible text";
  c.tail = tail;
  c.replay = "tool ids";
  c.extensions = {SnapshotExtension{SnapshotTag("TST1"), "own"}};
  auto img = CaptureSnapshot(st, TestIdentity(), c, 1);
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  std::vector<const SnapshotSection*> ext;
  for (const SnapshotSection& s : img->header().sections) {
    if (s.kind == SnapshotSectionKind::kExtension) ext.push_back(&s);
  }
  ASSERT_EQ(ext.size(), 3u);
  EXPECT_EQ(ext[0]->tag, SnapshotTag("VKA1"));
  EXPECT_EQ(ext[1]->tag, SnapshotTag("KTM1"));
  EXPECT_EQ(ext[2]->tag, SnapshotTag("TST1"));
  const char tail_bytes[] = {4, 3, 2, 1, 7, 0, 0, 0};
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(img->data() + ext[0]->offset),
                             size_t(ext[0]->bytes)),
            std::string_view(tail_bytes, 8));
  EXPECT_EQ(img->size(),
            SnapshotFileBytes(SmallShape(), 9, kVocab, c.text.size(), SnapshotExtensionsOf(c)));

  const std::string path = WriteImage(dir, *img);
  KvState dst = RandomState(be, SmallShape(), 20, 8);
  auto loaded = LoadSnapshot(path, TestIdentity(), dst);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->tail, tail);
  EXPECT_EQ(loaded->replay, "tool ids");
  ASSERT_EQ(loaded->extensions.size(), 1u);
  EXPECT_EQ(loaded->extensions[0].tag, SnapshotTag("TST1"));

  // kv's tags are not the writer's to use, and tail ids are ids.
  SnapshotContent own = c;
  own.tail = {};
  own.extensions = {SnapshotExtension{SnapshotTag("VKA1"), "abcd"}};
  auto refused = CaptureSnapshot(st, TestIdentity(), own, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  const std::vector<int32_t> negative = {-1};
  own = c;
  own.tail = negative;
  refused = CaptureSnapshot(st, TestIdentity(), own, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);

  // A tail section that is not whole ids is damage.
  std::vector<SnapshotExtension> read = {{SnapshotTag("VKA1"), "abc"}};
  std::vector<int32_t> t;
  std::string r;
  EXPECT_EQ(TakeKvSections(&read, &t, &r).code(), StatusCode::kCorrupt);
}

TEST(SnapshotCodecTest, EqualStatesGiveEqualFiles) {
  CpuBackend be(nullptr);
  const std::string dir = MakeTempDir("codec");
  KvState st = RandomState(be, SmallShape(), 13, 5);
  const auto tokens = Tokens(13);
  const auto logits = Logits(kVocab);
  SnapshotImage a = Capture(st, tokens, logits, "abc");
  SnapshotImage b = Capture(st, tokens, logits, "abc");
  auto fa = ReadWholeFile(WriteImage(dir, a, "a"));
  auto fb = ReadWholeFile(WriteImage(dir, b, "b"));
  ASSERT_TRUE(fa.ok() && fb.ok());
  EXPECT_EQ(*fa, *fb);
  // The text is visible verbatim in the file (hexdump / kv show).
  EXPECT_NE(fa->find("abc"), std::string::npos);
  EXPECT_EQ(fa->substr(0, 8), std::string("FLASHKV\x1a", 8));
}

TEST(SnapshotCodecTest, CaptureRejectsBadContent) {
  CpuBackend be(nullptr);
  KvState st = RandomState(be, SmallShape(), 6, 1);
  const auto logits = Logits(kVocab);
  SnapshotContent c;
  const auto five = Tokens(5);
  c.tokens = five;
  c.logits = logits;
  EXPECT_EQ(CaptureSnapshot(st, TestIdentity(), c, 0).status().code(),
            StatusCode::kInvalidArgument);
  auto six = Tokens(6);
  six[2] = -1;
  c.tokens = six;
  EXPECT_FALSE(CaptureSnapshot(st, TestIdentity(), c, 0).ok());
  six[2] = 1;
  SnapshotIdentity long_name = TestIdentity();
  long_name.numerics = "0123456789abcdefg";
  EXPECT_FALSE(CaptureSnapshot(st, long_name, c, 0).ok());
  EXPECT_TRUE(CaptureSnapshot(st, TestIdentity(), c, 0).ok());
}

class SnapshotDamageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("damage");
    src_ = std::make_unique<KvState>(RandomState(be_, SmallShape(), 21, 7));
    SnapshotImage img =
        Capture(*src_, Tokens(21), Logits(kVocab), "hello snapshot", {SnapshotExtension{7, "ext"}});
    path_ = WriteImage(dir_, img);
    header_ = img.header();
    auto bytes = ReadWholeFile(path_);
    ASSERT_TRUE(bytes.ok());
    good_ = *bytes;
  }

  void Put(const std::string& bytes) {
    auto f = File::Create(path_);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->Write(bytes.data(), bytes.size()).ok());
  }

  // Loads the file into a dirty state: must fail, and leave the state cleared.
  Status LoadExpectFailure() {
    KvState dst = RandomState(be_, SmallShape(), 30, 3);
    auto r = LoadSnapshot(path_, TestIdentity(), dst);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(dst.n_tokens(), 0);
    EXPECT_FALSE(VerifySnapshotFile(path_).ok());
    return r.status();
  }

  CpuBackend be_{nullptr};
  std::string dir_, path_, good_;
  SnapshotHeader header_;
  std::unique_ptr<KvState> src_;
};

// Truncation at every section boundary (and inside the header and table) is detected.
TEST_F(SnapshotDamageTest, TruncationAtEverySectionBoundary) {
  std::vector<size_t> cuts = {0, 7, 100, 255, 256, 300};
  for (const SnapshotSection& s : header_.sections) {
    cuts.push_back(s.offset);
    cuts.push_back(s.offset + s.bytes / 2);
    if (s.offset + s.bytes < good_.size()) cuts.push_back(s.offset + s.bytes);
  }
  cuts.push_back(good_.size() - 1);
  for (size_t cut : cuts) {
    Put(good_.substr(0, cut));
    Status s = LoadExpectFailure();
    EXPECT_EQ(s.code(), StatusCode::kCorrupt) << cut << ": " << s.ToString();
  }
  Put(good_ + "x");  // extended
  EXPECT_EQ(LoadExpectFailure().code(), StatusCode::kCorrupt);
}

// Any flipped byte outside the stats block and padding is detected.
TEST_F(SnapshotDamageTest, RandomByteFlips) {
  std::mt19937 rng(42);
  int detected = 0;
  for (int trial = 0; trial < 150; ++trial) {
    size_t pos = rng() % good_.size();
    bool in_payload =
        pos < kSnapshotStatsOffset ||
        (pos >= kSnapshotHeaderBytes &&
         pos < kSnapshotHeaderBytes + header_.sections.size() * kSnapshotSectionRowBytes);
    for (const SnapshotSection& s : header_.sections) {
      if (pos >= s.offset && pos < s.offset + s.bytes) in_payload = true;
    }
    if (!in_payload) continue;  // padding and the stats block are not payload
    std::string bad = good_;
    bad[pos] = char(bad[pos] ^ (1 + rng() % 255));
    Put(bad);
    Status s = LoadExpectFailure();
    EXPECT_TRUE(s.code() == StatusCode::kCorrupt || s.code() == StatusCode::kUnsupported ||
                s.code() == StatusCode::kFailedPrecondition)
        << pos << ": " << s.ToString();
    ++detected;
  }
  EXPECT_GT(detected, 100);
}

TEST_F(SnapshotDamageTest, TornStatsBlockKeepsTheEntry) {
  std::string bad = good_;
  bad[kSnapshotStatsOffset + 9] ^= 0x5A;
  Put(bad);
  KvState dst = RandomState(be_, SmallShape(), 30, 3);
  auto r = LoadSnapshot(path_, TestIdentity(), dst);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->header.stats_ok);
  EXPECT_EQ(r->header.hit_count, 0u);
  EXPECT_EQ(r->header.last_used_ms, r->header.created_ms);
}

TEST_F(SnapshotDamageTest, StatsArePatchedInPlace) {
  {
    auto f = File::OpenReadWrite(path_);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(WriteSnapshotStats(*f, 1800000000000, 7).ok());
  }
  auto bytes = ReadWholeFile(path_);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->substr(kSnapshotHeaderBytes), good_.substr(kSnapshotHeaderBytes));
  EXPECT_EQ(bytes->substr(0, kSnapshotStatsOffset), good_.substr(0, kSnapshotStatsOffset));
  auto h = VerifySnapshotFile(path_);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->stats_ok);
  EXPECT_EQ(h->hit_count, 7u);
  EXPECT_EQ(h->last_used_ms, 1800000000000);
}

TEST_F(SnapshotDamageTest, AnotherModelOrShapeIsRefusedBeforeTouchingTheState) {
  KvState dst = RandomState(be_, SmallShape(), 30, 3);
  const auto before = LayerOf(dst, 1);
  auto r = LoadSnapshot(path_, TestIdentity("model-b"), dst);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("another model"), std::string::npos);

  SnapshotIdentity hf = TestIdentity();
  hf.numerics = "hf/off";
  r = LoadSnapshot(path_, hf, dst);
  EXPECT_NE(r.status().message().find("numerics"), std::string::npos) << r.status().ToString();

  KvShape other = SmallShape();
  other.layers[2].compress_ratio = 4;
  auto st2 = KvState::Create(be_, other);
  ASSERT_TRUE(st2.ok());
  r = LoadSnapshot(path_, TestIdentity(), *st2);
  EXPECT_NE(r.status().message().find("layer 2"), std::string::npos) << r.status().ToString();

  auto small_ctx = KvState::Create(be_, SmallShape(16));  // 21 tokens do not fit
  ASSERT_TRUE(small_ctx.ok());
  r = LoadSnapshot(path_, TestIdentity(), *small_ctx);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("context"), std::string::npos);

  SnapshotLoadOptions o;
  o.expect_vocab = kVocab + 1;
  r = LoadSnapshot(path_, TestIdentity(), dst, o);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(SnapshotDamageTest, WrongVersionIsUnsupported) {
  std::string bad = good_;
  bad[8] = 3;
  Put(bad);
  EXPECT_EQ(LoadExpectFailure().code(), StatusCode::kUnsupported);
  bad = good_;
  bad[0] = 'X';
  Put(bad);
  EXPECT_NE(LoadExpectFailure().message().find("magic"), std::string::npos);
}

}  // namespace
}  // namespace flashkv

namespace flashkv {
namespace {

// The streamed load gives the same state whatever the read size and read-ahead depth
// (layers larger than one read, one staging buffer, more buffers than layers).
TEST(SnapshotCodecTest, LoadIsIndependentOfChunkingAndStaging) {
  CpuBackend be(nullptr);
  const std::string dir = MakeTempDir("codec");
  const KvShape shape = SmallShape(2048);
  KvState st = RandomState(be, shape, 2000, 11);
  const auto tokens = Tokens(2000);
  const auto logits = Logits(kVocab);
  SnapshotImage img = Capture(st, tokens, logits, "chunks");
  ASSERT_GT(img.header().sections[5].bytes, 3 * 4096u) << "layer 1 spans several reads";
  const std::string path = WriteImage(dir, img);
  for (auto [chunk, buffers] :
       {std::pair{size_t(4096), 1}, {size_t(4096), 3}, {size_t(1) << 20, 8}}) {
    KvState dst = RandomState(be, shape, 5, 2);
    SnapshotLoadOptions o;
    o.chunk_bytes = chunk;
    o.staging_buffers = buffers;
    auto r = LoadSnapshot(path, TestIdentity(), dst, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    for (int l = 0; l < 3; ++l) EXPECT_EQ(LayerOf(dst, l), LayerOf(st, l)) << chunk << " " << l;
  }
}

}  // namespace
}  // namespace flashkv
