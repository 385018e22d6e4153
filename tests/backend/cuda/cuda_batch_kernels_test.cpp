// The batched decode-row kernels (src/backend/cuda/matvec_batch.cu, issue #18): a batch of
// 2–64 activation rows gives every row the bits of that row alone (the one-token tile
// kernels) and of the CPU — Q8_0 products through both variants (weight words from
// registers for ≤ 8 rows, staged in shared memory for more), rows the staged variant does not
// take, a grouped projection, and routed experts whose tiles stage each expert once for its
// pairs — and the profile names the kernel that ran. Label `gpu`.
#include <string>

#include "cuda_test_util.h"

namespace flashkv::testing {
namespace {

class CudaBatchKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FLASHKV_REQUIRE_GPU();
    gpu_ = SharedCuda();
    gpu_->SetProfiling(true);  // the checks look at which kernel ran
  }
  void TearDown() override {
    if (gpu_ != nullptr) gpu_->SetProfiling(false);
  }
  std::string KernelsRan() {
    std::string names;
    for (const CudaKernelTime& k : gpu_->ProfileTimes(true)) names += k.name + "\n";
    return names;
  }
  CpuBackend cpu_{nullptr};
  CudaBackend* gpu_ = nullptr;
};

bool Has(const std::string& names, const char* kernel) {
  return names.find(kernel) != std::string::npos;
}

TEST_F(CudaBatchKernelsTest, Q8_0RowsAreBitIdenticalAloneAndInEveryBatch) {
  struct Shape {
    int n, rows;
    bool staged;  // rows of a multiple of 1,024 values take the staged variant from 9 rows on
  };
  // 4096 × 300: many blocks and a partial last one; 1024 × 77: one chunk a row; 192: pairs but
  // no whole chunk (register variant at every batch size).
  const Shape shapes[] = {{4096, 300, true}, {1024, 77, true}, {192, 50, false}};
  for (const Shape& sh : shapes) {
    auto w = PlaceBoth(cpu_, *gpu_, DType::kQ8_0, {uint64_t(sh.n), uint64_t(sh.rows), 1},
                       RandomWeightBytes(DType::kQ8_0, sh.n, sh.rows, 301 + sh.n));
    constexpr int kMaxT = 64;
    const auto xs = RandomFloats(size_t(kMaxT) * sh.n, 302 + sh.rows, -3, 3);
    auto x = PutBoth(cpu_, *gpu_, xs);
    // Every row alone (the one-token tile kernel) and on the CPU.
    auto alone = Put<float>(*gpu_, std::vector<float>(size_t(kMaxT) * sh.rows));
    for (int t = 0; t < kMaxT; ++t) {
      gpu_->MatMul(w->gpu, x.gpu.ptr() + size_t(t) * sh.n, 1, alone.ptr() + size_t(t) * sh.rows,
                   ActQuantMode::kQ8);
    }
    const auto want = Get(*gpu_, alone);
    auto ycpu = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(kMaxT) * sh.rows));
    cpu_.MatMul(w->cpu, x.cpu.ptr(), kMaxT, ycpu.cpu.ptr(), ActQuantMode::kQ8);
    EXPECT_EQ(Compare(Get(cpu_, ycpu.cpu), want).mismatches, 0u) << "n " << sh.n << " vs CPU";
    KernelsRan();
    for (int T : {2, 3, 4, 5, 8, 9, 16, 17, 31, 40, 64}) {
      auto y = Put<float>(*gpu_, std::vector<float>(size_t(T) * sh.rows, -7.0f));
      gpu_->MatMul(w->gpu, x.gpu.ptr(), T, y.ptr(), ActQuantMode::kQ8);
      const auto got = Get(*gpu_, y);
      const std::vector<float> head(want.begin(), want.begin() + size_t(T) * sh.rows);
      EXPECT_EQ(Compare(got, head).mismatches, 0u) << "n " << sh.n << " T " << T;
      const std::string ran = KernelsRan();
      if (T < kCudaImmaMinTokens) {
        const bool smem = sh.staged && T > 8;
        EXPECT_TRUE(Has(ran, smem ? "MatVecBatchSmemQ8_0Kernel" : "MatVecBatchQ8_0Kernel"))
            << "n " << sh.n << " T " << T << ":\n"
            << ran;
      }
    }
  }
}

TEST_F(CudaBatchKernelsTest, GroupedQ8_0ProjectionIsBitIdenticalAloneAndBatched) {
  const int in_g = 1024, groups = 4, rows_g = 40, T = 12;
  auto w = PlaceBoth(cpu_, *gpu_, DType::kQ8_0, {uint64_t(in_g), uint64_t(rows_g * groups), 1},
                     RandomWeightBytes(DType::kQ8_0, in_g, rows_g * groups, 311));
  auto x = PutBoth(cpu_, *gpu_, RandomFloats(size_t(T) * groups * in_g, 312, -2, 2));
  auto y = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(T) * groups * rows_g));
  cpu_.MatMulGrouped(w->cpu, x.cpu.ptr(), T, groups, y.cpu.ptr(), ActQuantMode::kQ8);
  KernelsRan();
  gpu_->MatMulGrouped(w->gpu, x.gpu.ptr(), T, groups, y.gpu.ptr(), ActQuantMode::kQ8);
  EXPECT_TRUE(Has(KernelsRan(), "MatVecBatchSmemQ8_0Kernel"));
  const auto got = Get(*gpu_, y.gpu);
  EXPECT_EQ(Compare(Get(cpu_, y.cpu), got).mismatches, 0u) << "vs CPU";
  auto single = Put<float>(*gpu_, std::vector<float>(size_t(T) * groups * rows_g));
  for (int t = 0; t < T; ++t) {
    gpu_->MatMulGrouped(w->gpu, x.gpu.ptr() + size_t(t) * groups * in_g, 1, groups,
                        single.ptr() + size_t(t) * groups * rows_g, ActQuantMode::kQ8);
  }
  EXPECT_EQ(Compare(got, Get(*gpu_, single)).mismatches, 0u) << "vs one row at a time";
}

// Flash's expert types (IQ2_XXS gate/up, Q2_K down) and Q8_0 experts, 6 of 32 experts a
// token: batches of 2 … 31 tokens stage each expert tile once for its pairs, with every
// token's output the bits of that token alone.
TEST_F(CudaBatchKernelsTest, ExpertTilesAreBitIdenticalAloneAndBatched) {
  const int D = 1024, F = 512, E = 32, k = 6, kMaxT = 31;
  const auto xs = RandomFloats(size_t(kMaxT) * D, 321, -1, 1);
  std::vector<int32_t> sel_h(size_t(kMaxT) * k);
  for (int t = 0; t < kMaxT; ++t) {
    for (int j = 0; j < k; ++j) sel_h[size_t(t) * k + j] = (t * 7 + j * 5 + (t % 3) * j) % E;
  }
  const auto wts_h = RandomFloats(size_t(kMaxT) * k, 322, 0.2f, 1.0f);
  struct Mix {
    DType gate, down;
  };
  for (Mix m : {Mix{DType::kIQ2_XXS, DType::kQ2_K}, Mix{DType::kQ8_0, DType::kQ8_0}}) {
    auto gate = PlaceBoth(cpu_, *gpu_, m.gate, {uint64_t(D), uint64_t(F), uint64_t(E)},
                          RandomWeightBytes(m.gate, D, uint64_t(F) * E, 323, 0.1f));
    auto up = PlaceBoth(cpu_, *gpu_, m.gate, {uint64_t(D), uint64_t(F), uint64_t(E)},
                        RandomWeightBytes(m.gate, D, uint64_t(F) * E, 324, 0.1f));
    auto down = PlaceBoth(cpu_, *gpu_, m.down, {uint64_t(F), uint64_t(D), uint64_t(E)},
                          RandomWeightBytes(m.down, F, uint64_t(D) * E, 325, 0.1f));
    auto x = Put<float>(*gpu_, xs);
    auto sel = Put<int32_t>(*gpu_, sel_h);
    auto wts = Put<float>(*gpu_, wts_h);
    auto run = [&](int t0, int T, Buf<float>& out) {
      MoeArgs a{};
      a.x = x.ptr() + size_t(t0) * D;
      a.selected = sel.ptr() + size_t(t0) * k;
      a.weights = wts.ptr() + size_t(t0) * k;
      a.gate = &gate->gpu;
      a.up = &up->gpu;
      a.down = &down->gpu;
      a.out = out.ptr() + size_t(t0) * D;
      a.n_tokens = T;
      a.n_used = k;
      a.clamp = 10.0f;
      a.act_quant = ActQuantMode::kQ8;
      gpu_->MoeExperts(a);
    };
    auto alone = Put<float>(*gpu_, std::vector<float>(size_t(kMaxT) * D));
    for (int t = 0; t < kMaxT; ++t) run(t, 1, alone);
    const auto want = Get(*gpu_, alone);
    KernelsRan();
    for (int T : {2, 5, 16, 31}) {
      auto out = Put<float>(*gpu_, std::vector<float>(size_t(T) * D, -7.0f));
      run(0, T, out);
      const std::vector<float> head(want.begin(), want.begin() + size_t(T) * D);
      EXPECT_EQ(Compare(Get(*gpu_, out), head).mismatches, 0u)
          << GetDTypeInfo(m.gate).name << " T " << T;
      EXPECT_TRUE(Has(KernelsRan(), "MoeGroupTileKernel")) << GetDTypeInfo(m.gate).name;
    }
  }
}

}  // namespace
}  // namespace flashkv::testing
