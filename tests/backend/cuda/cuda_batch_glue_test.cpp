// The per-session glue of a batched decode step (issue #18) as few launches over all the
// step's sessions: RoPE and NormRope with each row at its own position (RopeAt, positions),
// the compressors' one-token updates (CompressorUpdateBatch) and the window stores
// (StoreWindowRowsBatch) and the compressors' closed rows (FinishRowsBatch) give every session
// the bits of its own call — with more sessions
// than one launch holds, a chunk of several rows among them, and the CPU's values for the
// row-wise ops. Label `gpu`.
#include <cstring>
#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace flashkv::testing {
namespace {

class CudaBatchGlueTest : public ::testing::Test {
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

bool Same(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

RopeParams FlashLikeRope() {
  RopeParams rp{};
  rp.n_rot = 64;
  rp.freq_base = 10000.0f;
  rp.freq_scale = 0.25f;
  rp.ext_factor = 1.0f;
  rp.corr_lo = 3.0f;
  rp.corr_hi = 21.0f;
  rp.mscale = 1.1f;
  return rp;
}

// Rows of sessions at scattered positions (a chunk of consecutive ones among them).
std::vector<int64_t> StepPositions(int rows) {
  std::vector<int64_t> pos;
  for (int r = 0; r < rows; ++r) pos.push_back(r >= 3 && r < 6 ? 1000 + r : 7 + 977 * r);
  return pos;
}

TEST_F(CudaBatchGlueTest, RopeAtGivesEachRowTheRopeOfItsPosition) {
  const int rows = 37, heads = 8, d = 128;
  const RopeParams rp = FlashLikeRope();
  const auto pos = StepPositions(rows);
  const auto xs = RandomFloats(size_t(rows) * heads * d, 401, -2, 2);
  for (bool inverse : {false, true}) {
    auto alone = PutBoth(cpu_, *gpu_, xs);
    for (int r = 0; r < rows; ++r) {
      const size_t at = size_t(r) * heads * d;
      gpu_->Rope(alone.gpu.ptr() + at, 1, heads, d, rp, pos[size_t(r)], 1, inverse);
      cpu_.Rope(alone.cpu.ptr() + at, 1, heads, d, rp, pos[size_t(r)], 1, inverse);
    }
    auto batch = PutBoth(cpu_, *gpu_, xs);
    auto p = PutBoth(cpu_, *gpu_, pos);
    gpu_->RopeAt(batch.gpu.ptr(), rows, heads, d, rp, p.gpu.ptr(), inverse);
    cpu_.RopeAt(batch.cpu.ptr(), rows, heads, d, rp, p.cpu.ptr(), inverse);
    EXPECT_TRUE(Same(Get(*gpu_, alone.gpu), Get(*gpu_, batch.gpu))) << "inverse " << inverse;
    EXPECT_TRUE(Same(Get(cpu_, alone.cpu), Get(cpu_, batch.cpu))) << "inverse " << inverse;
    EXPECT_LE(Compare(Get(cpu_, batch.cpu), Get(*gpu_, batch.gpu)).max_abs, 1e-4);  // cosf
  }
}

TEST_F(CudaBatchGlueTest, NormRopeAtPositionsGivesEachRowItsOwnCall) {
  const int rows = 29, d = 512;
  const RopeParams rp = FlashLikeRope();
  const auto pos = StepPositions(rows);
  auto w = PlaceBoth(cpu_, *gpu_, DType::kF32, {uint64_t(d), 1, 1},
                     FloatBytes(RandomFloats(d, 402, 0.5f, 1.5f)));
  for (int heads : {1, 16}) {
    const auto xs = RandomFloats(size_t(rows) * heads * d, 403 + heads, -3, 3);
    NormRopeArgs a{};
    a.n_heads = heads;
    a.head_dim = d;
    a.eps = 1e-6f;
    a.rope = rp;
    a.fp8_prefix = heads == 1 ? d - rp.n_rot : 0;
    a.f16_round = heads == 1;
    // Each backend: every row alone, then all rows in one call at their positions (the
    // CPU's is the default chain, Rope through RopeAt).
    auto alone = PutBoth(cpu_, *gpu_, xs);
    auto batch = PutBoth(cpu_, *gpu_, xs);
    auto p = PutBoth(cpu_, *gpu_, pos);
    for (Backend* be : {static_cast<Backend*>(gpu_), static_cast<Backend*>(&cpu_)}) {
      const bool on_gpu = be == gpu_;
      NormRopeArgs all = a;
      if (heads == 1) all.weight = on_gpu ? &w->gpu : &w->cpu;
      for (int r = 0; r < rows; ++r) {
        NormRopeArgs one = all;
        one.x = (on_gpu ? alone.gpu : alone.cpu).ptr() + size_t(r) * heads * d;
        one.n_rows = 1;
        one.pos0 = pos[size_t(r)];
        be->NormRope(one);
      }
      all.x = (on_gpu ? batch.gpu : batch.cpu).ptr();
      all.n_rows = rows;
      all.pos0 = -5;  // unused with positions
      all.positions = (on_gpu ? p.gpu : p.cpu).ptr();
      be->NormRope(all);
      EXPECT_TRUE(
          Same(Get(*be, on_gpu ? alone.gpu : alone.cpu), Get(*be, on_gpu ? batch.gpu : batch.cpu)))
          << "heads " << heads << (on_gpu ? " GPU" : " CPU");
    }
  }
}

// n sessions, each with its own frontier and rows, their projections consecutive rows of one
// step buffer; session 2 is a chunk of 3 rows (it runs alone). Positions close windows for
// some sessions and not others.
void CheckCompressorBatch(CudaBackend& gpu, int n, int d, int ratio, bool overlap) {
  const int width = (overlap ? 2 : 1) * d;
  const int c_rows = (overlap ? 2 : 1) * ratio;
  const int cap = 64;
  std::vector<int> rows_of(size_t(n), 1);
  if (n > 2) rows_of[2] = 3;
  std::vector<int> row0;
  int R = 0;
  for (int t : rows_of) {
    row0.push_back(R);
    R += t;
  }
  std::vector<uint16_t> ape_h(size_t(ratio) * width);
  const auto ape_f = RandomFloats(ape_h.size(), 411, -0.5f, 0.5f);
  for (size_t i = 0; i < ape_h.size(); ++i) ape_h[i] = F32ToF16(ape_f[i]);
  std::vector<uint8_t> ape_b(ape_h.size() * 2);
  std::memcpy(ape_b.data(), ape_h.data(), ape_b.size());
  WeightSource src{
      "ape", DType::kF16, {uint64_t(width), uint64_t(ratio), 1}, ape_b.data(), ape_b.size()};
  auto ape = gpu.PlaceWeight(src);
  ASSERT_TRUE(ape.ok());
  auto kv = Put<float>(gpu, RandomFloats(size_t(R) * width, 412, -1, 1));
  auto score = Put<float>(gpu, RandomFloats(size_t(R) * width, 413, -2, 2));
  struct Session {
    Buf<float> skv, ssc, rows;
  };
  std::vector<Session> alone, batch;
  std::vector<CompressorArgs> args;
  for (int i = 0; i < n; ++i) {
    const auto skv = RandomFloats(size_t(c_rows) * width, 420 + i, -1, 1);
    const auto ssc = RandomFloats(size_t(c_rows) * width, 460 + i, -2, 2);
    const auto rows = RandomFloats(size_t(cap) * d, 500 + i, -1, 1);
    alone.push_back({Put<float>(gpu, skv), Put<float>(gpu, ssc), Put<float>(gpu, rows)});
    batch.push_back({Put<float>(gpu, skv), Put<float>(gpu, ssc), Put<float>(gpu, rows)});
    CompressorArgs a{};
    a.kv = kv.ptr() + size_t(row0[size_t(i)]) * width;
    a.score = score.ptr() + size_t(row0[size_t(i)]) * width;
    a.ape = &*ape;
    a.pos0 = int64_t(ratio * (i + 1) - 1 - i % 3);  // i % 3 == 0: the token closes a window
    a.n_tokens = rows_of[size_t(i)];
    a.ratio = ratio;
    a.overlap = overlap;
    a.d_c = d;
    args.push_back(a);
  }
  for (int i = 0; i < n; ++i) {
    CompressorArgs a = args[size_t(i)];
    a.state_kv = alone[size_t(i)].skv.ptr();
    a.state_score = alone[size_t(i)].ssc.ptr();
    a.rows = alone[size_t(i)].rows.ptr();
    gpu.CompressorUpdate(a);
    args[size_t(i)].state_kv = batch[size_t(i)].skv.ptr();
    args[size_t(i)].state_score = batch[size_t(i)].ssc.ptr();
    args[size_t(i)].rows = batch[size_t(i)].rows.ptr();
  }
  gpu.ProfileTimes(true);
  gpu.CompressorUpdateBatch(args.data(), n);
  std::string names;
  for (const CudaKernelTime& k : gpu.ProfileTimes(true)) names += k.name + "\n";
  EXPECT_NE(names.find("CompressorBatchKernel"), std::string::npos) << names;
  for (int i = 0; i < n; ++i) {
    const Session& a = alone[size_t(i)];
    const Session& b = batch[size_t(i)];
    EXPECT_TRUE(Same(Get(gpu, a.skv), Get(gpu, b.skv))) << "session " << i << " d " << d;
    EXPECT_TRUE(Same(Get(gpu, a.ssc), Get(gpu, b.ssc))) << "session " << i << " d " << d;
    EXPECT_TRUE(Same(Get(gpu, a.rows), Get(gpu, b.rows))) << "session " << i << " d " << d;
  }
}

TEST_F(CudaBatchGlueTest, CompressorUpdatesOfSessionsTogetherAreBitIdenticalToEachAlone) {
  // 22 one-token sessions: launches of 7, 7, 7 and a last one alone
  CheckCompressorBatch(*gpu_, 23, 512, 4, true);    // CSA's main compressor
  CheckCompressorBatch(*gpu_, 16, 128, 4, true);    // the indexer's
  CheckCompressorBatch(*gpu_, 9, 512, 128, false);  // HCA
}

void CheckStoreBatch(CudaBackend& gpu, int n) {
  const int n_swa = 8, d = 64;
  std::vector<int> rows_of(size_t(n), 1);
  if (n > 4) rows_of[4] = 11;  // more than the window: only its last n_swa rows
  std::vector<int> row0;
  int R = 0;
  for (int t : rows_of) {
    row0.push_back(R);
    R += t;
  }
  auto kv = Put<float>(gpu, RandomFloats(size_t(R) * d, 601, -1, 1));
  std::vector<Buf<float>> alone, batch;
  std::vector<WindowStoreArgs> args;
  for (int i = 0; i < n; ++i) {
    const auto ring = RandomFloats(size_t(n_swa) * d, 610 + i, -1, 1);
    alone.push_back(Put<float>(gpu, ring));
    batch.push_back(Put<float>(gpu, ring));
    const int64_t pos0 = 5 + 3 * i;
    gpu.StoreWindowRows(kv.ptr() + size_t(row0[size_t(i)]) * d, pos0, rows_of[size_t(i)], n_swa, d,
                        alone.back().ptr());
    args.push_back(
        {kv.ptr() + size_t(row0[size_t(i)]) * d, pos0, rows_of[size_t(i)], batch.back().ptr()});
  }
  gpu.ProfileTimes(true);
  gpu.StoreWindowRowsBatch(args.data(), n, n_swa, d);
  std::string names;
  for (const CudaKernelTime& k : gpu.ProfileTimes(true)) names += k.name + "\n";
  EXPECT_NE(names.find("StoreRowsBatchKernel"), std::string::npos) << names;
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(Same(Get(gpu, alone[size_t(i)]), Get(gpu, batch[size_t(i)]))) << "session " << i;
  }
}

TEST_F(CudaBatchGlueTest, WindowStoresOfSessionsTogetherAreBitIdenticalToEachAlone) {
  CheckStoreBatch(*gpu_, 50);  // three launches
}

// The rows n sessions' compressors closed (FinishRowsBatch): most sessions close none or one
// (the batched kernel, one block each, in launches of ten), session 3 a prefill chunk's three
// (it runs alone). Each session's rows after the batch equal, bit for bit, the Backend
// default's chain on the GPU's fine ops entry by entry (NormRope, then HadamardFp4 and
// F16Round for indexer-like rows); rows no entry names keep their values. `main`: head_dim
// 512 with an FP8 prefix and F16 (a main compressor's rows, official); else 128 through
// Hadamard + FP4 (an indexer's).
void CheckFinishRows(CudaBackend& gpu, CpuBackend& cpu, int n, bool main) {
  const int d = main ? 512 : 128, cap = 6;
  const RopeParams rp = FlashLikeRope();
  auto w = PlaceBoth(cpu, gpu, DType::kF32, {uint64_t(d), 1, 1},
                     FloatBytes(RandomFloats(d, 431, 0.5f, 1.5f)));
  const auto xs = RandomFloats(size_t(n) * cap * d, 432 + n, -3, 3);
  auto batch = Put<float>(gpu, xs);
  auto chain = Put<float>(gpu, xs);
  std::vector<NormRopeArgs> batched, alone;
  for (int i = 0; i < n; ++i) {
    NormRopeArgs a{};
    a.n_rows = i == 3 ? 3 : i % 3 == 1 ? 0 : 1;
    a.head_dim = d;
    a.weight = &w->gpu;
    a.eps = 1e-6f;
    a.rope = rp;
    a.pos0 = int64_t(4 * (100 + 37 * i));
    a.pos_step = 4;
    a.fp8_prefix = main ? d - rp.n_rot : 0;
    a.f16_round = main;
    a.x = batch.ptr() + (size_t(i) * cap + 1) * d;  // each session's rows from its row 1
    batched.push_back(a);
    a.x = chain.ptr() + (size_t(i) * cap + 1) * d;
    alone.push_back(a);
  }
  gpu.SetFinishBatch(true);
  gpu.ProfileTimes(true);
  gpu.FinishRowsBatch(batched.data(), n, !main);
  gpu.SetFinishBatch(false);
  std::string names;
  for (const CudaKernelTime& k : gpu.ProfileTimes(true)) names += k.name + "\n";
  EXPECT_NE(names.find("FinishRowsKernel"), std::string::npos) << names;
  for (const NormRopeArgs& a : alone) gpu.Backend::FinishRowsBatch(&a, 1, !main);
  const std::vector<float> got = Get(gpu, batch), want = Get(gpu, chain);
  for (int i = 0; i < n; ++i) {
    const size_t at = size_t(i) * cap * d, len = size_t(cap) * d;
    EXPECT_TRUE(Same(std::vector<float>(got.begin() + at, got.begin() + at + len),
                     std::vector<float>(want.begin() + at, want.begin() + at + len)))
        << "session " << i << " d " << d;
  }
  EXPECT_TRUE(Same(std::vector<float>(got.begin(), got.begin() + d),
                   std::vector<float>(xs.begin(), xs.begin() + d)));  // row 0: untouched
  EXPECT_FALSE(Same(std::vector<float>(got.begin() + d, got.begin() + 2 * d),
                    std::vector<float>(xs.begin() + d, xs.begin() + 2 * d)));  // finished
}

TEST_F(CudaBatchGlueTest, ClosedRowsOfSessionsTogetherAreBitIdenticalToEachAlone) {
  CheckFinishRows(*gpu_, cpu_, 23, true);
  CheckFinishRows(*gpu_, cpu_, 23, false);
}

// Small shapes of every batched glue kernel, for compute-sanitizer (memcheck, racecheck).
TEST_F(CudaBatchGlueTest, SmallShapes) {
  CheckCompressorBatch(*gpu_, 9, 64, 4, true);
  CheckCompressorBatch(*gpu_, 3, 64, 8, false);
  CheckStoreBatch(*gpu_, 6);
  CheckFinishRows(*gpu_, cpu_, 5, false);
}

}  // namespace
}  // namespace flashkv::testing
