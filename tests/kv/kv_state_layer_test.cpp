#include <vector>

#include <gtest/gtest.h>

#include "kv_test_util.h"

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

}  // namespace
}  // namespace flashkv
