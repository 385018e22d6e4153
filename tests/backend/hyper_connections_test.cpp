#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "backend_test_util.h"
#include "tensor/quant.h"

namespace flashkv {
namespace {

using testing::F32Weight;
using testing::HostWeight;
using testing::Upload;
using testing::Zeros;

// Two streams of width 2 and a zero projection, so the HC weights come from `base` alone:
// pre = σ(0) + eps, post = 2σ(0) = 1, and comb = Sinkhorn(softmax_rows([[0, 0], [ln 3, 0]])).
// For a positive 2×2 matrix Sinkhorn converges to [[a, 1−a], [1−a, a]] with
// a²/(1−a)² = m00·m11 / (m01·m10) = (0.5·0.25)/(0.5·0.75) = 1/3, so a = 1/(1 + √3).
TEST(HyperConnectionsTest, SinkhornMakesCombDoublyStochastic) {
  ThreadPool pool(2);
  CpuBackend be(&pool);
  const int n_hc = 2, n_embd = 2;
  const HcParams p{n_hc, n_embd, 20, 1e-6f, 1e-6f};
  std::vector<float> fn(size_t(n_hc * n_embd) * 8, 0.0f);
  std::vector<float> scale = {1.0f, 1.0f, 1.0f};
  std::vector<float> base = {0, 0, 0, 0, 0, 0, std::log(3.0f), 0};
  const Weight w_fn = F32Weight(be, {4, 8}, fn);
  const Weight w_scale = F32Weight(be, {3}, scale);
  const Weight w_base = F32Weight(be, {8}, base);
  auto x = Upload<float>(be, {1, 2, 10, 20});  // stream 0 = (1, 2), stream 1 = (10, 20)
  auto u = Zeros<float>(be, 2);
  auto post = Zeros<float>(be, 2);
  auto comb = Zeros<float>(be, 4);
  be.HcPre(x.ptr(), 1, w_fn, w_scale, w_base, p, u.ptr(), post.ptr(), comb.ptr());

  const double a = 1.0 / (1.0 + std::sqrt(3.0));
  const auto c = comb.Get(be);
  EXPECT_NEAR(c[0], a, 1e-5);
  EXPECT_NEAR(c[1], 1 - a, 1e-5);
  EXPECT_NEAR(c[2], 1 - a, 1e-5);
  EXPECT_NEAR(c[3], a, 1e-5);
  const auto pst = post.Get(be);
  EXPECT_FLOAT_EQ(pst[0], 1.0f);
  EXPECT_FLOAT_EQ(pst[1], 1.0f);
  // u = Σ_j pre_j X[j] with pre_j = 0.5 + 1e-6.
  const auto uu = u.Get(be);
  EXPECT_NEAR(uu[0], 0.500001 * 11, 1e-5);
  EXPECT_NEAR(uu[1], 0.500001 * 22, 1e-5);
}

// HC_post sums over the first index of comb: out[k] = post_k f + Σ_j comb[j,k] X[j].
TEST(HyperConnectionsTest, PostUsesTransposedComb) {
  CpuBackend be(nullptr);
  const HcParams p{2, 1, 20, 1e-6f, 1e-6f};
  auto x = Upload<float>(be, {1, 10});
  auto f = Upload<float>(be, {100});
  auto post = Upload<float>(be, {0.5f, 2.0f});
  auto comb = Upload<float>(be, {0.25f, 0.75f, 0.6f, 0.4f});  // rows j, columns k
  auto out = Zeros<float>(be, 2);
  be.HcPost(x.ptr(), f.ptr(), post.ptr(), comb.ptr(), 1, p, out.ptr());
  const auto o = out.Get(be);
  EXPECT_FLOAT_EQ(o[0], 50 + 0.25f * 1 + 0.6f * 10);
  EXPECT_FLOAT_EQ(o[1], 200 + 0.75f * 1 + 0.4f * 10);
}

// HC_head: weights σ(scale·(fn·μ) + base) + eps with no Sinkhorn.
TEST(HyperConnectionsTest, HeadWeightsStreamsBySigmoid) {
  CpuBackend be(nullptr);
  const HcParams p{2, 1, 20, 1e-6f, 1e-6f};
  std::vector<float> fn = {0, 0, 0, 0};
  std::vector<float> scale = {1};
  std::vector<float> base = {0, std::log(3.0f)};  // σ = 0.5, 0.75
  auto x = Upload<float>(be, {4, 8});
  auto y = Zeros<float>(be, 1);
  be.HcHead(x.ptr(), 1, F32Weight(be, {2, 2}, fn), F32Weight(be, {1}, scale),
            F32Weight(be, {2}, base), p, y.ptr());
  EXPECT_NEAR(y.Get(be)[0], 4 * 0.500001 + 8 * 0.750001, 1e-5);
}

// llama.cpp's presets quantize hc_*_fn and output_hc_fn with their default type: a block-type
// projection must give what its dequantized F32 values give (fp32 activations both ways;
// only the summation order may differ), not read the streams as quantized activations.
TEST(HyperConnectionsTest, BlockTypeProjectionMatchesItsDequantizedValues) {
  ThreadPool pool(2);
  CpuBackend be(&pool);
  const int n_hc = 4, n_embd = 64, hc_dim = n_hc * n_embd, mix = (2 + n_hc) * n_hc, T = 3;
  const HcParams p{n_hc, n_embd, 20, 1e-6f, 1e-6f};
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> x(size_t(T) * hc_dim), scale = {0.5f, 0.7f, 0.9f}, base(mix);
  for (float& v : x) v = 10 * nd(rng);
  for (float& v : base) v = nd(rng);
  for (DType t : {DType::kQ8_0, DType::kQ4_K, DType::kQ2_K}) {
    for (int rows : {mix, n_hc}) {  // HcPre, HcHead
      std::vector<float> fn(size_t(rows) * hc_dim);
      for (float& v : fn) v = nd(rng);
      const uint64_t row_bytes = *RowBytes(t, hc_dim);
      std::vector<uint8_t> q(rows * row_bytes);
      std::vector<float> deq(fn.size());
      for (int r = 0; r < rows; ++r) {
        ASSERT_TRUE(
            QuantizeRow(t, fn.data() + size_t(r) * hc_dim, q.data() + r * row_bytes, hc_dim).ok());
        ASSERT_TRUE(
            DequantizeRow(t, q.data() + r * row_bytes, deq.data() + size_t(r) * hc_dim, hc_dim)
                .ok());
      }
      const Weight wq = HostWeight(be, t, {uint64_t(hc_dim), uint64_t(rows)}, q.data(), q.size());
      const Weight wf = F32Weight(be, {uint64_t(hc_dim), uint64_t(rows)}, deq);
      auto xs = Upload<float>(be, x);
      std::vector<std::vector<float>> got[2];
      for (int k = 0; k < 2; ++k) {
        const Weight& w = k == 0 ? wq : wf;
        if (rows == mix) {
          auto u = Zeros<float>(be, size_t(T) * n_embd);
          auto post = Zeros<float>(be, size_t(T) * n_hc);
          auto comb = Zeros<float>(be, size_t(T) * n_hc * n_hc);
          be.HcPre(xs.ptr(), T, w, F32Weight(be, {3}, scale), F32Weight(be, {uint64_t(mix)}, base),
                   p, u.ptr(), post.ptr(), comb.ptr());
          got[k] = {u.Get(be), post.Get(be), comb.Get(be)};
        } else {
          auto y = Zeros<float>(be, size_t(T) * n_embd);
          be.HcHead(xs.ptr(), T, w, F32Weight(be, {1}, {scale[0]}),
                    F32Weight(be, {uint64_t(n_hc)}, {base.begin(), base.begin() + n_hc}), p,
                    y.ptr());
          got[k] = {y.Get(be)};
        }
      }
      for (size_t o = 0; o < got[0].size(); ++o) {
        double max_v = 0;
        for (float v : got[1][o]) max_v = std::max(max_v, double(std::fabs(v)));
        for (size_t i = 0; i < got[0][o].size(); ++i) {
          ASSERT_NEAR(got[0][o][i], got[1][o][i], 1e-5 * max_v)
              << GetDTypeInfo(t).name << " rows " << rows << " output " << o << " [" << i << "]";
        }
      }
    }
  }
}

}  // namespace
}  // namespace flashkv
