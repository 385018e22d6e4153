#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "state_test_util.h"

namespace flashkv {
namespace {

// ReadLayer is every ReadSection of the layer back to back, in KvSection order, and
// WriteLayer inverts it.
TEST(KvStateLayerTest, LayerIoIsTheSectionsInOrder) {
  CpuBackend be(nullptr);
  KvState st = testing::RandomState(be, testing::SmallShape(), 19, 4);
  for (int l = 0; l < 3; ++l) {
    std::vector<float> joined;
    for (KvSection s : {KvSection::kRaw, KvSection::kCompressed, KvSection::kCompressorKv,
                        KvSection::kCompressorScore, KvSection::kIndexerRows, KvSection::kIndexerKv,
                        KvSection::kIndexerScore}) {
      std::vector<float> part(st.SectionFloats(l, s));
      ASSERT_TRUE(st.ReadSection(l, s, part.data()).ok());
      joined.insert(joined.end(), part.begin(), part.end());
    }
    EXPECT_EQ(joined.size(), st.LayerFloats(l));
    EXPECT_EQ(testing::LayerOf(st, l), joined);
  }
  // Layer 1 (ratio 4, overlap, indexer) at 19 tokens: 8 raw rows · 4, 4 compressed rows · 4,
  // two frontiers [8, 8], 4 indexer rows · 2, two indexer frontiers [8, 4].
  EXPECT_EQ(st.LayerFloats(1), size_t(32 + 16 + 64 + 64 + 8 + 32 + 32));
  EXPECT_FALSE(st.ReadLayer(3, nullptr).ok());
}

// WriteRows (chunk rows) plus WriteLayerTail (the rest, ReadLayer's layout without those
// rows) rebuild a layer exactly as WriteLayer would; ranges past the token count, other
// sections and too many skipped rows are refused.
TEST(KvStateLayerTest, RowWritesAndTheLayerTailRebuildTheLayer) {
  CpuBackend be(nullptr);
  const KvState src = testing::RandomState(be, testing::SmallShape(), 19, 4);
  KvState dst = testing::RandomState(be, testing::SmallShape(), 19, 9);
  const int l = 1;  // ratio 4 + indexer: 4 compressed rows of 4, 4 indexer rows of 2
  std::vector<float> comp(src.SectionFloats(l, KvSection::kCompressed));
  std::vector<float> idx(src.SectionFloats(l, KvSection::kIndexerRows));
  ASSERT_TRUE(src.ReadSection(l, KvSection::kCompressed, comp.data()).ok());
  ASSERT_TRUE(src.ReadSection(l, KvSection::kIndexerRows, idx.data()).ok());
  // The first two rows of each by row writes; the layer without them by the tail.
  const KvState::RowWrite rows[] = {{l, KvSection::kCompressed, 0, 2, comp.data()},
                                    {l, KvSection::kIndexerRows, 0, 2, idx.data()}};
  ASSERT_TRUE(dst.WriteRows(rows, 2).ok());
  std::vector<float> whole = testing::LayerOf(src, l);
  // ReadLayer layout: raw 32, compressed 16 (rows 0-1 = floats 32..39), frontiers 128,
  // indexer rows 8 (rows 0-1 = floats 176..179), indexer frontiers 64.
  std::vector<float> tail;
  tail.insert(tail.end(), whole.begin(), whole.begin() + 32);
  tail.insert(tail.end(), whole.begin() + 40, whole.begin() + 176);
  tail.insert(tail.end(), whole.begin() + 180, whole.end());
  ASSERT_TRUE(dst.WriteLayerTail(l, 2, tail.data()).ok());
  EXPECT_EQ(testing::LayerOf(dst, l), whole);

  const KvState::RowWrite past[] = {{l, KvSection::kCompressed, 3, 2, comp.data()}};
  EXPECT_EQ(dst.WriteRows(past, 1).code(), StatusCode::kOutOfRange);
  const KvState::RowWrite raw[] = {{l, KvSection::kRaw, 0, 1, comp.data()}};
  EXPECT_EQ(dst.WriteRows(raw, 1).code(), StatusCode::kInvalidArgument);
  const KvState::RowWrite bad_layer[] = {{7, KvSection::kCompressed, 0, 1, comp.data()}};
  EXPECT_FALSE(dst.WriteRows(bad_layer, 1).ok());
  EXPECT_EQ(dst.WriteLayerTail(l, 5, tail.data()).code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace flashkv
