// The GGUF types beyond ds4's on the CUDA backend: MXFP4 (the 0731 / MXFP4_MOE experts) and
// Q3_K, Q5_K, Q6_K, IQ2_XS, IQ1_M, IQ3_XXS, IQ3_S, IQ2_S, IQ1_S, IQ4_XS, IQ4_NL (llama.cpp's
// K-quant and IQ presets). Products with q8
// activations are the CPU's DotQ8 bit for bit (plain batches, decode and prefill, grouped
// projections; expert tiles through MoeExperts), and one token at a time equals a batch.
// Types without kernels (Q4_0, TQ1_0, ...) are refused by PlaceWeight before anything
// is uploaded, the tensor and type named. Label `gpu`.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "../../tensor/test_blocks.h"
#include "cuda_test_util.h"
#include "tensor/quant.h"
#include "tensor/quant_blocks.h"

namespace flashkv::testing {
namespace {

TEST(CudaFormats, TypesWithoutKernelsAreRefusedAtPlacement) {
  FLASHKV_REQUIRE_GPU();
  CudaBackend* gpu = SharedCuda();
  for (DType t : {DType::kQ4_0, DType::kQ5_0, DType::kTQ1_0}) {
    const uint64_t ne0 = 256, rows = 4;
    std::vector<uint8_t> bytes(*RowBytes(t, ne0) * rows, 0);
    WeightSource src{"blk.0.ffn_gate_exps.weight", t, {ne0, rows, 1}, bytes.data(), bytes.size()};
    const auto w = gpu->PlaceWeight(src);
    ASSERT_FALSE(w.ok()) << GetDTypeInfo(t).name;
    EXPECT_EQ(w.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(w.status().message().find("blk.0.ffn_gate_exps.weight has type " +
                                        std::string(GetDTypeInfo(t).name)),
              std::string::npos)
        << w.status().message();
  }
  for (DType t : {DType::kQ8_0, DType::kMXFP4, DType::kQ3_K, DType::kQ5_K, DType::kQ6_K,
                  DType::kIQ2_XS, DType::kIQ1_M, DType::kIQ3_XXS, DType::kIQ3_S, DType::kIQ2_S,
                  DType::kIQ1_S, DType::kIQ4_NL, DType::kIQ4_XS}) {
    std::vector<uint8_t> b(*RowBytes(t, 256) * 4, 0);
    WeightSource ok{"w", t, {256, 4, 1}, b.data(), b.size()};
    EXPECT_TRUE(gpu->PlaceWeight(ok).ok()) << GetDTypeInfo(t).name;
  }
}

// Random MXFP4 blocks (flashkv has no MXFP4 quantizer): every nibble, scales 2^-10 .. 2^3,
// and the extreme scale bytes 0, 1 and 254 in the first blocks.
std::vector<uint8_t> RandomMxfp4(uint64_t n, uint64_t rows, uint32_t seed) {
  std::vector<uint8_t> out(n / kQKMxfp4 * sizeof(BlockMXFP4) * rows);
  std::mt19937 rng(seed);
  for (auto& b : out) b = uint8_t(rng());
  const uint64_t blocks = out.size() / sizeof(BlockMXFP4);
  for (uint64_t b = 0; b < blocks; ++b) out[b * sizeof(BlockMXFP4)] = uint8_t(118 + rng() % 14);
  out[0] = 0;
  out[sizeof(BlockMXFP4)] = 1;
  out[2 * sizeof(BlockMXFP4)] = 254;
  return out;
}

// fp32 activations (act-quant off): the GPU's fp32 order (per-lane fused chains, an xor tree)
// against the CPU's DotF32 (double); each output within the fp32 summation bound n · 2^-24 ·
// Σ |w x| (the terms from DequantizeRow). The worst ratio to that bound is printed.
void ExpectF32MatMulWithinBound(CpuBackend& cpu, CudaBackend& gpu, DType type,
                                const std::vector<uint8_t>& bytes, int n, int rows) {
  auto w = PlaceBoth(cpu, gpu, type, {uint64_t(n), uint64_t(rows), 1}, bytes);
  const int T = 3;
  const auto xs = RandomFloats(size_t(T) * n, 5, -3, 3);
  auto x = PutBoth(cpu, gpu, xs);
  auto y = PutBoth(cpu, gpu, std::vector<float>(size_t(T) * rows));
  cpu.MatMul(w->cpu, x.cpu.ptr(), T, y.cpu.ptr(), ActQuantMode::kOff);
  gpu.MatMul(w->gpu, x.gpu.ptr(), T, y.gpu.ptr(), ActQuantMode::kOff);
  ASSERT_TRUE(gpu.Synchronize().ok());
  const auto yc = Get(cpu, y.cpu), yg = Get(gpu, y.gpu);
  const uint64_t row_bytes = *RowBytes(type, uint64_t(n));
  std::vector<float> wd(static_cast<size_t>(n));
  double worst = 0.0;
  for (int r = 0; r < rows; ++r) {
    ASSERT_TRUE(DequantizeRow(type, bytes.data() + r * row_bytes, wd.data(), n).ok());
    for (int t = 0; t < T; ++t) {
      double mag = 0.0;
      for (int i = 0; i < n; ++i) mag += std::fabs(double(wd[size_t(i)]) * xs[size_t(t) * n + i]);
      const double unit = mag * std::ldexp(1.0, -24);
      const size_t i = size_t(t) * rows + r;
      const double d = std::fabs(double(yc[i]) - double(yg[i]));
      ASSERT_LE(d, n * unit + 1e-30) << GetDTypeInfo(type).name << " row " << r << " t " << t;
      worst = std::max(worst, d / (unit + 1e-30));
    }
  }
  std::printf("%s n %d: act-quant off, max |gpu - cpu| = %.2f x 2^-24 sum|w x| (bound %d)\n",
              GetDTypeInfo(type).name.data(), n, worst, n);
}

class CudaMxfp4Test : public ::testing::Test {
 protected:
  void SetUp() override {
    FLASHKV_REQUIRE_GPU();
    gpu_ = SharedCuda();
  }
  CpuBackend cpu_{nullptr};
  CudaBackend* gpu_ = nullptr;
};

TEST_F(CudaMxfp4Test, MatMulQ8IsBitIdenticalToCpu) {
  // 33 blocks: a row longer than one pass of the warp; 4096: Flash's width.
  for (int n : {256, 1056, 4096}) {
    const int rows = 37;
    auto w = PlaceBoth(cpu_, *gpu_, DType::kMXFP4, {uint64_t(n), uint64_t(rows), 1},
                       RandomMxfp4(n, rows, 41 + n));
    for (int T : {1, 11}) {
      auto x = PutBoth(cpu_, *gpu_, RandomFloats(size_t(T) * n, 7 + T, -3, 3));
      auto y = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(T) * rows));
      cpu_.MatMul(w->cpu, x.cpu.ptr(), T, y.cpu.ptr(), ActQuantMode::kQ8);
      gpu_->MatMul(w->gpu, x.gpu.ptr(), T, y.gpu.ptr(), ActQuantMode::kQ8);
      ASSERT_TRUE(gpu_->Synchronize().ok());
      const Diff d = Compare(Get(cpu_, y.cpu), Get(*gpu_, y.gpu));
      EXPECT_EQ(d.mismatches, 0u) << "n " << n << " T " << T << " max|d| " << d.max_abs;
    }
  }
}

TEST_F(CudaMxfp4Test, MatMulF32IsWithinTheFp32BoundOfCpu) {
  for (int n : {256, 4096}) {
    auto bytes = RandomMxfp4(n, 19, 9);
    // Scale byte 254 (2^127) overflows an fp32 sum to inf in both backends (the CPU's double
    // sum rounds to inf too), which says nothing about the order; 0 and 1 stay.
    bytes[2 * sizeof(BlockMXFP4)] = 127;
    ExpectF32MatMulWithinBound(cpu_, *gpu_, DType::kMXFP4, bytes, n, 19);
  }
}

TEST_F(CudaMxfp4Test, MoeExpertsMatchCpuAndAreBatchInvariant) {
  const int D = 512, F = 256, E = 8, k = 2, T = 11;
  const auto xs = RandomFloats(size_t(T) * D, 151, -1, 1);
  std::vector<int32_t> sel_h(size_t(T) * k);
  for (int t = 0; t < T; ++t) {
    sel_h[size_t(t) * k] = (t * 3) % E;
    sel_h[size_t(t) * k + 1] = (t * 5 + 1) % E;
  }
  const auto wts_h = RandomFloats(size_t(T) * k, 152, 0.2f, 1.0f);
  auto gate = PlaceBoth(cpu_, *gpu_, DType::kMXFP4, {uint64_t(D), uint64_t(F), uint64_t(E)},
                        RandomMxfp4(D, uint64_t(F) * E, 153));
  auto up = PlaceBoth(cpu_, *gpu_, DType::kMXFP4, {uint64_t(D), uint64_t(F), uint64_t(E)},
                      RandomMxfp4(D, uint64_t(F) * E, 154));
  auto down = PlaceBoth(cpu_, *gpu_, DType::kMXFP4, {uint64_t(F), uint64_t(D), uint64_t(E)},
                        RandomMxfp4(F, uint64_t(D) * E, 155));
  auto x = PutBoth(cpu_, *gpu_, xs);
  auto sel = PutBoth(cpu_, *gpu_, sel_h);
  auto wts = PutBoth(cpu_, *gpu_, wts_h);
  auto out = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(T) * D));
  auto args = [&](bool g, int t0, int nt, DevPtr<float> o) {
    MoeArgs a{};
    a.x = (g ? x.gpu.ptr() : x.cpu.ptr()) + size_t(t0) * D;
    a.selected = (g ? sel.gpu.ptr() : sel.cpu.ptr()) + size_t(t0) * k;
    a.weights = (g ? wts.gpu.ptr() : wts.cpu.ptr()) + size_t(t0) * k;
    a.gate = g ? &gate->gpu : &gate->cpu;
    a.up = g ? &up->gpu : &up->cpu;
    a.down = g ? &down->gpu : &down->cpu;
    a.out = o + size_t(t0) * D;
    a.n_tokens = nt;
    a.n_used = k;
    a.clamp = 10.0f;
    a.act_quant = ActQuantMode::kQ8;
    return a;
  };
  cpu_.MoeExperts(args(false, 0, T, out.cpu.ptr()));
  gpu_->MoeExperts(args(true, 0, T, out.gpu.ptr()));
  ASSERT_TRUE(gpu_->Synchronize().ok());
  const auto oc = Get(cpu_, out.cpu), og = Get(*gpu_, out.gpu);
  // The products are the CPU's bits; a one-ulp difference in silu can flip one int8 of the
  // requantized mid, as for the other types (cuda_ops_test).
  EXPECT_LE(Compare(oc, og).max_abs, 2e-3 * std::max(1.0, MaxAbs(oc)));
  auto single = Put<float>(*gpu_, std::vector<float>(size_t(T) * D));
  for (int t = 0; t < T; ++t) gpu_->MoeExperts(args(true, t, 1, single.ptr()));
  ASSERT_TRUE(gpu_->Synchronize().ok());
  EXPECT_EQ(Compare(og, Get(*gpu_, single)).mismatches, 0u);
}

// The K-quant / IQ kernels (products/kquant_matvec.cu; IQ4_NL: products/mxfp4_matvec.cu), one
// instance per type.
class CudaKQuantTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    FLASHKV_REQUIRE_GPU();
    gpu_ = SharedCuda();
  }
  CpuBackend cpu_{nullptr};
  CudaBackend* gpu_ = nullptr;
};

TEST_P(CudaKQuantTest, MatMulQ8IsBitIdenticalToCpu) {
  const DType type = GetParam();
  // 5 blocks: fewer than a warp's lanes have work in the fold; 4096: Flash's width.
  for (int n : {256, 1280, 4096}) {
    const int rows = 37;
    auto w = PlaceBoth(cpu_, *gpu_, type, {uint64_t(n), uint64_t(rows), 1},
                       RandomRows(type, rows, n, 41 + uint32_t(n)));
    for (int T : {1, 11}) {
      auto x = PutBoth(cpu_, *gpu_, RandomFloats(size_t(T) * n, 7 + T, -3, 3));
      auto y = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(T) * rows));
      cpu_.MatMul(w->cpu, x.cpu.ptr(), T, y.cpu.ptr(), ActQuantMode::kQ8);
      gpu_->MatMul(w->gpu, x.gpu.ptr(), T, y.gpu.ptr(), ActQuantMode::kQ8);
      ASSERT_TRUE(gpu_->Synchronize().ok());
      const Diff d = Compare(Get(cpu_, y.cpu), Get(*gpu_, y.gpu));
      EXPECT_EQ(d.mismatches, 0u) << GetDTypeInfo(type).name << " n " << n << " T " << T
                                  << " max|d| " << d.max_abs;
    }
  }
  // Grouped (attn_output_a's shape): 4 groups of 512 inputs, 16 rows each.
  const int in_g = 512, groups = 4, r = 16, T = 5;
  auto w = PlaceBoth(cpu_, *gpu_, type, {uint64_t(in_g), uint64_t(groups * r), 1},
                     RandomRows(type, groups * r, in_g, 77));
  auto x = PutBoth(cpu_, *gpu_, RandomFloats(size_t(T) * groups * in_g, 78, -2, 2));
  auto y = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(T) * groups * r));
  cpu_.MatMulGrouped(w->cpu, x.cpu.ptr(), T, groups, y.cpu.ptr(), ActQuantMode::kQ8);
  gpu_->MatMulGrouped(w->gpu, x.gpu.ptr(), T, groups, y.gpu.ptr(), ActQuantMode::kQ8);
  ASSERT_TRUE(gpu_->Synchronize().ok());
  EXPECT_EQ(Compare(Get(cpu_, y.cpu), Get(*gpu_, y.gpu)).mismatches, 0u)
      << GetDTypeInfo(type).name << " grouped";
}

TEST_P(CudaKQuantTest, MatMulF32IsWithinTheFp32BoundOfCpu) {
  const DType type = GetParam();
  for (int n : {256, 4096})
    ExpectF32MatMulWithinBound(cpu_, *gpu_, type, RandomRows(type, 19, n, 3), n, 19);
}

TEST_P(CudaKQuantTest, EmbedRowsAreTheCpuBits) {
  const DType type = GetParam();
  const int n = 768, vocab = 40;
  auto w = PlaceBoth(cpu_, *gpu_, type, {uint64_t(n), uint64_t(vocab), 1},
                     RandomRows(type, vocab, n, 61));
  auto tok = PutBoth(cpu_, *gpu_, std::vector<int32_t>{3, 39, 0, 17, 3});
  auto o = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(5) * 3 * n));
  cpu_.EmbedRows(w->cpu, tok.cpu.ptr(), 5, 3, o.cpu.ptr());
  gpu_->EmbedRows(w->gpu, tok.gpu.ptr(), 5, 3, o.gpu.ptr());
  ASSERT_TRUE(gpu_->Synchronize().ok());
  EXPECT_EQ(Compare(Get(cpu_, o.cpu), Get(*gpu_, o.gpu)).mismatches, 0u) << GetDTypeInfo(type).name;
}

TEST_P(CudaKQuantTest, MoeExpertsMatchCpuAndAreBatchInvariant) {
  const DType type = GetParam();
  const int D = 512, F = 256, E = 8, k = 2, T = 11;
  const auto xs = RandomFloats(size_t(T) * D, 151, -1, 1);
  std::vector<int32_t> sel_h(size_t(T) * k);
  for (int t = 0; t < T; ++t) {
    sel_h[size_t(t) * k] = (t * 3) % E;
    sel_h[size_t(t) * k + 1] = (t * 5 + 1) % E;
  }
  const auto wts_h = RandomFloats(size_t(T) * k, 152, 0.2f, 1.0f);
  auto gate = PlaceBoth(cpu_, *gpu_, type, {uint64_t(D), uint64_t(F), uint64_t(E)},
                        RandomRows(type, int64_t(F) * E, D, 153));
  auto up = PlaceBoth(cpu_, *gpu_, type, {uint64_t(D), uint64_t(F), uint64_t(E)},
                      RandomRows(type, int64_t(F) * E, D, 154));
  auto down = PlaceBoth(cpu_, *gpu_, type, {uint64_t(F), uint64_t(D), uint64_t(E)},
                        RandomRows(type, int64_t(D) * E, F, 155));
  auto x = PutBoth(cpu_, *gpu_, xs);
  auto sel = PutBoth(cpu_, *gpu_, sel_h);
  auto wts = PutBoth(cpu_, *gpu_, wts_h);
  auto out = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(T) * D));
  auto args = [&](bool g, int t0, int nt, DevPtr<float> o) {
    MoeArgs a{};
    a.x = (g ? x.gpu.ptr() : x.cpu.ptr()) + size_t(t0) * D;
    a.selected = (g ? sel.gpu.ptr() : sel.cpu.ptr()) + size_t(t0) * k;
    a.weights = (g ? wts.gpu.ptr() : wts.cpu.ptr()) + size_t(t0) * k;
    a.gate = g ? &gate->gpu : &gate->cpu;
    a.up = g ? &up->gpu : &up->cpu;
    a.down = g ? &down->gpu : &down->cpu;
    a.out = o + size_t(t0) * D;
    a.n_tokens = nt;
    a.n_used = k;
    a.clamp = 10.0f;
    a.act_quant = ActQuantMode::kQ8;
    return a;
  };
  cpu_.MoeExperts(args(false, 0, T, out.cpu.ptr()));
  gpu_->MoeExperts(args(true, 0, T, out.gpu.ptr()));
  ASSERT_TRUE(gpu_->Synchronize().ok());
  const auto oc = Get(cpu_, out.cpu), og = Get(*gpu_, out.gpu);
  // The products are the CPU's bits; a one-ulp difference in silu can flip one int8 of the
  // requantized mid, as for the other types (cuda_ops_test).
  EXPECT_LE(Compare(oc, og).max_abs, 2e-3 * std::max(1.0, MaxAbs(oc))) << GetDTypeInfo(type).name;
  auto single = Put<float>(*gpu_, std::vector<float>(size_t(T) * D));
  for (int t = 0; t < T; ++t) gpu_->MoeExperts(args(true, t, 1, single.ptr()));
  ASSERT_TRUE(gpu_->Synchronize().ok());
  EXPECT_EQ(Compare(og, Get(*gpu_, single)).mismatches, 0u) << GetDTypeInfo(type).name;
}

INSTANTIATE_TEST_SUITE_P(Types, CudaKQuantTest,
                         ::testing::Values(DType::kQ3_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ2_XS,
                                           DType::kIQ1_M, DType::kIQ3_XXS, DType::kIQ3_S,
                                           DType::kIQ2_S, DType::kIQ1_S, DType::kIQ4_XS,
                                           DType::kIQ4_NL),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(GetDTypeInfo(info.param).name);
                         });

}  // namespace
}  // namespace flashkv::testing
