#include "state/kv_state.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"

namespace flashkv {
namespace {

// Two layers: sliding-only, and ratio 4 with overlap and indexer. head_dim 2, window 4,
// indexer dim 1, context 16.
KvShape SmallShape() {
  KvShape s;
  s.head_dim = 2;
  s.n_swa = 4;
  s.indexer_dim = 1;
  s.ctx_size = 16;
  s.layers = {KvLayerShape{0, false, false}, KvLayerShape{4, true, true}};
  return s;
}

TEST(KvStateTest, SectionSizesFollowTheTokenCount) {
  CpuBackend be(nullptr);
  auto st = KvState::Create(be, SmallShape());
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->n_tokens(), 0);
  EXPECT_EQ(st->SectionFloats(1, KvSection::kRaw), 0u);
  ASSERT_TRUE(st->SetTokenCount(10).ok());
  EXPECT_EQ(st->SectionFloats(0, KvSection::kRaw), 4u * 2);           // min(10, 4) rows
  EXPECT_EQ(st->SectionFloats(0, KvSection::kCompressed), 0u);        // sliding layer
  EXPECT_EQ(st->SectionFloats(1, KvSection::kCompressed), 2u * 2);    // 10 / 4 rows
  EXPECT_EQ(st->SectionFloats(1, KvSection::kCompressorKv), 8u * 4);  // [2·4, 2·2]
  EXPECT_EQ(st->SectionFloats(1, KvSection::kIndexerRows), 2u * 1);
  EXPECT_EQ(st->SectionFloats(1, KvSection::kIndexerScore), 8u * 2);
  EXPECT_EQ(st->layer(1).comp_cap, 16 / 4 + 2);
  EXPECT_FALSE(st->SetTokenCount(17).ok());
}

TEST(KvStateTest, FrontiersStartEmpty) {
  CpuBackend be(nullptr);
  auto st = KvState::Create(be, SmallShape());
  ASSERT_TRUE(st.ok());
  std::vector<float> score(st->SectionFloats(1, KvSection::kCompressorScore));
  ASSERT_TRUE(st->ReadSection(1, KvSection::kCompressorScore, score.data()).ok());
  for (float v : score) EXPECT_EQ(v, -std::numeric_limits<float>::infinity());
  std::vector<float> kv(st->SectionFloats(1, KvSection::kIndexerKv));
  ASSERT_TRUE(st->ReadSection(1, KvSection::kIndexerKv, kv.data()).ok());
  for (float v : kv) EXPECT_EQ(v, 0.0f);
}

// The ring keeps position p in slot p % n_swa; the raw section is in position order.
TEST(KvStateTest, RawSectionIsInLogicalOrderAfterWrap) {
  CpuBackend be(nullptr);
  auto st = KvState::Create(be, SmallShape());
  ASSERT_TRUE(st.ok());
  // Positions 0..5 written by position into their slots: slot = p % 4.
  std::vector<float> ring(8);
  for (int p = 2; p < 6; ++p) {
    ring[(p % 4) * 2] = float(p);
    ring[(p % 4) * 2 + 1] = float(p) + 0.5f;
  }
  ASSERT_TRUE(be.Write(st->layer(0).ring, ring.data(), ring.size() * 4).ok());
  ASSERT_TRUE(st->SetTokenCount(6).ok());
  std::vector<float> raw(8);
  ASSERT_TRUE(st->ReadSection(0, KvSection::kRaw, raw.data()).ok());
  EXPECT_EQ(raw, (std::vector<float>{2, 2.5, 3, 3.5, 4, 4.5, 5, 5.5}));

  // Writing the logical rows back into a fresh state reproduces the ring.
  auto copy = KvState::Create(be, SmallShape());
  ASSERT_TRUE(copy.ok());
  ASSERT_TRUE(copy->SetTokenCount(6).ok());
  ASSERT_TRUE(copy->WriteSection(0, KvSection::kRaw, raw.data()).ok());
  std::vector<float> ring2(8);
  ASSERT_TRUE(be.Read(copy->layer(0).ring, ring2.data(), ring2.size() * 4).ok());
  EXPECT_EQ(ring2, ring);
}

TEST(KvStateTest, ClearResetsCountAndFrontiers) {
  CpuBackend be(nullptr);
  auto st = KvState::Create(be, SmallShape());
  ASSERT_TRUE(st.ok());
  be.Fill(st->layer(1).comp_state_score, 1.0f, 32);
  st->Advance(5);
  ASSERT_TRUE(st->Clear().ok());
  EXPECT_EQ(st->n_tokens(), 0);
  std::vector<float> score(32);
  ASSERT_TRUE(st->ReadSection(1, KvSection::kCompressorScore, score.data()).ok());
  EXPECT_EQ(score[0], -std::numeric_limits<float>::infinity());
}

}  // namespace
}  // namespace flashkv
