// The int8 tensor-core kernels (src/backend/cuda/products/matmul_imma.cu for Q8_0 MatMul,
// products/moe_imma.cu for the IQ2_XXS expert gate/up and the Q2_K expert down) against their CPU
// twins and against the dp4a kernels they replace for prefill batches: bit for bit, for every tile
// variant, at token counts around the kernel threshold, odd row/token tails, grouped projections
// and Flash's real projection shapes. Each check also asserts, from the kernel profile, which
// kernel ran, so a silent fallback to the dp4a kernel (or the tensor-core kernel where it must not
// run) fails. Label `gpu`.
#include <algorithm>
#include <initializer_list>
#include <memory>
#include <utility>

#include "cuda_test_util.h"

namespace flashkv::testing {
namespace {

constexpr int kVariants = 3;  // CudaBackendOptions::imma: 1..3 are Q8_0 tile shapes
constexpr int kExpert32 = 4;  // 1's Q8_0 shape, experts in tiles of 32 pairs (not 64)
// Rows per CTA tile of each variant (products/matmul_imma.cu): a grouped projection takes the
// tensor cores only when its groups are whole tiles.
constexpr int kTileRows[kVariants + 1] = {0, 128, 128, 64};
// … and of the narrow tiles of batches up to kCudaImmaFewTokens (CudaBackendOptions::imma_few).
constexpr int kFewTileRows[kCudaImmaFewVariants + 1] = {0, 32, 64, 32};

struct MoeShape {
  int D, F, E, k, T;
  bool cpu;
  int narrow = kCudaMoeNarrowBelow;  // CudaBackendOptions::moe_narrow for this shape
};

class CudaImmaTest : public ::testing::Test {
 protected:
  // MoeExperts with tensor-core variants 0, 1 and kExpert32 (below).
  void CheckMoe(std::initializer_list<MoeShape> shapes);

  void SetUp() override {
    FLASHKV_REQUIRE_GPU();
    gpu_ = SharedCuda();
    gpu_->SetProfiling(true);  // every check looks at which kernel ran
  }
  void TearDown() override {
    if (gpu_ != nullptr) {
      gpu_->SetProfiling(false);
      gpu_->SetImma(1);
      gpu_->SetImmaFew(kCudaImmaFew);
      gpu_->SetMoeKernels(kCudaMoeGroupMaxTokens, kCudaMoeNarrowBelow);
      gpu_->SetQuantRows(false);
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
    if (v == 0) return false;  // the dp4a kernels (no tile size to divide by)
    const int tile_rows = T <= kCudaImmaFewTokens ? kFewTileRows[kCudaImmaFew] : kTileRows[v];
    const bool tiles_fit = groups == 1 || (rows / groups) % tile_rows == 0;
    return T >= kCudaImmaMinTokens && n % 256 == 0 && tiles_fit;
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

// The activation quantizer's two forms (CudaBackendOptions::quant_rows: a warp per block, or
// 8 lanes a block striding over rows) give the CPU's bits, also where a warp's 4 blocks span
// rows (3 blocks a row) and in grouped projections — and the switch picks the kernel.
TEST_F(CudaImmaTest, BothActivationQuantizersGiveTheCpuBits) {
  for (bool rows : {false, true}) {
    gpu_->SetQuantRows(rows);
    CheckAgainstCpu(96, 41, 1, {1, 3, 70});
    CheckAgainstCpu(256, 37, 1, {1, kCudaImmaMinTokens, 70});
    CheckAgainstCpu(512, 4 * 128, 4, {kCudaImmaMinTokens, 70});
    CheckAgainstCpu(4096, 64, 1, {301});
    auto w = PlaceBoth(cpu_, *gpu_, DType::kQ8_0, {256, 8, 1},
                       RandomWeightBytes(DType::kQ8_0, 256, 8, 5));
    auto x = Put(*gpu_, Activations(4, 256, 9));
    auto y = Put<float>(*gpu_, std::vector<float>(4 * 8));
    KernelsRan();
    gpu_->MatMul(w->gpu, x.ptr(), 4, y.ptr(), ActQuantMode::kQ8);
    const std::string ran = KernelsRan();
    EXPECT_EQ(ran.find("QuantizeQ8_0RowsKernel") != std::string::npos, rows) << ran;
  }
  gpu_->SetQuantRows(false);
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

// The narrow tiles of few-token batches (decode steps of several sessions, speculative verify
// steps): every shape, with the tensor cores from 2 tokens, at batch sizes around the tiles'
// 16 / 32 / 64 tokens, odd row tails and grouped projections of 64-row groups (whole tiles
// for every narrow shape, none of the prefill tiles' 128) — each bit-identical to the CPU,
// and each on the tensor cores.
TEST_F(CudaImmaTest, FewTokenTilesAreBitIdenticalToCpu) {
  struct Shape {
    int n, rows, groups;
  };
  const Shape shapes[] = {{256, 37, 1}, {512, 130, 1}, {1024, 4 * 64, 4}, {4096, 96, 1}};
  for (const Shape& s : shapes) {
    auto w = PlaceBoth(cpu_, *gpu_, DType::kQ8_0, {uint64_t(s.n), uint64_t(s.rows), 1},
                       RandomWeightBytes(DType::kQ8_0, s.n, s.rows, 2000 + s.n + s.rows));
    for (int T : {2, 5, 16, 17, 32, 33, 64}) {
      auto x = PutBoth(cpu_, *gpu_, Activations(T, s.n * s.groups, 11 + T));
      auto yc = Put(cpu_, std::vector<float>(size_t(T) * s.rows));
      if (s.groups == 1) {
        cpu_.MatMul(w->cpu, x.cpu.ptr(), T, yc.ptr(), ActQuantMode::kQ8);
      } else {
        cpu_.MatMulGrouped(w->cpu, x.cpu.ptr(), T, s.groups, yc.ptr(), ActQuantMode::kQ8);
      }
      const std::vector<float> want = Get(cpu_, yc);
      for (int few = 1; few <= kCudaImmaFewVariants; ++few) {
        ASSERT_TRUE(gpu_->SetImmaFew(few));
        ASSERT_TRUE(gpu_->SetImma(1, 2));
        auto y = Put<float>(*gpu_, std::vector<float>(size_t(T) * s.rows, -7.0f));
        if (s.groups == 1) {
          gpu_->MatMul(w->gpu, x.gpu.ptr(), T, y.ptr(), ActQuantMode::kQ8);
        } else {
          gpu_->MatMulGrouped(w->gpu, x.gpu.ptr(), T, s.groups, y.ptr(), ActQuantMode::kQ8);
        }
        const Diff d = Compare(want, Get(*gpu_, y));
        EXPECT_TRUE(RanImma()) << "n " << s.n << " rows " << s.rows << " T " << T << " few " << few;
        EXPECT_EQ(d.mismatches, 0u)
            << "n " << s.n << " rows " << s.rows << " groups " << s.groups << " T " << T << " few "
            << few << ": max|d| " << d.max_abs << " at " << d.worst;
      }
    }
  }
  EXPECT_FALSE(gpu_->SetImmaFew(kCudaImmaFewVariants + 1));
  EXPECT_FALSE(gpu_->SetImmaFew(-1));
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

// Routed experts in ds4's q2 mix: the tensor-core gate/up (IQ2_XXS) and down (Q2_K), in
// tiles of 64 pairs (variant 1), of 32 (kExpert32) and of 8 (the narrow tiles of decode
// batches), against the dp4a kernels, whole MoeExperts output bit for bit, and (small shapes)
// the CPU within the tolerance of cuda_ops_test's MoE check (a one-ulp silu difference can
// flip a requantized mid). D 256 is one super-block per row (ds4-tiny), 768 an odd count,
// 4096 Flash's width (weights generated on the GPU, no CPU twin: its CPU run would take
// minutes). Pairs per expert: 17.5 and 30.75 (tiles of 32 under every variant), 150 (64-pair
// tiles for both under variant 1: two full, one partial), 112.5 (gate/up in 64, down in 32:
// two tile lists); narrow tiles at 2.25 (threshold 4) and at 30.75 (threshold 100: four
// tiles an expert, the last partial); at Flash's width 1.9 and 1.5 pairs an expert
// (the 64-row decode step's mix), the grouped tiles off so the 5- and 16-token batches reach
// the tensor cores.
TEST_F(CudaImmaTest, SmallMoeExpertsEqualTheDp4aKernels) {
  CheckMoe({MoeShape{256, 256, 8, 2, 70, true}, MoeShape{768, 512, 8, 6, 41, true},
            MoeShape{256, 512, 8, 6, 200, true}, MoeShape{256, 256, 8, 2, 9, true, 4},
            MoeShape{768, 512, 8, 6, 41, true, 100}});
}

TEST_F(CudaImmaTest, MoeExpertsEqualTheDp4aKernels) {
  CheckMoe({MoeShape{4096, 2048, 16, 6, 300, false}, MoeShape{4096, 2048, 16, 6, 5, false, 4},
            MoeShape{4096, 2048, 64, 6, 16, false, 4}});
}

void CudaImmaTest::CheckMoe(std::initializer_list<MoeShape> shapes) {
  for (const MoeShape& sh : shapes) {
    const uint64_t D = sh.D, F = sh.F, E = sh.E;
    const auto xs = RandomFloats(size_t(sh.T) * sh.D, 161 + sh.D, -1, 1);
    std::vector<int32_t> sel_h(size_t(sh.T) * sh.k);
    for (int t = 0; t < sh.T; ++t) {  // k distinct experts per token
      for (int j = 0; j < sh.k; ++j) sel_h[size_t(t) * sh.k + j] = (t * 5 + j) % sh.E;
    }
    const auto wts_h = RandomFloats(sel_h.size(), 163, 0.2f, 1.0f);
    std::unique_ptr<WeightPair> gate, up, down;
    Weight g_gpu, u_gpu, d_gpu;
    if (sh.cpu) {
      gate = PlaceBoth(cpu_, *gpu_, DType::kIQ2_XXS, {D, F, E},
                       RandomWeightBytes(DType::kIQ2_XXS, D, F * E, 164, 0.1f));
      up = PlaceBoth(cpu_, *gpu_, DType::kIQ2_XXS, {D, F, E},
                     RandomWeightBytes(DType::kIQ2_XXS, D, F * E, 165, 0.1f));
      down = PlaceBoth(cpu_, *gpu_, DType::kQ2_K, {F, D, E},
                       RandomWeightBytes(DType::kQ2_K, F, D * E, 166, 0.1f));
      g_gpu = gate->gpu;
      u_gpu = up->gpu;
      d_gpu = down->gpu;
    } else {
      auto g = gpu_->RandomWeight("gate", DType::kIQ2_XXS, {D, F, E}, 164, 1.0f / 64);
      auto u = gpu_->RandomWeight("up", DType::kIQ2_XXS, {D, F, E}, 165, 1.0f / 64);
      auto d = gpu_->RandomWeight("down", DType::kQ2_K, {F, D, E}, 166, 1.0f / 45);
      ASSERT_TRUE(g.ok() && u.ok() && d.ok());
      g_gpu = *g;
      u_gpu = *u;
      d_gpu = *d;
    }
    auto x = PutBoth(cpu_, *gpu_, xs);
    auto sel = PutBoth(cpu_, *gpu_, sel_h);
    auto wts = PutBoth(cpu_, *gpu_, wts_h);
    auto args = [&](bool on_gpu, DevPtr<float> out) {
      MoeArgs a{};
      a.x = on_gpu ? x.gpu.ptr() : x.cpu.ptr();
      a.selected = on_gpu ? sel.gpu.ptr() : sel.cpu.ptr();
      a.weights = on_gpu ? wts.gpu.ptr() : wts.cpu.ptr();
      a.gate = on_gpu ? &g_gpu : &gate->cpu;
      a.up = on_gpu ? &u_gpu : &up->cpu;
      a.down = on_gpu ? &d_gpu : &down->cpu;
      a.out = out;
      a.n_tokens = sh.T;
      a.n_used = sh.k;
      a.clamp = 10.0f;
      a.act_quant = ActQuantMode::kQ8;
      return a;
    };
    std::vector<float> want;
    if (sh.cpu) {
      auto out = Put(cpu_, std::vector<float>(size_t(sh.T) * sh.D));
      cpu_.MoeExperts(args(false, out.ptr()));
      want = Get(cpu_, out);
    }
    std::vector<float> dp4a;
    // Variant 1 twice: with the gate/up kernel's grid copies (8- and 64-pair tiles on Hopper)
    // and with the one copy other GPUs get (SetMoeKernels' grid_copies).
    const std::pair<int, bool> runs[] = {{0, true}, {1, true}, {1, false}, {kExpert32, true}};
    for (const auto& [v, copies] : runs) {
      ASSERT_TRUE(gpu_->SetImma(v));
      ASSERT_TRUE(gpu_->SetMoeKernels(0, sh.narrow, copies));  // no grouped tiles
      auto out = Put<float>(*gpu_, std::vector<float>(size_t(sh.T) * sh.D));
      gpu_->MoeExperts(args(true, out.ptr()));
      const std::vector<float> got = Get(*gpu_, out);
      const std::string ran = KernelsRan();
      // Under variant 1, 8-pair tiles while the experts average fewer than sh.narrow pairs,
      // 64-pair tiles once they average 32 (gate/up) or 128 (down), ImmaMoePairs; the
      // mangled names say which: …KernelILi64EE….
      const auto tile = [&](int wide_from) {
        if (v != 1) return "ILi32E";
        if (sh.T * sh.k < sh.narrow * sh.E) return "ILi8E";
        return sh.T * sh.k >= wide_from * sh.E ? "ILi64E" : "ILi32E";
      };
      // …and the grid's copies: …KernelILi8ELi16EE… or …ILi8ELi1EE… (32-pair tiles: one).
      const std::string copies_of = std::string(tile(32)) == "ILi32E" || !copies ? "Li1E" : "Li16E";
      EXPECT_EQ(
          ran.find(std::string("GateUpImmaIq2Kernel") + tile(32) + copies_of) != std::string::npos,
          v != 0)
          << "D " << sh.D << " imma " << v << " copies " << copies << "\n"
          << ran;
      EXPECT_EQ(ran.find(std::string("DownImmaQ2KKernel") + tile(128)) != std::string::npos, v != 0)
          << "D " << sh.D << " imma " << v << "\n"
          << ran;
      if (sh.cpu) {
        EXPECT_LE(Compare(want, got).max_abs, 2e-3 * std::max(1.0, MaxAbs(want)))
            << "D " << sh.D << " imma " << v;
      }
      if (v == 0) {
        dp4a = got;
      } else {
        const Diff d = Compare(dp4a, got);
        EXPECT_EQ(d.mismatches, 0u) << "D " << sh.D << " imma " << v << " copies " << copies
                                    << ": max|d| " << d.max_abs << " at " << d.worst;
      }
    }
  }
}

TEST_F(CudaImmaTest, UnknownVariantIsAnError) {
  EXPECT_FALSE(gpu_->SetImma(kExpert32 + 1));
  EXPECT_FALSE(gpu_->SetImma(-1));
  CudaBackendOptions o;
  o.imma = kExpert32 + 1;
  EXPECT_FALSE(CudaBackend::Create(o).ok());
}

}  // namespace
}  // namespace flashkv::testing
