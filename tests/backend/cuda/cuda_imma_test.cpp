// The int8 tensor-core kernels (src/backend/cuda/matmul_imma.cu for Q8_0 MatMul,
// moe_imma.cu for the IQ2_XXS expert gate/up and the Q2_K expert down) against their CPU twins and
// against the dp4a kernels they replace for prefill batches: bit for bit, for every tile variant,
// at token counts around the kernel threshold, odd row/token tails, grouped projections and Flash's
// real projection shapes. Each check also asserts, from
// the kernel profile, which kernel ran, so a silent fallback to the dp4a kernel (or the
// tensor-core kernel where it must not run) fails. Label `gpu`.
#include <algorithm>
#include <random>
#include <utility>

#include "cuda_test_util.h"

namespace flashkv::testing {
namespace {

constexpr int kVariants = 3;  // CudaBackendOptions::imma: 1..3 are tile shapes
// Rows per CTA tile of each variant (matmul_imma.cu): a grouped projection takes the
// tensor cores only when its groups are whole tiles.
constexpr int kTileRows[kVariants + 1] = {0, 128, 128, 64};

class CudaImmaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FLASHKV_REQUIRE_GPU();
    gpu_ = SharedCuda();
    gpu_->SetProfiling(true);  // every check looks at which kernel ran
  }
  void TearDown() override {
    if (gpu_ != nullptr) {
      gpu_->SetProfiling(false);
      gpu_->SetImma(1);
    }
  }

  // The names of the kernels that ran since the last call, one per line (and forgets the
  // profile).
  std::string KernelsRan() {
    std::string names;
    for (const CudaKernelTime& k : gpu_->ProfileTimes(true)) names += k.name + "\n";
    return names;
  }
  bool RanImma() { return KernelsRan().find("MatMulImmaQ8_0Kernel") != std::string::npos; }

  // y = W x (q8) on the GPU with tensor-core variant v (0: the dp4a kernels).
  std::vector<float> GpuMatMul(const Weight& w, const Buf<float>& x, int T, int groups, int v,
                               bool* ran_imma) {
    EXPECT_TRUE(gpu_->SetImma(v));
    const int rows = int(w.ne[1]);
    auto y = Put<float>(*gpu_, std::vector<float>(size_t(T) * rows, -7.0f));
    if (groups == 1) {
      gpu_->MatMul(w, x.ptr(), T, y.ptr(), ActQuantMode::kQ8);
    } else {
      gpu_->MatMulGrouped(w, x.ptr(), T, groups, y.ptr(), ActQuantMode::kQ8);
    }
    std::vector<float> out = Get(*gpu_, y);
    *ran_imma = RanImma();
    return out;
  }

  static bool WantImma(int v, int T, int n, int rows, int groups) {
    const bool tiles_fit = groups == 1 || (rows / groups) % kTileRows[v] == 0;
    return v > 0 && T >= kCudaImmaMinTokens && n % 256 == 0 && tiles_fit;
  }

  // Activations with exact zeros mixed in: a zero token and a zero block give d = 0 and
  // Σ = 0 terms, whose signed zeros must match too.
  static std::vector<float> Activations(int T, int n, uint32_t seed) {
    std::vector<float> x = RandomFloats(size_t(T) * n, seed, -3, 3);
    if (T > 2) std::fill(x.begin() + n, x.begin() + 2 * n, 0.0f);
    if (n >= 64) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
    return x;
  }

  // ds4's CPU dot products vs the dp4a kernels and every tensor-core variant. n: values per
  // row (per group); rows: all groups' rows.
  void CheckAgainstCpu(int n, int rows, int groups, const std::vector<int>& token_counts) {
    auto w = PlaceBoth(cpu_, *gpu_, DType::kQ8_0, {uint64_t(n), uint64_t(rows), 1},
                       RandomWeightBytes(DType::kQ8_0, n, rows, 1000 + n + rows));
    for (int T : token_counts) {
      auto x = PutBoth(cpu_, *gpu_, Activations(T, n * groups, 7 + T));
      auto yc = Put(cpu_, std::vector<float>(size_t(T) * rows));
      if (groups == 1) {
        cpu_.MatMul(w->cpu, x.cpu.ptr(), T, yc.ptr(), ActQuantMode::kQ8);
      } else {
        cpu_.MatMulGrouped(w->cpu, x.cpu.ptr(), T, groups, yc.ptr(), ActQuantMode::kQ8);
      }
      const std::vector<float> want = Get(cpu_, yc);
      for (int v = 0; v <= kVariants; ++v) {
        bool ran = false;
        const Diff d = Compare(want, GpuMatMul(w->gpu, x.gpu, T, groups, v, &ran));
        EXPECT_EQ(d.mismatches, 0u)
            << "n " << n << " rows " << rows << " groups " << groups << " T " << T << " variant "
            << v << ": max|d| " << d.max_abs << " at " << d.worst;
        EXPECT_EQ(ran, WantImma(v, T, n, rows, groups))
            << "n " << n << " rows " << rows << " groups " << groups << " T " << T << " variant "
            << v;
      }
    }
  }

  CpuBackend cpu_{nullptr};
  CudaBackend* gpu_ = nullptr;
};

// Small enough for compute-sanitizer (scripts/cuda-check.sh device imma runs it there).
TEST_F(CudaImmaTest, SmallShapesAreBitIdenticalToCpu) {
  const int thr = kCudaImmaMinTokens;
  // Rows: an odd tail (37), one below and two above a 64/128-row tile (127, 130, 200).
  const std::pair<int, int> shapes[] = {{256, 37}, {512, 130}, {768, 127}, {1024, 200}};
  for (const auto& [n, rows] : shapes) {
    CheckAgainstCpu(n, rows, 1, {1, 2, thr - 1, thr, thr + 1, 70});
  }
}

TEST_F(CudaImmaTest, SmallGroupedIsBitIdenticalToCpu) {
  // 128 rows per group: whole tiles for every variant; 96: none fits, the dp4a kernel
  // runs (still the same bits).
  CheckAgainstCpu(512, 4 * 128, 4, {kCudaImmaMinTokens, 70});
  CheckAgainstCpu(256, 2 * 96, 2, {70});
}

TEST_F(CudaImmaTest, FlashWidthsAreBitIdenticalToCpu) {
  // 4096- and 7168-wide rows (Flash's D; 28 pipeline stages), up to a 2,048-token chunk.
  CheckAgainstCpu(4096, 200, 1, {33, 301, 2048});
  CheckAgainstCpu(7168, 64, 1, {127, 500});
}

// Flash's Q8_0 projections (random:flash shapes) at a full prefill chunk and an odd tail:
// every variant equals the dp4a kernels bit for bit.
TEST_F(CudaImmaTest, FlashProjectionsEqualTheDp4aKernels) {
  struct Shape {
    const char* name;
    int n, rows, groups;
  };
  const Shape shapes[] = {{"attn_q_a", 4096, 1024, 1},      {"attn_q_b", 1024, 32768, 1},
                          {"attn_kv", 4096, 512, 1},        {"attn_output_a", 4096, 8 * 1024, 8},
                          {"attn_output_b", 8192, 4096, 1}, {"ffn_up_shexp", 4096, 2048, 1},
                          {"ffn_down_shexp", 2048, 4096, 1}};
  uint64_t seed = 77;
  for (const Shape& s : shapes) {
    auto w = gpu_->RandomWeight(s.name, DType::kQ8_0, {uint64_t(s.n), uint64_t(s.rows), 1}, seed++,
                                1.0f / 64);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (int T : {2048, 1001}) {
      auto x = Put<float>(*gpu_, Activations(T, s.n * s.groups, uint32_t(seed + T)));
      bool ran = false;
      const std::vector<float> old_bits = GpuMatMul(*w, x, T, s.groups, 0, &ran);
      EXPECT_FALSE(ran);
      for (int v = 1; v <= kVariants; ++v) {
        const Diff d = Compare(old_bits, GpuMatMul(*w, x, T, s.groups, v, &ran));
        EXPECT_TRUE(ran) << s.name << " variant " << v;
        EXPECT_EQ(d.mismatches, 0u) << s.name << " T " << T << " variant " << v << ": max|d| "
                                    << d.max_abs << " at " << d.worst;
      }
    }
  }
}

// Routed experts in ds4's q2 mix: the tensor-core gate/up (IQ2_XXS) and down (Q2_K) against
// the dp4a kernels, whole MoeExperts output bit for bit, and the CPU within the
// tolerance of cuda_ops_test's MoE check (a one-ulp silu difference can flip a requantized
// mid). D 256 is one super-block per row (ds4-tiny), 768 an odd count, 4096 Flash's.
TEST_F(CudaImmaTest, MoeExpertsEqualTheDp4aKernels) {
  struct Shape {
    int D, F, E, k, T;
  };
  for (const Shape& sh :
       {Shape{256, 256, 8, 2, 70}, Shape{768, 384, 5, 6, 41}, Shape{4096, 2048, 16, 6, 300}}) {
    const auto xs = RandomFloats(size_t(sh.T) * sh.D, 161 + sh.D, -1, 1);
    std::vector<int32_t> sel_h(size_t(sh.T) * sh.k);
    std::mt19937 rng(162);
    for (int t = 0; t < sh.T; ++t) {
      for (int j = 0; j < sh.k; ++j)
        sel_h[size_t(t) * sh.k + j] = int((t * 7 + j * 3 + rng() % 2) % sh.E);
    }
    const auto wts_h = RandomFloats(sel_h.size(), 163, 0.2f, 1.0f);
    const uint64_t D = sh.D, F = sh.F, E = sh.E;
    auto gate = PlaceBoth(cpu_, *gpu_, DType::kIQ2_XXS, {D, F, E},
                          RandomWeightBytes(DType::kIQ2_XXS, D, F * E, 164, 0.1f));
    auto up = PlaceBoth(cpu_, *gpu_, DType::kIQ2_XXS, {D, F, E},
                        RandomWeightBytes(DType::kIQ2_XXS, D, F * E, 165, 0.1f));
    auto down = PlaceBoth(cpu_, *gpu_, DType::kQ2_K, {F, D, E},
                          RandomWeightBytes(DType::kQ2_K, F, D * E, 166, 0.1f));
    auto x = PutBoth(cpu_, *gpu_, xs);
    auto sel = PutBoth(cpu_, *gpu_, sel_h);
    auto wts = PutBoth(cpu_, *gpu_, wts_h);
    std::vector<float> outs[2];
    for (int g = 0; g < 3; ++g) {  // CPU, GPU dp4a, GPU tensor cores
      auto out = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(sh.T) * sh.D));
      MoeArgs a{};
      a.x = g ? x.gpu.ptr() : x.cpu.ptr();
      a.selected = g ? sel.gpu.ptr() : sel.cpu.ptr();
      a.weights = g ? wts.gpu.ptr() : wts.cpu.ptr();
      a.gate = g ? &gate->gpu : &gate->cpu;
      a.up = g ? &up->gpu : &up->cpu;
      a.down = g ? &down->gpu : &down->cpu;
      a.out = g ? out.gpu.ptr() : out.cpu.ptr();
      a.n_tokens = sh.T;
      a.n_used = sh.k;
      a.clamp = 10.0f;
      a.act_quant = ActQuantMode::kQ8;
      if (g == 0) {
        cpu_.MoeExperts(a);
        outs[0] = Get(cpu_, out.cpu);
        continue;
      }
      ASSERT_TRUE(gpu_->SetImma(g == 1 ? 0 : 1));
      gpu_->MoeExperts(a);
      const std::vector<float> og = Get(*gpu_, out.gpu);
      const std::string ran = KernelsRan();
      EXPECT_EQ(ran.find("GateUpImmaIq2Kernel") != std::string::npos, g == 2) << "D " << sh.D;
      EXPECT_EQ(ran.find("DownImmaQ2KKernel") != std::string::npos, g == 2) << "D " << sh.D;
      const double tol = 2e-3 * std::max(1.0, MaxAbs(outs[0]));
      EXPECT_LE(Compare(outs[0], og).max_abs, tol) << "D " << sh.D << (g == 2 ? " imma" : "");
      if (g == 1) {
        outs[1] = og;
      } else {
        const Diff d = Compare(outs[1], og);
        EXPECT_EQ(d.mismatches, 0u)
            << "D " << sh.D << ": max|d| " << d.max_abs << " at " << d.worst;
      }
    }
  }
}

TEST_F(CudaImmaTest, UnknownVariantIsAnError) {
  EXPECT_FALSE(gpu_->SetImma(kVariants + 1));
  EXPECT_FALSE(gpu_->SetImma(-1));
  CudaBackendOptions o;
  o.imma = kVariants + 1;
  EXPECT_FALSE(CudaBackend::Create(o).ok());
}

}  // namespace
}  // namespace flashkv::testing
