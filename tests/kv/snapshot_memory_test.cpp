// RestoreSnapshotImage: an in-memory image written back into a state is bit-exact, replaces
// what was there, and is refused (state cleared) for another model, a too-small context or
// a damaged sealed image.
#include "snapshot/snapshot_memory.h"

#include <gtest/gtest.h>

#include "kv_test_util.h"

namespace flashkv {
namespace {

using testing::LayerOf;
using testing::Logits;
using testing::RandomState;
using testing::SmallShape;
using testing::TestIdentity;
using testing::Tokens;

constexpr int kVocab = 50;

SnapshotImage Capture(const KvState& st, const std::vector<int32_t>& tokens,
                      const std::vector<float>& logits, bool seal) {
  SnapshotContent c;
  c.tokens = tokens;
  c.logits = logits;
  c.reason = SaveReason::kManual;
  auto img = CaptureSnapshot(st, TestIdentity(), c, 1000);
  EXPECT_TRUE(img.ok()) << img.status().ToString();
  if (seal) SealSnapshot(*img);
  return std::move(*img);
}

class SnapshotMemoryTest : public ::testing::TestWithParam<bool> {
 protected:
  CpuBackend be_{nullptr};
};

TEST_P(SnapshotMemoryTest, RoundTripIsBitExactAndReplacesTheTarget) {
  const bool sealed = GetParam();
  // 37 tokens: past the window (8), 9 ratio-4 rows with one token open, 4 ratio-8 rows.
  KvState src = RandomState(be_, SmallShape(64), 37, 7);
  const std::vector<int32_t> tokens = Tokens(37);
  const std::vector<float> logits = Logits(kVocab, 0.5f);
  SnapshotImage img = Capture(src, tokens, logits, sealed);
  ASSERT_EQ(img.sealed(), sealed);

  // The target has a larger context and other contents of another length.
  KvState dst = RandomState(be_, SmallShape(100), 50, 8);
  auto r = RestoreSnapshotImage(img, TestIdentity(), dst);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(dst.n_tokens(), 37);
  EXPECT_EQ(r->logits, logits);
  uint64_t bytes = 0;
  for (int l = 0; l < 3; ++l) {
    EXPECT_EQ(LayerOf(dst, l), LayerOf(src, l)) << "layer " << l;
    bytes += dst.LayerFloats(l) * sizeof(float);
  }
  EXPECT_EQ(r->layer_bytes, bytes);
  // Hand count for SmallShape at 37 tokens (floats): layer 0 raw 8·4 = 32; layer 1 raw 32 +
  // compressed 9·4 + frontier 2·(2·4·2·4) + indexer rows 9·2 + indexer frontier
  // 2·(2·4·2·2) = 32+36+128+18+64 = 278; layer 2 raw 32 + compressed 4·4 + frontier
  // 2·(8·4) = 112. Total 422 floats.
  EXPECT_EQ(bytes, 422u * 4);
}

INSTANTIATE_TEST_SUITE_P(SealedOrNot, SnapshotMemoryTest, ::testing::Bool());

TEST(SnapshotMemory, AnotherModelIsRefusedAndClearsTheState) {
  CpuBackend be(nullptr);
  KvState src = RandomState(be, SmallShape(), 20, 1);
  SnapshotImage img = Capture(src, Tokens(20), Logits(kVocab), true);
  KvState dst = RandomState(be, SmallShape(), 10, 2);
  auto r = RestoreSnapshotImage(img, TestIdentity("model-b"), dst);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  EXPECT_NE(r.status().ToString().find("another model"), std::string::npos);
  EXPECT_EQ(dst.n_tokens(), 0);
}

TEST(SnapshotMemory, ContextTooSmallIsRefused) {
  CpuBackend be(nullptr);
  KvState src = RandomState(be, SmallShape(64), 40, 1);
  SnapshotImage img = Capture(src, Tokens(40), Logits(kVocab), false);
  KvState dst = RandomState(be, SmallShape(32), 5, 2);
  auto r = RestoreSnapshotImage(img, TestIdentity(), dst);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().ToString().find("40 tokens"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(dst.n_tokens(), 0);
}

TEST(SnapshotMemory, DamagedSealedImageIsCorrupt) {
  CpuBackend be(nullptr);
  KvState src = RandomState(be, SmallShape(), 30, 3);
  SnapshotImage img = Capture(src, Tokens(30), Logits(kVocab), true);
  // Flip one byte inside the last layer section (the image owns plain heap memory; the
  // cast stands in for a memory fault).
  const SnapshotSection* last = img.header().Find(SnapshotSectionKind::kLayer, 2);
  ASSERT_NE(last, nullptr);
  const_cast<uint8_t*>(img.data())[last->offset + 5] ^= 0x40;
  KvState dst = RandomState(be, SmallShape(), 12, 4);
  auto r = RestoreSnapshotImage(img, TestIdentity(), dst);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << r.status().ToString();
  EXPECT_NE(r.status().ToString().find("tag 2"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(dst.n_tokens(), 0);
}

}  // namespace
}  // namespace flashkv
