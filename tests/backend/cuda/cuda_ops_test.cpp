// Every CUDA op against its CPU twin (src/backend/cpu/op_*.cpp) on the same random inputs,
// in the spirit of llama.cpp's test-backend-ops. Exact where the CUDA kernel promises the
// CPU's bits (q8 dot products, quantizers, FP8/FP4, copies, index choices), otherwise a
// tolerance relative to the magnitudes involved. Also: batch invariance of the kernels
// (one token at a time equals a batch, bit for bit), graph replay against direct launches,
// and batched host transfers. Label `gpu`: skipped where no GPU is present.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "cuda_test_util.h"
#include "tensor/half.h"
#include "tensor/quant.h"

namespace flashkv::testing {
namespace {

class CudaOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FLASHKV_REQUIRE_GPU();
    gpu_ = SharedCuda();
  }
  CpuBackend cpu_{nullptr};
  CudaBackend* gpu_ = nullptr;
};

constexpr DType kAllTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16,   DType::kQ8_0,
                               DType::kQ2_K, DType::kQ4_K, DType::kIQ2_XXS};
constexpr DType kQuantTypes[] = {DType::kQ8_0, DType::kQ2_K, DType::kQ4_K, DType::kIQ2_XXS};

TEST_F(CudaOpsTest, ElementwiseOpsMatch) {
  const auto a = RandomFloats(5000, 1, -30, 30), b = RandomFloats(5000, 2, -30, 30);
  auto A = PutBoth(cpu_, *gpu_, a), B = PutBoth(cpu_, *gpu_, b);
  auto O = PutBoth(cpu_, *gpu_, std::vector<float>(5000));
  for (Backend* be : {static_cast<Backend*>(&cpu_), static_cast<Backend*>(gpu_)}) {
    const bool g = be == gpu_;
    be->Add(g ? A.gpu.ptr() : A.cpu.ptr(), g ? B.gpu.ptr() : B.cpu.ptr(),
            g ? O.gpu.ptr() : O.cpu.ptr(), 5000);
  }
  EXPECT_EQ(Compare(Get(cpu_, O.cpu), Get(*gpu_, O.gpu)).mismatches, 0u);

  cpu_.SwiGlu(A.cpu.ptr(), B.cpu.ptr(), O.cpu.ptr(), 5000, 10.0f);
  gpu_->SwiGlu(A.gpu.ptr(), B.gpu.ptr(), O.gpu.ptr(), 5000, 10.0f);
  EXPECT_LE(Compare(Get(cpu_, O.cpu), Get(*gpu_, O.gpu)).max_abs, 1e-5);

  cpu_.Copy(A.cpu.ptr(), O.cpu.ptr(), 4999);
  gpu_->Copy(A.gpu.ptr(), O.gpu.ptr(), 4999);
  cpu_.Fill(O.cpu.ptr() + 4000, 3.5f, 1000);
  gpu_->Fill(O.gpu.ptr() + 4000, 3.5f, 1000);
  cpu_.F16Round(O.cpu.ptr(), 5000);
  gpu_->F16Round(O.gpu.ptr(), 5000);
  EXPECT_EQ(Compare(Get(cpu_, O.cpu), Get(*gpu_, O.gpu)).mismatches, 0u);

  // Window rows: a chunk longer than the ring keeps only its last n_swa rows.
  auto ring = PutBoth(cpu_, *gpu_, std::vector<float>(8 * 16, -1.0f));
  cpu_.StoreWindowRows(A.cpu.ptr(), 13, 11, 8, 16, ring.cpu.ptr());
  gpu_->StoreWindowRows(A.gpu.ptr(), 13, 11, 8, 16, ring.gpu.ptr());
  EXPECT_EQ(Compare(Get(cpu_, ring.cpu), Get(*gpu_, ring.gpu)).mismatches, 0u);
}

TEST_F(CudaOpsTest, EmbedRowsMatchForEveryType) {
  const std::vector<int32_t> tokens = {3, 0, 7, 7, 1};
  auto tok = PutBoth(cpu_, *gpu_, tokens);
  for (DType t : kAllTypes) {
    auto w = PlaceBoth(cpu_, *gpu_, t, {256, 8, 1}, RandomWeightBytes(t, 256, 8, 11));
    auto o = PutBoth(cpu_, *gpu_, std::vector<float>(5 * 3 * 256));
    cpu_.EmbedRows(w->cpu, tok.cpu.ptr(), 5, 3, o.cpu.ptr());
    gpu_->EmbedRows(w->gpu, tok.gpu.ptr(), 5, 3, o.gpu.ptr());
    const Diff d = Compare(Get(cpu_, o.cpu), Get(*gpu_, o.gpu));
    EXPECT_LE(d.max_abs, 1e-6 * MaxAbs(Get(cpu_, o.cpu))) << GetDTypeInfo(t).name;
  }
}

// ds4's q8 dot products: the CUDA kernels fold block terms in ds4's order, so every output
// has the CPU's bits, for one token and for a batch.
TEST_F(CudaOpsTest, MatMulQ8IsBitIdenticalToCpu) {
  for (DType t : kQuantTypes) {
    for (int n : {768, 4096}) {
      const int rows = 37;
      auto w = PlaceBoth(cpu_, *gpu_, t, {uint64_t(n), uint64_t(rows), 1},
                         RandomWeightBytes(t, n, rows, 21 + n));
      for (int T : {1, 11}) {
        auto x = PutBoth(cpu_, *gpu_, RandomFloats(size_t(T) * n, 5 + T, -3, 3));
        auto y = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(T) * rows));
        cpu_.MatMul(w->cpu, x.cpu.ptr(), T, y.cpu.ptr(), ActQuantMode::kQ8);
        gpu_->MatMul(w->gpu, x.gpu.ptr(), T, y.gpu.ptr(), ActQuantMode::kQ8);
        const Diff d = Compare(Get(cpu_, y.cpu), Get(*gpu_, y.gpu));
        EXPECT_EQ(d.mismatches, 0u)
            << GetDTypeInfo(t).name << " n " << n << " T " << T << " max|d| " << d.max_abs;
      }
    }
  }
}

// fp32 activations (and F32/F16/BF16 weights in q8 mode, which take fp32 activations):
// within 1e-5 of Σ|w·x| per output.
TEST_F(CudaOpsTest, MatMulFp32MatchesCpu) {
  const int n = 512, rows = 45, T = 3;
  const auto xs = RandomFloats(size_t(T) * n, 9, -2, 2);
  for (DType t : kAllTypes) {
    const auto bytes = RandomWeightBytes(t, n, rows, 31);
    auto w = PlaceBoth(cpu_, *gpu_, t, {uint64_t(n), uint64_t(rows), 1}, bytes);
    // Bound per output from the dequantized weights.
    std::vector<float> wf(size_t(n) * rows);
    for (int r = 0; r < rows; ++r) {
      ASSERT_TRUE(
          DequantizeRow(t, bytes.data() + r * w->cpu.row_bytes, &wf[size_t(r) * n], n).ok());
    }
    for (ActQuantMode aq : {ActQuantMode::kOff, ActQuantMode::kQ8}) {
      const bool fp32_weights = t == DType::kF32 || t == DType::kF16 || t == DType::kBF16;
      if (aq == ActQuantMode::kQ8 && !fp32_weights) continue;
      auto x = PutBoth(cpu_, *gpu_, xs);
      auto y = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(T) * rows));
      cpu_.MatMul(w->cpu, x.cpu.ptr(), T, y.cpu.ptr(), aq);
      gpu_->MatMul(w->gpu, x.gpu.ptr(), T, y.gpu.ptr(), aq);
      const auto yc = Get(cpu_, y.cpu), yg = Get(*gpu_, y.gpu);
      for (int tk = 0; tk < T; ++tk) {
        for (int r = 0; r < rows; ++r) {
          double bound = 0;
          for (int i = 0; i < n; ++i)
            bound += std::fabs(wf[size_t(r) * n + i] * xs[size_t(tk) * n + i]);
          const size_t o = size_t(tk) * rows + r;
          EXPECT_LE(std::fabs(yc[o] - yg[o]), 1e-5 * bound + 1e-30)
              << GetDTypeInfo(t).name << " token " << tk << " row " << r;
        }
      }
    }
  }
}

// The batching contract: a token's outputs do not depend on the batch it is in.
TEST_F(CudaOpsTest, MatMulIsBatchInvariant) {
  const int n = 512, rows = 29, T = 13;
  const auto xs = RandomFloats(size_t(T) * n, 17, -2, 2);
  auto x = Put<float>(*gpu_, xs);
  for (DType t : kAllTypes) {
    const auto bytes = RandomWeightBytes(t, n, rows, 41);
    auto w = PlaceBoth(cpu_, *gpu_, t, {uint64_t(n), uint64_t(rows), 1}, bytes);
    for (ActQuantMode aq : {ActQuantMode::kOff, ActQuantMode::kQ8}) {
      auto batch = Put<float>(*gpu_, std::vector<float>(size_t(T) * rows));
      auto single = Put<float>(*gpu_, std::vector<float>(size_t(T) * rows));
      gpu_->MatMul(w->gpu, x.ptr(), T, batch.ptr(), aq);
      for (int tk = 0; tk < T; ++tk) {
        gpu_->MatMul(w->gpu, x.ptr() + size_t(tk) * n, 1, single.ptr() + size_t(tk) * rows, aq);
      }
      EXPECT_EQ(Compare(Get(*gpu_, batch), Get(*gpu_, single)).mismatches, 0u)
          << GetDTypeInfo(t).name << (aq == ActQuantMode::kQ8 ? " q8" : " off");
    }
  }
}

// One token of the ds4 decode types takes the block-per-tile kernels (device/matvec_tile.cuh): many
// tiles with a partial last one, rows of one to 256 blocks, rows that are not 16-byte
// multiples (their tiles start anywhere in a 16-byte piece), and a grouped projection whose
// tiles straddle the groups — every output with the CPU's bits. The 4,000-row case has more
// tiles than a looping grid (FLASHKV_CUDA_TILE_BLOCKS_PER_SM) has blocks.
TEST_F(CudaOpsTest, MatMulQ8OneTokenTilesAreBitIdenticalToCpu) {
  struct Shape {
    DType t;
    int n, rows;
  };
  // Q8_0 192 and 64: pairs of blocks that wrap rows within a pass (3 a row), one pair a row;
  // 32 and 96 (odd blocks a row) take the block-per-thread path.
  const Shape shapes[] = {
      {DType::kQ8_0, 1024, 300},  {DType::kQ8_0, 8192, 5},    {DType::kQ8_0, 4096, 131},
      {DType::kQ8_0, 32, 70},     {DType::kQ8_0, 96, 41},     {DType::kQ2_K, 2048, 100},
      {DType::kQ2_K, 768, 50},    {DType::kQ2_K, 256, 9},     {DType::kIQ2_XXS, 4096, 40},
      {DType::kIQ2_XXS, 768, 33}, {DType::kIQ2_XXS, 256, 70}, {DType::kQ8_0, 1024, 4000},
      {DType::kQ8_0, 192, 77},    {DType::kQ8_0, 64, 500}};
  for (const Shape& sh : shapes) {
    auto w = PlaceBoth(cpu_, *gpu_, sh.t, {uint64_t(sh.n), uint64_t(sh.rows), 1},
                       RandomWeightBytes(sh.t, sh.n, sh.rows, 71 + sh.n + sh.rows));
    auto x = PutBoth(cpu_, *gpu_, RandomFloats(size_t(sh.n), 72 + sh.rows, -3, 3));
    auto y = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(sh.rows)));
    cpu_.MatMul(w->cpu, x.cpu.ptr(), 1, y.cpu.ptr(), ActQuantMode::kQ8);
    gpu_->MatMul(w->gpu, x.gpu.ptr(), 1, y.gpu.ptr(), ActQuantMode::kQ8);
    const Diff d = Compare(Get(cpu_, y.cpu), Get(*gpu_, y.gpu));
    EXPECT_EQ(d.mismatches, 0u) << GetDTypeInfo(sh.t).name << " n " << sh.n << " rows " << sh.rows
                                << " max|d| " << d.max_abs;
  }
  const int in_g = 1024, groups = 4, rows_g = 40;  // 15-row tiles across 40-row groups
  auto w = PlaceBoth(cpu_, *gpu_, DType::kQ8_0, {uint64_t(in_g), uint64_t(rows_g * groups), 1},
                     RandomWeightBytes(DType::kQ8_0, in_g, rows_g * groups, 73));
  auto x = PutBoth(cpu_, *gpu_, RandomFloats(size_t(groups) * in_g, 74, -2, 2));
  auto y = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(groups) * rows_g));
  cpu_.MatMulGrouped(w->cpu, x.cpu.ptr(), 1, groups, y.cpu.ptr(), ActQuantMode::kQ8);
  gpu_->MatMulGrouped(w->gpu, x.gpu.ptr(), 1, groups, y.gpu.ptr(), ActQuantMode::kQ8);
  EXPECT_EQ(Compare(Get(cpu_, y.cpu), Get(*gpu_, y.gpu)).mismatches, 0u) << "grouped";
}

TEST_F(CudaOpsTest, MatMulGroupedMatchesCpu) {
  const int in_g = 256, groups = 4, rows_g = 24, T = 5;
  for (DType t : {DType::kQ8_0, DType::kF32, DType::kQ2_K}) {
    auto w = PlaceBoth(cpu_, *gpu_, t, {uint64_t(in_g), uint64_t(rows_g * groups), 1},
                       RandomWeightBytes(t, in_g, rows_g * groups, 51));
    for (ActQuantMode aq : {ActQuantMode::kOff, ActQuantMode::kQ8}) {
      auto x = PutBoth(cpu_, *gpu_, RandomFloats(size_t(T) * groups * in_g, 3, -2, 2));
      auto y = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(T) * groups * rows_g));
      cpu_.MatMulGrouped(w->cpu, x.cpu.ptr(), T, groups, y.cpu.ptr(), aq);
      gpu_->MatMulGrouped(w->gpu, x.gpu.ptr(), T, groups, y.gpu.ptr(), aq);
      const Diff d = Compare(Get(cpu_, y.cpu), Get(*gpu_, y.gpu));
      if (aq == ActQuantMode::kQ8 && t != DType::kF32) {
        EXPECT_EQ(d.mismatches, 0u) << GetDTypeInfo(t).name;
      } else {
        EXPECT_LE(d.max_abs, 1e-4) << GetDTypeInfo(t).name;
      }
    }
  }
}

TEST_F(CudaOpsTest, RmsNormAndRopeMatch) {
  const int rows = 7, n = 4096;
  const auto xs = RandomFloats(size_t(rows) * n, 61, -5, 5);
  const auto ws = RandomFloats(n, 62, 0.5f, 1.5f);
  auto wt = PlaceBoth(cpu_, *gpu_, DType::kF32, {uint64_t(n), 1, 1}, FloatBytes(ws));
  auto x = PutBoth(cpu_, *gpu_, xs);
  auto o = PutBoth(cpu_, *gpu_, std::vector<float>(xs.size()));
  cpu_.RmsNorm(x.cpu.ptr(), rows, n, &wt->cpu, 1e-6f, o.cpu.ptr());
  gpu_->RmsNorm(x.gpu.ptr(), rows, n, &wt->gpu, 1e-6f, o.gpu.ptr());
  EXPECT_LE(Compare(Get(cpu_, o.cpu), Get(*gpu_, o.gpu)).max_abs, 1e-5);
  // In place, no weight (per-head norm).
  cpu_.RmsNorm(x.cpu.ptr(), rows * 8, n / 8, nullptr, 1e-6f, x.cpu.ptr());
  gpu_->RmsNorm(x.gpu.ptr(), rows * 8, n / 8, nullptr, 1e-6f, x.gpu.ptr());
  EXPECT_LE(Compare(Get(cpu_, x.cpu), Get(*gpu_, x.gpu)).max_abs, 1e-5);

  // RoPE at large positions, forward and inverse, plain and YaRN, on [rows, 8 heads, 512].
  RopeParams plain;
  plain.n_rot = 64;
  plain.freq_base = 10000.0f;
  RopeParams yarn = plain;
  yarn.freq_base = 160000.0f;
  yarn.freq_scale = 1.0f / 16.0f;
  yarn.ext_factor = 1.0f;
  yarn.corr_lo = 15.0f;
  yarn.corr_hi = 25.0f;
  yarn.mscale = 1.0f;
  for (const RopeParams& rp : {plain, yarn}) {
    cpu_.Rope(x.cpu.ptr(), rows, 8, 512, rp, 1000003, 128, false);
    gpu_->Rope(x.gpu.ptr(), rows, 8, 512, rp, 1000003, 128, false);
    EXPECT_LE(Compare(Get(cpu_, x.cpu), Get(*gpu_, x.gpu)).max_abs, 1e-4);
    cpu_.Rope(x.cpu.ptr(), rows, 8, 512, rp, 77, 1, true);
    gpu_->Rope(x.gpu.ptr(), rows, 8, 512, rp, 77, 1, true);
    EXPECT_LE(Compare(Get(cpu_, x.cpu), Get(*gpu_, x.gpu)).max_abs, 1e-4);
  }
}

TEST_F(CudaOpsTest, Fp8AndHadamardFp4AreBitIdentical) {
  const int rows = 9, dim = 512;
  auto x = PutBoth(cpu_, *gpu_, RandomFloats(size_t(rows) * dim, 71, -40, 40));
  cpu_.Fp8RoundTrip(x.cpu.ptr(), rows, dim, 448);
  gpu_->Fp8RoundTrip(x.gpu.ptr(), rows, dim, 448);
  EXPECT_EQ(Compare(Get(cpu_, x.cpu), Get(*gpu_, x.gpu)).mismatches, 0u);
  auto h = PutBoth(cpu_, *gpu_, RandomFloats(size_t(rows) * 4 * 128, 72, -3, 3));
  cpu_.HadamardFp4(h.cpu.ptr(), rows * 4, 128);
  gpu_->HadamardFp4(h.gpu.ptr(), rows * 4, 128);
  EXPECT_EQ(Compare(Get(cpu_, h.cpu), Get(*gpu_, h.gpu)).mismatches, 0u);
}

TEST_F(CudaOpsTest, HyperConnectionsMatch) {
  const int n_hc = 4, D = 256, T = 6, mix = (2 + n_hc) * n_hc;
  HcParams p{n_hc, D, 20, 1e-6f, 1e-6f};
  std::vector<uint16_t> fn_h(size_t(n_hc) * D * mix);
  const auto fn_f = RandomFloats(fn_h.size(), 81, -0.05f, 0.05f);
  for (size_t i = 0; i < fn_h.size(); ++i) fn_h[i] = F32ToF16(fn_f[i]);
  std::vector<uint8_t> fn_bytes(fn_h.size() * 2);
  std::memcpy(fn_bytes.data(), fn_h.data(), fn_bytes.size());
  auto fn = PlaceBoth(cpu_, *gpu_, DType::kF16, {uint64_t(n_hc) * D, uint64_t(mix), 1}, fn_bytes);
  auto scale = PlaceBoth(cpu_, *gpu_, DType::kF32, {3, 1, 1}, FloatBytes({0.7f, 1.3f, 0.9f}));
  auto base = PlaceBoth(cpu_, *gpu_, DType::kF32, {uint64_t(mix), 1, 1},
                        FloatBytes(RandomFloats(mix, 82, -1, 1)));
  auto x = PutBoth(cpu_, *gpu_, RandomFloats(size_t(T) * n_hc * D, 83, -2, 2));
  auto u = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(T) * D));
  auto post = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(T) * n_hc));
  auto comb = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(T) * n_hc * n_hc));
  cpu_.HcPre(x.cpu.ptr(), T, fn->cpu, scale->cpu, base->cpu, p, u.cpu.ptr(), post.cpu.ptr(),
             comb.cpu.ptr());
  gpu_->HcPre(x.gpu.ptr(), T, fn->gpu, scale->gpu, base->gpu, p, u.gpu.ptr(), post.gpu.ptr(),
              comb.gpu.ptr());
  EXPECT_LE(Compare(Get(cpu_, u.cpu), Get(*gpu_, u.gpu)).max_abs, 1e-4);
  EXPECT_LE(Compare(Get(cpu_, post.cpu), Get(*gpu_, post.gpu)).max_abs, 1e-5);
  EXPECT_LE(Compare(Get(cpu_, comb.cpu), Get(*gpu_, comb.gpu)).max_abs, 1e-5);

  auto f = PutBoth(cpu_, *gpu_, RandomFloats(size_t(T) * D, 84, -2, 2));
  auto out = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(T) * n_hc * D));
  cpu_.HcPost(x.cpu.ptr(), f.cpu.ptr(), post.cpu.ptr(), comb.cpu.ptr(), T, p, out.cpu.ptr());
  gpu_->HcPost(x.gpu.ptr(), f.gpu.ptr(), post.gpu.ptr(), comb.gpu.ptr(), T, p, out.gpu.ptr());
  EXPECT_LE(Compare(Get(cpu_, out.cpu), Get(*gpu_, out.gpu)).max_abs, 1e-4);

  // HC head: fn [n_hc·D, n_hc], scale [1], base [n_hc].
  std::vector<uint16_t> hfn(size_t(n_hc) * D * n_hc);
  for (size_t i = 0; i < hfn.size(); ++i) hfn[i] = fn_h[i];
  std::vector<uint8_t> hfn_bytes(hfn.size() * 2);
  std::memcpy(hfn_bytes.data(), hfn.data(), hfn_bytes.size());
  auto head_fn =
      PlaceBoth(cpu_, *gpu_, DType::kF16, {uint64_t(n_hc) * D, uint64_t(n_hc), 1}, hfn_bytes);
  auto head_scale = PlaceBoth(cpu_, *gpu_, DType::kF32, {1, 1, 1}, FloatBytes({0.8f}));
  auto head_base = PlaceBoth(cpu_, *gpu_, DType::kF32, {uint64_t(n_hc), 1, 1},
                             FloatBytes(RandomFloats(n_hc, 85, -1, 1)));
  cpu_.HcHead(x.cpu.ptr(), T, head_fn->cpu, head_scale->cpu, head_base->cpu, p, u.cpu.ptr());
  gpu_->HcHead(x.gpu.ptr(), T, head_fn->gpu, head_scale->gpu, head_base->gpu, p, u.gpu.ptr());
  EXPECT_LE(Compare(Get(cpu_, u.cpu), Get(*gpu_, u.gpu)).max_abs, 1e-4);
}

// The frontier fed in uneven chunks; rows and state agree with the CPU's walk.
TEST_F(CudaOpsTest, CompressorMatchesCpuAcrossChunks) {
  for (int ratio : {4, 8}) {
    const bool overlap = ratio == 4;
    const int d = 64, c = overlap ? 2 : 1, width = c * d, total = 37;
    auto ape = PlaceBoth(cpu_, *gpu_, DType::kF32, {uint64_t(width), uint64_t(ratio), 1},
                         FloatBytes(RandomFloats(size_t(width) * ratio, 91, -1, 1)));
    const auto kv = RandomFloats(size_t(total) * width, 92, -2, 2);
    const auto sc = RandomFloats(size_t(total) * width, 93, -4, 4);
    auto kvb = PutBoth(cpu_, *gpu_, kv), scb = PutBoth(cpu_, *gpu_, sc);
    std::vector<float> score0(size_t(c) * ratio * width, -INFINITY);
    auto skv = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(c) * ratio * width));
    auto ssc = PutBoth(cpu_, *gpu_, score0);
    auto rows = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(total / ratio + 2) * d));
    int pos = 0;
    for (int n : {5, 1, 10, 21}) {
      CompressorArgs a{};
      a.ratio = ratio;
      a.overlap = overlap;
      a.d_c = d;
      a.pos0 = pos;
      a.n_tokens = n;
      for (bool g : {false, true}) {
        a.kv = (g ? kvb.gpu : kvb.cpu).ptr() + size_t(pos) * width;
        a.score = (g ? scb.gpu : scb.cpu).ptr() + size_t(pos) * width;
        a.ape = g ? &ape->gpu : &ape->cpu;
        a.state_kv = (g ? skv.gpu : skv.cpu).ptr();
        a.state_score = (g ? ssc.gpu : ssc.cpu).ptr();
        a.rows = (g ? rows.gpu : rows.cpu).ptr();
        if (g) {
          gpu_->CompressorUpdate(a);
        } else {
          cpu_.CompressorUpdate(a);
        }
      }
      pos += n;
    }
    EXPECT_LE(Compare(Get(cpu_, rows.cpu), Get(*gpu_, rows.gpu)).max_abs, 1e-5) << ratio;
    EXPECT_EQ(Compare(Get(cpu_, skv.cpu), Get(*gpu_, skv.gpu)).mismatches, 0u) << ratio;
    EXPECT_EQ(Compare(Get(cpu_, ssc.cpu), Get(*gpu_, ssc.gpu)).mismatches, 0u) << ratio;
  }
}

TEST_F(CudaOpsTest, IndexerTopKMatchesCpu) {
  const int heads = 8, dim = 32, ratio = 4, top_k = 6, T = 9, n_rows = 80;
  auto q = PutBoth(cpu_, *gpu_, RandomFloats(size_t(T) * heads * dim, 101, -1, 1));
  auto w = PutBoth(cpu_, *gpu_, RandomFloats(size_t(T) * heads, 102, -1, 1));
  // Rows 40..47 repeat row 40: equal scores, so the lowest ids must win.
  auto rows_h = RandomFloats(size_t(n_rows) * dim, 103, -1, 1);
  for (int r = 41; r < 48; ++r) std::copy_n(&rows_h[40 * dim], dim, &rows_h[size_t(r) * dim]);
  auto rows = PutBoth(cpu_, *gpu_, rows_h);
  for (int64_t pos0 : {0, 10, 300}) {
    auto sel = PutBoth(cpu_, *gpu_, std::vector<int32_t>(size_t(T) * top_k, 99));
    IndexerArgs a{};
    a.weight_scale = 0.1f;
    a.pos0 = pos0;
    a.n_tokens = T;
    a.n_heads = heads;
    a.dim = dim;
    a.ratio = ratio;
    a.top_k = top_k;
    a.q = q.cpu.ptr();
    a.weights = w.cpu.ptr();
    a.rows = rows.cpu.ptr();
    a.selected = sel.cpu.ptr();
    if (pos0 + T > n_rows * ratio) continue;
    cpu_.IndexerTopK(a);
    a.q = q.gpu.ptr();
    a.weights = w.gpu.ptr();
    a.rows = rows.gpu.ptr();
    a.selected = sel.gpu.ptr();
    gpu_->IndexerTopK(a);
    EXPECT_EQ(Get(cpu_, sel.cpu), Get(*gpu_, sel.gpu)) << "pos0 " << pos0;
  }
}

AttentionArgs AttnArgs(int64_t pos0, int T, int n_head, int d, int n_swa, int ratio, int top_k) {
  AttentionArgs a{};
  a.pos0 = pos0;
  a.n_tokens = T;
  a.n_head = n_head;
  a.head_dim = d;
  a.n_swa = n_swa;
  a.ratio = ratio;
  a.top_k = top_k;
  a.scale = 1.0f / std::sqrt(float(d));
  return a;
}

TEST_F(CudaOpsTest, AttentionMatchesCpuAndIsBatchInvariant) {
  const int n_head = 12, d = 64, n_swa = 16, T = 5;
  const int64_t pos0 = 150;
  auto sinks = PlaceBoth(cpu_, *gpu_, DType::kF32, {uint64_t(n_head), 1, 1},
                         FloatBytes(RandomFloats(n_head, 111, -1, 1)));
  auto q = PutBoth(cpu_, *gpu_, RandomFloats(size_t(T) * n_head * d, 112, -1, 1));
  auto kv = PutBoth(cpu_, *gpu_, RandomFloats(size_t(T) * d, 113, -1, 1));
  auto ring = PutBoth(cpu_, *gpu_, RandomFloats(size_t(n_swa) * d, 114, -1, 1));
  auto comp = PutBoth(cpu_, *gpu_, RandomFloats(size_t(60) * d, 115, -1, 1));
  // Selection: ascending ids, -1 padded.
  std::vector<int32_t> sel_h(size_t(T) * 8, -1);
  for (int t = 0; t < T; ++t) {
    for (int s = 0; s < 5 + (t % 3); ++s) sel_h[size_t(t) * 8 + s] = 3 * s + t;
  }
  auto sel = PutBoth(cpu_, *gpu_, sel_h);
  for (int ratio : {0, 4, 8}) {
    for (bool use_sel : {false, true}) {
      if (use_sel && ratio != 4) continue;
      auto out = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(T) * n_head * d));
      auto single = Put<float>(*gpu_, std::vector<float>(size_t(T) * n_head * d));
      for (int g = 0; g < 2; ++g) {
        AttentionArgs a = AttnArgs(pos0, T, n_head, d, n_swa, ratio, 8);
        a.q = g ? q.gpu.ptr() : q.cpu.ptr();
        a.kv_new = g ? kv.gpu.ptr() : kv.cpu.ptr();
        a.ring = g ? ring.gpu.ptr() : ring.cpu.ptr();
        a.comp_rows = g ? comp.gpu.ptr() : comp.cpu.ptr();
        if (use_sel) a.selected = g ? sel.gpu.ptr() : sel.cpu.ptr();
        a.sinks = g ? &sinks->gpu : &sinks->cpu;
        a.out = g ? out.gpu.ptr() : out.cpu.ptr();
        if (g) {
          gpu_->Attention(a);
        } else {
          cpu_.Attention(a);
        }
      }
      EXPECT_LE(Compare(Get(cpu_, out.cpu), Get(*gpu_, out.gpu)).max_abs, 2e-6)
          << "ratio " << ratio << " selected " << use_sel;
      // Token by token on the GPU: the ring must then hold the chunk's earlier rows, so
      // compare only the first token (it sees the same rows either way).
      AttentionArgs a = AttnArgs(pos0, 1, n_head, d, n_swa, ratio, 8);
      a.q = q.gpu.ptr();
      a.kv_new = kv.gpu.ptr();
      a.ring = ring.gpu.ptr();
      a.comp_rows = comp.gpu.ptr();
      if (use_sel) a.selected = sel.gpu.ptr();
      a.sinks = &sinks->gpu;
      a.out = single.ptr();
      gpu_->Attention(a);
      const auto batch_out = Get(*gpu_, out.gpu), single_out = Get(*gpu_, single);
      EXPECT_EQ(std::memcmp(batch_out.data(), single_out.data(), sizeof(float) * n_head * d), 0)
          << "ratio " << ratio;
    }
  }
}

TEST_F(CudaOpsTest, RouterMatchesCpu) {
  const int E = 64, k = 6, T = 7, vocab = 50;
  auto logits = PutBoth(cpu_, *gpu_, RandomFloats(size_t(T) * E, 121, -3, 3));
  auto bias = PlaceBoth(cpu_, *gpu_, DType::kF32, {uint64_t(E), 1, 1},
                        FloatBytes(RandomFloats(E, 122, -0.5f, 0.5f)));
  std::vector<int32_t> table(size_t(vocab) * k);
  for (size_t i = 0; i < table.size(); ++i) table[i] = int32_t((i * 37) % E);
  std::vector<uint8_t> table_bytes(table.size() * 4);
  std::memcpy(table_bytes.data(), table.data(), table_bytes.size());
  auto tid = PlaceBoth(cpu_, *gpu_, DType::kI32, {uint64_t(k), uint64_t(vocab), 1}, table_bytes);
  auto tokens = PutBoth(cpu_, *gpu_, std::vector<int32_t>{1, 4, 9, 49, 0, 3, 3});
  for (int mode = 0; mode < 3; ++mode) {  // plain top-k, biased top-k, hash
    auto sel = PutBoth(cpu_, *gpu_, std::vector<int32_t>(size_t(T) * k));
    auto wts = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(T) * k));
    for (int g = 0; g < 2; ++g) {
      RouterArgs a{};
      a.logits = g ? logits.gpu.ptr() : logits.cpu.ptr();
      a.bias = mode == 1 ? (g ? &bias->gpu : &bias->cpu) : nullptr;
      a.tid2eid = mode == 2 ? (g ? &tid->gpu : &tid->cpu) : nullptr;
      a.tokens = g ? tokens.gpu.ptr() : tokens.cpu.ptr();
      a.selected = g ? sel.gpu.ptr() : sel.cpu.ptr();
      a.weights = g ? wts.gpu.ptr() : wts.cpu.ptr();
      a.n_tokens = T;
      a.n_expert = E;
      a.n_used = k;
      a.weight_scale = 1.5f;
      if (g) {
        gpu_->RouterSelect(a);
      } else {
        cpu_.RouterSelect(a);
      }
    }
    EXPECT_EQ(Get(cpu_, sel.cpu), Get(*gpu_, sel.gpu)) << "mode " << mode;
    EXPECT_LE(Compare(Get(cpu_, wts.cpu), Get(*gpu_, wts.gpu)).max_abs, 1e-6) << "mode " << mode;
  }
}

// Routed experts in ds4's q2 mix (IQ2_XXS gate/up, Q2_K down) and in F32, both
// activation modes; then the same tokens one at a time must give the batch's bits.
TEST_F(CudaOpsTest, MoeExpertsMatchCpuAndAreBatchInvariant) {
  const int D = 512, F = 256, E = 8, k = 2, T = 11;
  const auto xs = RandomFloats(size_t(T) * D, 131, -1, 1);
  std::vector<int32_t> sel_h(size_t(T) * k);
  for (int t = 0; t < T; ++t) {
    sel_h[size_t(t) * k] = (t * 3) % E;
    sel_h[size_t(t) * k + 1] = (t * 5 + 1) % E;
  }
  const auto wts_h = RandomFloats(size_t(T) * k, 132, 0.2f, 1.0f);
  struct Mix {
    DType gate, down;
  };
  for (Mix m : {Mix{DType::kIQ2_XXS, DType::kQ2_K}, Mix{DType::kF32, DType::kF32},
                Mix{DType::kQ4_K, DType::kQ8_0}}) {
    auto gate = PlaceBoth(cpu_, *gpu_, m.gate, {uint64_t(D), uint64_t(F), uint64_t(E)},
                          RandomWeightBytes(m.gate, D, uint64_t(F) * E, 133, 0.1f));
    auto up = PlaceBoth(cpu_, *gpu_, m.gate, {uint64_t(D), uint64_t(F), uint64_t(E)},
                        RandomWeightBytes(m.gate, D, uint64_t(F) * E, 134, 0.1f));
    auto down = PlaceBoth(cpu_, *gpu_, m.down, {uint64_t(F), uint64_t(D), uint64_t(E)},
                          RandomWeightBytes(m.down, F, uint64_t(D) * E, 135, 0.1f));
    auto x = PutBoth(cpu_, *gpu_, xs);
    auto sel = PutBoth(cpu_, *gpu_, sel_h);
    auto wts = PutBoth(cpu_, *gpu_, wts_h);
    for (ActQuantMode aq : {ActQuantMode::kOff, ActQuantMode::kQ8}) {
      auto out = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(T) * D));
      for (int g = 0; g < 2; ++g) {
        MoeArgs a{};
        a.x = g ? x.gpu.ptr() : x.cpu.ptr();
        a.selected = g ? sel.gpu.ptr() : sel.cpu.ptr();
        a.weights = g ? wts.gpu.ptr() : wts.cpu.ptr();
        a.gate = g ? &gate->gpu : &gate->cpu;
        a.up = g ? &up->gpu : &up->cpu;
        a.down = g ? &down->gpu : &down->cpu;
        a.out = g ? out.gpu.ptr() : out.cpu.ptr();
        a.n_tokens = T;
        a.n_used = k;
        a.clamp = 10.0f;
        a.act_quant = aq;
        if (g) {
          gpu_->MoeExperts(a);
        } else {
          cpu_.MoeExperts(a);
        }
      }
      const auto oc = Get(cpu_, out.cpu), og = Get(*gpu_, out.gpu);
      // q8: a one-ulp difference in silu can flip one int8 of a requantized mid.
      const double tol = (aq == ActQuantMode::kQ8 ? 2e-3 : 1e-5) * std::max(1.0, MaxAbs(oc));
      EXPECT_LE(Compare(oc, og).max_abs, tol) << GetDTypeInfo(m.gate).name;

      auto single = Put<float>(*gpu_, std::vector<float>(size_t(T) * D));
      for (int t = 0; t < T; ++t) {
        MoeArgs a{};
        a.x = x.gpu.ptr() + size_t(t) * D;
        a.selected = sel.gpu.ptr() + size_t(t) * k;
        a.weights = wts.gpu.ptr() + size_t(t) * k;
        a.gate = &gate->gpu;
        a.up = &up->gpu;
        a.down = &down->gpu;
        a.out = single.ptr() + size_t(t) * D;
        a.n_tokens = 1;
        a.n_used = k;
        a.clamp = 10.0f;
        a.act_quant = aq;
        gpu_->MoeExperts(a);
      }
      EXPECT_EQ(Compare(og, Get(*gpu_, single)).mismatches, 0u) << GetDTypeInfo(m.gate).name;
    }
  }
}

// Many regions, some crossing the 16 MiB staging pieces, through both batched directions.
TEST_F(CudaOpsTest, BatchedTransfersRoundTrip) {
  const std::vector<size_t> sizes = {
      4, 1000, size_t(20) << 20, 12345, size_t(3) << 20, 1, size_t(17) << 20};
  const size_t total = std::accumulate(sizes.begin(), sizes.end(), size_t(0));
  std::vector<uint8_t> src(total), back(total, 0);
  std::mt19937 rng(141);
  for (auto& b : src) b = uint8_t(rng());
  auto dev = gpu_->Alloc(total);
  ASSERT_TRUE(dev.ok());
  std::vector<HostCopy> up, down;
  size_t off = 0;
  for (size_t n : sizes) {
    up.push_back({dev->as<uint8_t>() + off, src.data() + off, n});
    down.push_back({dev->as<uint8_t>() + off, back.data() + off, n});
    off += n;
  }
  ASSERT_TRUE(gpu_->WriteMany(up.data(), up.size()).ok());
  ASSERT_TRUE(gpu_->ReadMany(down.data(), down.size()).ok());
  EXPECT_EQ(src, back);
}

// A repeated launch sequence becomes a graph whose changed arguments are patched in; its
// results must equal direct launches.
TEST_F(CudaOpsTest, GraphReplayMatchesDirectLaunches) {
  CudaBackendOptions direct_opts;
  direct_opts.graphs = 0;
  auto direct = CudaBackend::Create(direct_opts);
  ASSERT_TRUE(direct.ok());
  CudaBackend* backends[2] = {gpu_, direct->get()};
  const auto xs = RandomFloats(4096, 151, -1, 1);
  std::vector<float> results[2];
  for (int b = 0; b < 2; ++b) {
    CudaBackend& be = *backends[b];
    auto x = Put<float>(be, xs);
    auto y = Put<float>(be, std::vector<float>(4096));
    RopeParams rp;
    rp.n_rot = 16;
    rp.freq_base = 10000.0f;
    for (int step = 0; step < 5; ++step) {
      for (int i = 0; i < 10; ++i) {  // positions change every step: patched arguments
        be.Rope(x.ptr(), 16, 4, 64, rp, step * 100 + i, 1, false);
        be.Add(x.ptr(), y.ptr(), y.ptr(), 4096);
      }
      results[b] = Get(be, y);
    }
  }
  EXPECT_EQ(Compare(results[0], results[1]).mismatches, 0u);
  EXPECT_GT(gpu_->graph_launches(), 0u);
}

}  // namespace
}  // namespace flashkv::testing
