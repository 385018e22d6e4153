// The kernels of batched decode steps (issue #18): a step of 2–64 decode rows gives every
// row the bits of that row alone and of the CPU — Q8_0 products (the 8-token warp kernel, the
// tensor cores from 9 rows), a grouped projection, routed experts whose tiles stage each
// expert once for its pairs (products/moe_group.cu) — and the attention of several sessions' decode
// rows in one launch pair (AttentionBatch, attention/batch.cu) gives each session the bits of
// its own Attention; the profile names the kernels that ran. Label `gpu`.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

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
  };
  // 4096 × 300: many blocks; 1024 × 77; 192 × 50: rows the tensor cores do not take.
  const Shape shapes[] = {{4096, 300}, {1024, 77}, {192, 50}};
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
    for (int T : {2, 3, 4, 5, 8, 9, 16, 17, 31, 40, 64}) {
      auto y = Put<float>(*gpu_, std::vector<float>(size_t(T) * sh.rows, -7.0f));
      gpu_->MatMul(w->gpu, x.gpu.ptr(), T, y.ptr(), ActQuantMode::kQ8);
      const auto got = Get(*gpu_, y);
      const std::vector<float> head(want.begin(), want.begin() + size_t(T) * sh.rows);
      EXPECT_EQ(Compare(got, head).mismatches, 0u) << "n " << sh.n << " T " << T;
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
  gpu_->MatMulGrouped(w->gpu, x.gpu.ptr(), T, groups, y.gpu.ptr(), ActQuantMode::kQ8);
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

// Sessions at different positions — inside and past the window, with and without compressed
// rows (up to 139 visible) and an indexer's selection — each with its own ring and compressed rows,
// their q / kv / out rows consecutive rows of one step's buffers (as Model::ForwardBatch lays them
// out), and one prefill chunk among them (which takes Attention on its own).
void CheckAttentionBatch(CpuBackend& cpu, CudaBackend& gpu, int n_head, int d, int n_sessions) {
  const int n_swa = 16, top_k = 8;
  auto sinks = PlaceBoth(cpu, gpu, DType::kF32, {uint64_t(n_head), 1, 1},
                         FloatBytes(RandomFloats(n_head, 331, -1, 1)));
  for (int ratio : {0, 4}) {
    for (bool use_sel : {false, true}) {
      if (use_sel && ratio == 0) continue;
      // Session i: one decode row, except session 1, a chunk of 3 rows.
      std::vector<int> rows_of(size_t(n_sessions), 1);
      if (n_sessions > 2) rows_of[1] = 3;
      int R = 0;
      std::vector<int> row0;
      for (int n : rows_of) {
        row0.push_back(R);
        R += n;
      }
      auto q = Put<float>(gpu, RandomFloats(size_t(R) * n_head * d, 332 + ratio, -1, 1));
      auto kv = Put<float>(gpu, RandomFloats(size_t(R) * d, 333, -1, 1));
      std::vector<int32_t> sel_h(size_t(R) * top_k, -1);
      for (int r = 0; r < R; ++r) {
        for (int j = 0; j < 2 + r % 6; ++j) sel_h[size_t(r) * top_k + j] = 2 * j + r % 2;
      }
      auto sel = Put<int32_t>(gpu, sel_h);
      std::vector<Buf<float>> rings, comps;
      std::vector<AttentionArgs> args;
      for (int i = 0; i < n_sessions; ++i) {
        rings.push_back(Put<float>(gpu, RandomFloats(size_t(n_swa) * d, 340 + i, -1, 1)));
        comps.push_back(Put<float>(gpu, RandomFloats(size_t(160) * d, 380 + i, -1, 1)));
        AttentionArgs a{};
        a.pos0 = int64_t(3 + 29 * i);  // 3 … : inside the window, then past it
        a.n_tokens = rows_of[size_t(i)];
        a.n_head = n_head;
        a.head_dim = d;
        a.n_swa = n_swa;
        a.ratio = ratio;
        a.top_k = top_k;
        a.scale = 1.0f / std::sqrt(float(d));
        a.q = q.ptr() + size_t(row0[size_t(i)]) * n_head * d;
        a.kv_new = kv.ptr() + size_t(row0[size_t(i)]) * d;
        a.ring = rings.back().ptr();
        a.comp_rows = comps.back().ptr();
        if (use_sel) a.selected = sel.ptr() + size_t(row0[size_t(i)]) * top_k;
        a.sinks = &sinks->gpu;
        args.push_back(a);
      }
      auto alone = Put<float>(gpu, std::vector<float>(size_t(R) * n_head * d, -7.0f));
      auto batch = Put<float>(gpu, std::vector<float>(size_t(R) * n_head * d, -7.0f));
      for (int i = 0; i < n_sessions; ++i) {
        AttentionArgs a = args[size_t(i)];
        a.out = alone.ptr() + size_t(row0[size_t(i)]) * n_head * d;
        gpu.Attention(a);
        args[size_t(i)].out = batch.ptr() + size_t(row0[size_t(i)]) * n_head * d;
      }
      gpu.ProfileTimes(true);
      gpu.AttentionBatch(args.data(), n_sessions);
      std::string names;
      for (const CudaKernelTime& k : gpu.ProfileTimes(true)) names += k.name + "\n";
      const auto a_out = Get(gpu, alone), b_out = Get(gpu, batch);
      EXPECT_EQ(std::memcmp(a_out.data(), b_out.data(), sizeof(float) * a_out.size()), 0)
          << "heads " << n_head << " ratio " << ratio << " selected " << use_sel;
      EXPECT_NE(names.find("AttnPartialBatchKernel"), std::string::npos) << names;
      EXPECT_NE(names.find("AttnMergeBatchKernel"), std::string::npos) << names;
    }
  }
}

TEST_F(CudaBatchKernelsTest, AttentionOfSessionsTogetherIsBitIdenticalToEachAlone) {
  CheckAttentionBatch(cpu_, *gpu_, 64, 512, 20);  // Flash's heads, 20 sessions
}

// Small shapes of every batched kernel, for compute-sanitizer (memcheck, racecheck).
TEST_F(CudaBatchKernelsTest, SmallShapes) {
  CheckAttentionBatch(cpu_, *gpu_, 12, 64, 4);
  for (int T : {3, 12}) {
    const int n = 1024, rows = 21;
    auto w = PlaceBoth(cpu_, *gpu_, DType::kQ8_0, {uint64_t(n), uint64_t(rows), 1},
                       RandomWeightBytes(DType::kQ8_0, n, rows, 351));
    auto x = PutBoth(cpu_, *gpu_, RandomFloats(size_t(T) * n, 352, -3, 3));
    auto y = PutBoth(cpu_, *gpu_, std::vector<float>(size_t(T) * rows));
    cpu_.MatMul(w->cpu, x.cpu.ptr(), T, y.cpu.ptr(), ActQuantMode::kQ8);
    gpu_->MatMul(w->gpu, x.gpu.ptr(), T, y.gpu.ptr(), ActQuantMode::kQ8);
    EXPECT_EQ(Compare(Get(cpu_, y.cpu), Get(*gpu_, y.gpu)).mismatches, 0u) << "T " << T;
  }
  const int D = 256, F = 256, E = 8, k = 2, T = 5;
  std::vector<int32_t> sel_h(size_t(T) * k);
  for (int t = 0; t < T; ++t) sel_h[size_t(t) * k] = t % 3, sel_h[size_t(t) * k + 1] = 3 + t % 4;
  auto gate = PlaceBoth(cpu_, *gpu_, DType::kIQ2_XXS, {uint64_t(D), uint64_t(F), uint64_t(E)},
                        RandomWeightBytes(DType::kIQ2_XXS, D, uint64_t(F) * E, 353, 0.1f));
  auto up = PlaceBoth(cpu_, *gpu_, DType::kIQ2_XXS, {uint64_t(D), uint64_t(F), uint64_t(E)},
                      RandomWeightBytes(DType::kIQ2_XXS, D, uint64_t(F) * E, 354, 0.1f));
  auto down = PlaceBoth(cpu_, *gpu_, DType::kQ2_K, {uint64_t(F), uint64_t(D), uint64_t(E)},
                        RandomWeightBytes(DType::kQ2_K, F, uint64_t(D) * E, 355, 0.1f));
  auto x = Put<float>(*gpu_, RandomFloats(size_t(T) * D, 356, -1, 1));
  auto sel = Put<int32_t>(*gpu_, sel_h);
  auto wts = Put<float>(*gpu_, RandomFloats(size_t(T) * k, 357, 0.2f, 1.0f));
  auto out = Put<float>(*gpu_, std::vector<float>(size_t(T) * D));
  MoeArgs a{};
  a.x = x.ptr();
  a.selected = sel.ptr();
  a.weights = wts.ptr();
  a.gate = &gate->gpu;
  a.up = &up->gpu;
  a.down = &down->gpu;
  a.out = out.ptr();
  a.n_tokens = T;
  a.n_used = k;
  a.clamp = 10.0f;
  a.act_quant = ActQuantMode::kQ8;
  KernelsRan();
  gpu_->MoeExperts(a);
  EXPECT_TRUE(Has(KernelsRan(), "MoeGroupTileKernel"));
}

}  // namespace
}  // namespace flashkv::testing
