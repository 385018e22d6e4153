#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "backend_test_util.h"

namespace flashkv {
namespace {

using testing::F32Weight;
using testing::Upload;
using testing::Zeros;

// One head of width 2, query (1, 0), scale 1, sink logit 0: a row's logit is its first
// value, so exp(logit) is chosen by writing logs there.
//   kv0 = (0, 1) (already in the ring), kv1 = (ln 2, 3), kv2 = (ln 3, 5) (this chunk).
// Window 2: position 1 sees kv0, kv1 → weights 1 (sink), 1, 2; position 2 sees kv1, kv2 →
// weights 1, 2, 3.
struct AttentionCase {
  CpuBackend be{nullptr};
  std::vector<float> sink_host = {0.0f};
  Weight sinks = F32Weight(be, {1}, sink_host);
  testing::DevVec<float> q = Upload<float>(be, {1, 0, 1, 0});
  testing::DevVec<float> ring = Upload<float>(be, {0, 1, 0, 0});  // slot 0 = position 0
  testing::DevVec<float> kv_new = Upload<float>(be, {std::log(2.0f), 3, std::log(3.0f), 5});
  testing::DevVec<float> out = Zeros<float>(be, 4);

  AttentionArgs Args() {
    AttentionArgs a{};
    a.q = q.ptr();
    a.kv_new = kv_new.ptr();
    a.ring = ring.ptr();
    a.sinks = &sinks;
    a.out = out.ptr();
    a.pos0 = 1;
    a.n_tokens = 2;
    a.n_head = 1;
    a.head_dim = 2;
    a.n_swa = 2;
    a.scale = 1.0f;
    return a;
  }
};

TEST(AttentionTest, WindowRowsAndSinkShareOneSoftmax) {
  AttentionCase c;
  c.be.Attention(c.Args());
  const auto o = c.out.Get(c.be);
  const float ln2 = std::log(2.0f), ln3 = std::log(3.0f);
  EXPECT_NEAR(o[0], (0 + 2 * ln2) / 4, 1e-6);
  EXPECT_NEAR(o[1], (1 + 2 * 3) / 4.0, 1e-6);
  EXPECT_NEAR(o[2], (2 * ln2 + 3 * ln3) / 6, 1e-6);
  EXPECT_NEAR(o[3], (2 * 3 + 3 * 5) / 6.0, 1e-6);
}

// Ratio 2: compressed row w is visible from position 2w + 1. Row 0 = (0, 10) joins
// position 1's softmax with weight 1 and position 2's too; row 1 = (ln 4, 20) is visible
// from position 3 only. With an indexer choice only the listed rows count.
TEST(AttentionTest, CompressedRowsFollowCausalityAndSelection) {
  AttentionCase c;
  auto comp = Upload<float>(c.be, {0, 10, std::log(4.0f), 20});
  AttentionArgs a = c.Args();
  a.comp_rows = comp.ptr();
  a.ratio = 2;
  c.be.Attention(a);
  auto o = c.out.Get(c.be);
  EXPECT_NEAR(o[1], (1 + 2 * 3 + 10) / 5.0, 1e-5);
  EXPECT_NEAR(o[3], (2 * 3 + 3 * 5 + 10) / 7.0, 1e-5);

  // An indexer that selected nothing for token 0 and row 0 for token 1.
  auto sel = Upload<int32_t>(c.be, {-1, 0});
  a.selected = sel.ptr();
  a.top_k = 1;
  c.be.Attention(a);
  o = c.out.Get(c.be);
  EXPECT_NEAR(o[1], (1 + 2 * 3) / 4.0, 1e-5);
  EXPECT_NEAR(o[3], (2 * 3 + 3 * 5 + 10) / 7.0, 1e-5);
}

TEST(AttentionTest, WindowRowsGoToRingSlotsByPosition) {
  CpuBackend be(nullptr);
  auto ring = Zeros<float>(be, 3);  // n_swa 3, head_dim 1
  auto rows = Upload<float>(be, {10, 11, 12, 13, 14});
  be.StoreWindowRows(rows.ptr(), 4, 5, 3, 1, ring.ptr());  // positions 4..8
  // Positions 6, 7, 8 survive, in slots 0, 1, 2.
  EXPECT_EQ(ring.Get(be), (std::vector<float>{12, 13, 14}));
}

TEST(RopeTest, RotatesTrailingPairsAndInverts) {
  CpuBackend be(nullptr);
  // θ = 0.25 turns pair 0 by the position itself.
  RopeParams rope;
  rope.n_rot = 2;
  rope.freq_base = 0.25f;
  // Two rows (positions 3 and 5 with step 2), one head of 4: the last pair rotates by 1.5
  // and 2.5 after the interpolation scale 0.5.
  rope.freq_scale = 0.5f;
  auto x = Upload<float>(be, {7, 8, 1, 0, 7, 8, 0, 2});
  be.Rope(x.ptr(), 2, 1, 4, rope, 3, 2, false);
  auto v = x.Get(be);
  EXPECT_EQ(v[0], 7);
  EXPECT_EQ(v[1], 8);
  EXPECT_NEAR(v[2], std::cos(1.5), 1e-6);
  EXPECT_NEAR(v[3], std::sin(1.5), 1e-6);
  EXPECT_NEAR(v[6], -2 * std::sin(2.5), 1e-6);
  EXPECT_NEAR(v[7], 2 * std::cos(2.5), 1e-6);
  be.Rope(x.ptr(), 2, 1, 4, rope, 3, 2, true);
  v = x.Get(be);
  EXPECT_NEAR(v[2], 1, 1e-6);
  EXPECT_NEAR(v[3], 0, 1e-6);
  EXPECT_NEAR(v[6], 0, 1e-6);
  EXPECT_NEAR(v[7], 2, 1e-6);
}

// Rows of several sessions of one step, each at its own position: RopeAt and NormRope with
// positions give every row the bits of its own call (Model::ForwardBatch rotates all rows at
// once).
TEST(RopeTest, RowsAtTheirOwnPositionsMatchEachRowAlone) {
  CpuBackend be(nullptr);
  RopeParams rope;
  rope.n_rot = 4;
  rope.freq_base = 10000.0f;
  rope.freq_scale = 0.25f;
  rope.ext_factor = 1.0f;
  rope.corr_hi = 2.0f;
  const std::vector<int64_t> pos = {3, 977, 978, 12, 40000};
  const int heads = 2, d = 6, rows = int(pos.size());
  std::vector<float> xs(size_t(rows) * heads * d);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = float(i % 7) - 2.5f + 0.125f * float(i);
  auto p = Upload<int64_t>(be, pos);
  for (bool inverse : {false, true}) {
    auto alone = Upload<float>(be, xs);
    auto batch = Upload<float>(be, xs);
    for (int r = 0; r < rows; ++r) {
      be.Rope(alone.ptr() + size_t(r) * heads * d, 1, heads, d, rope, pos[size_t(r)], 1, inverse);
    }
    be.RopeAt(batch.ptr(), rows, heads, d, rope, p.ptr(), inverse);
    EXPECT_EQ(alone.Get(be), batch.Get(be)) << "inverse " << inverse;
  }
  NormRopeArgs a{};
  a.n_heads = heads;
  a.head_dim = d;
  a.eps = 1e-6f;
  a.rope = rope;
  a.f16_round = true;
  auto alone = Upload<float>(be, xs);
  for (int r = 0; r < rows; ++r) {
    NormRopeArgs one = a;
    one.x = alone.ptr() + size_t(r) * heads * d;
    one.n_rows = 1;
    one.pos0 = pos[size_t(r)];
    be.NormRope(one);
  }
  auto batch = Upload<float>(be, xs);
  a.x = batch.ptr();
  a.n_rows = rows;
  a.positions = p.ptr();
  be.NormRope(a);
  EXPECT_EQ(alone.Get(be), batch.Get(be));
}

TEST(MatMulGroupedTest, EachGroupUsesItsOwnRowBlock) {
  CpuBackend be(nullptr);
  // Two groups, in_g = 2, r = 1: W rows (1, 2) for group 0 and (3, 4) for group 1.
  std::vector<float> w = {1, 2, 3, 4};
  const Weight wt = F32Weight(be, {2, 2}, w);
  auto x = Upload<float>(be, {1, 1, 10, 100});
  auto y = Zeros<float>(be, 2);
  for (ActQuantMode aq : {ActQuantMode::kOff, ActQuantMode::kQ8}) {
    be.MatMulGrouped(wt, x.ptr(), 1, 2, y.ptr(), aq);
    EXPECT_EQ(y.Get(be), (std::vector<float>{3, 430}));
  }
}

}  // namespace
}  // namespace flashkv
