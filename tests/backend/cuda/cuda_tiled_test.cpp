// The many-token prefill kernels (CudaBackendOptions::tiled): attention (attention/tiled.cu),
// the indexer scores (ops/indexer.cu), the window-parallel compressor (ops/compressor.cu) and
// the tiled F16/BF16/F32 products (products/matvec_tiled.cu). Each must give the bits of the
// kernels that serve one token at a time (the batching contract of docs/CUDA.md): checked against
// those kernels on the same inputs — batch with the tiled kernels off, and token by token — at
// Flash's shapes and at odd ones (partial head and column tiles, row and token tails), plus the CPU
// twin within the op's tolerance. The kernel profile shows that the tiled kernel really ran. Label
// `gpu`.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "attn_test_inputs.h"
#include "cuda_test_util.h"

namespace flashkv::testing {
namespace {

struct MatMulShape {
  const char* name;
  int n, rows, T;
};

struct IndexerCase {
  const char* name;
  int n_heads, dim, ratio, top_k, T;
  int64_t pos0;
  bool cpu;  // also the selection against the CPU (small shapes)
};

class CudaTiledTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FLASHKV_REQUIRE_GPU();
    gpu_ = SharedCuda();
    gpu_->SetProfiling(true);
  }
  void TearDown() override {
    if (gpu_ != nullptr) {
      gpu_->SetProfiling(false);
      gpu_->SetTiledPrefill(true);
      gpu_->SetTiledIndexer(true);
    }
  }
  void CheckMatMul(const std::vector<MatMulShape>& shapes);
  void CheckAttention(const std::vector<AttnCase>& cases);
  void CheckIndexer(const std::vector<IndexerCase>& cases);
  // Whether a kernel whose name contains `name` ran since the last call (forgets the profile).
  bool Ran(const std::string& name) { return KernelRan(*gpu_, name); }
  CpuBackend cpu_{nullptr};
  CudaBackend* gpu_ = nullptr;
};

// F16 / BF16 / F32 weights × fp32 activations: one warp per row (S = 32, rows >= 1024) and the
// 8-warp split (rows < 1024).
void CudaTiledTest::CheckMatMul(const std::vector<MatMulShape>& shapes) {
  for (const MatMulShape& s : shapes) {
    for (DType t : {DType::kF16, DType::kBF16, DType::kF32}) {
      if (t != DType::kF16 && s.rows * int64_t(s.n) > (int64_t(1) << 22)) continue;
      const auto xs = RandomFloats(size_t(s.T) * s.n, 7 + s.n + s.rows, -2, 2);
      const auto bytes = RandomWeightBytes(t, s.n, s.rows, 11 + s.rows);
      auto w = PlaceBoth(cpu_, *gpu_, t, {uint64_t(s.n), uint64_t(s.rows), 1}, bytes);
      auto x = PutBoth(cpu_, *gpu_, xs);
      const std::string what = std::string(s.name) + " " + std::string(GetDTypeInfo(t).name);
      auto run = [&](bool tiled, int chunk) {
        gpu_->SetTiledPrefill(tiled);
        auto y = Put<float>(*gpu_, std::vector<float>(size_t(s.T) * s.rows, -7.0f));
        for (int t0 = 0; t0 < s.T; t0 += chunk) {
          const int n = std::min(chunk, s.T - t0);
          gpu_->MatMul(w->gpu, x.gpu.ptr() + size_t(t0) * s.n, n, y.ptr() + size_t(t0) * s.rows,
                       ActQuantMode::kOff);
        }
        return Get(*gpu_, y);
      };
      const auto tiled = run(true, s.T);
      EXPECT_TRUE(Ran("MatVecTiledKernel")) << what;
      const auto eight = run(false, s.T);
      EXPECT_FALSE(Ran("MatVecTiledKernel")) << what;
      const auto single = run(true, 1);
      const Diff d8 = Compare(tiled, eight), d1 = Compare(tiled, single);
      EXPECT_EQ(d8.mismatches, 0u) << what << ": vs 8-token kernel max|d| " << d8.max_abs;
      EXPECT_EQ(d1.mismatches, 0u) << what << ": vs one token max|d| " << d1.max_abs;
      if (s.rows * int64_t(s.n) <= (int64_t(1) << 20)) {
        auto yc = Put<float>(cpu_, std::vector<float>(size_t(s.T) * s.rows));
        cpu_.MatMul(w->cpu, x.cpu.ptr(), s.T, yc.ptr(), ActQuantMode::kOff);
        // Within 1e-5 of Σ|w·x| per output, as CudaOpsTest.MatMulFp32MatchesCpu.
        const auto ycv = Get(cpu_, yc);
        std::vector<float> wf(size_t(s.n) * s.rows);
        for (int r = 0; r < s.rows; ++r) {
          ASSERT_TRUE(
              DequantizeRow(t, bytes.data() + r * w->cpu.row_bytes, &wf[size_t(r) * s.n], s.n)
                  .ok());
        }
        size_t bad = 0;
        for (int tk = 0; tk < s.T; ++tk) {
          for (int r = 0; r < s.rows; ++r) {
            double bound = 0;
            for (int i = 0; i < s.n; ++i) {
              bound += std::fabs(double(wf[size_t(r) * s.n + i]) * xs[size_t(tk) * s.n + i]);
            }
            const size_t o = size_t(tk) * s.rows + r;
            bad += std::fabs(double(ycv[o]) - tiled[o]) > 1e-5 * bound + 1e-30;
          }
        }
        EXPECT_EQ(bad, 0u) << what << " vs CPU";
      }
    }
  }
}

TEST_F(CudaTiledTest, MatMulFloatTilesAreBitIdenticalToDecodeSmall) {
  CheckMatMul({{"short 256x45", 256, 45, 32}, {"tails 1000x1030", 1000, 1030, 37}});
}

// Flash's compressor, router, HC and indexer shapes.
TEST_F(CudaTiledTest, MatMulFloatTilesAreBitIdenticalToDecodeAtFlashShapes) {
  CheckMatMul({{"csa compressor 4096x1024", 4096, 1024, 64},
               {"router 4096x256", 4096, 256, 45},
               {"hc mix 16384x24", 16384, 24, 33},
               {"tails 1000x1030", 1000, 1030, 77},
               {"indexer q_b 1024x8192", 1024, 8192, 40}});
}

// The frontier fed in chunks that start and end inside windows, with chunks of one token
// (the walk) in between: rows and state equal the walk's bits fed the same chunks, and
// the CPU's rows within the existing tolerance.
TEST_F(CudaTiledTest, CompressorWindowsAreBitIdenticalToTheWalkSmall) {
  struct Case {
    int ratio, d;
  };
  for (const Case& c : {Case{4, 512}, Case{4, 128}, Case{128, 512}, Case{8, 64}}) {
    const bool overlap = c.ratio == 4;
    const int width = (overlap ? 2 : 1) * c.d;
    const std::vector<int> chunks = {37, 1, 64, 3, 130, 1, 2, 300, 7};
    const int total = std::accumulate(chunks.begin(), chunks.end(), 0);
    auto ape = PlaceBoth(cpu_, *gpu_, DType::kF16, {uint64_t(width), uint64_t(c.ratio), 1},
                         RandomWeightBytes(DType::kF16, width, c.ratio, 5 + c.ratio));
    const auto kv = RandomFloats(size_t(total) * width, 92 + c.d, -2, 2);
    const auto sc = RandomFloats(size_t(total) * width, 93 + c.d, -4, 4);
    auto kvb = PutBoth(cpu_, *gpu_, kv), scb = PutBoth(cpu_, *gpu_, sc);
    const size_t state_n = size_t(overlap ? 2 : 1) * c.ratio * width;
    const std::vector<float> score0(state_n, -INFINITY);
    const size_t rows_n = size_t(total / c.ratio + 1) * c.d;
    struct Run {
      Buf<float> skv, ssc, rows;
    };
    auto run = [&](Backend& be, bool tiled) {
      if (&be == gpu_) gpu_->SetTiledPrefill(tiled);
      Run r{Put(be, std::vector<float>(state_n)), Put(be, score0),
            Put(be, std::vector<float>(rows_n))};
      const auto& kvx = &be == gpu_ ? kvb.gpu : kvb.cpu;
      const auto& scx = &be == gpu_ ? scb.gpu : scb.cpu;
      int pos = 0;
      for (int n : chunks) {
        CompressorArgs a{};
        a.ratio = c.ratio;
        a.overlap = overlap;
        a.d_c = c.d;
        a.pos0 = pos;
        a.n_tokens = n;
        a.kv = kvx.ptr() + size_t(pos) * width;
        a.score = scx.ptr() + size_t(pos) * width;
        a.ape = &be == gpu_ ? &ape->gpu : &ape->cpu;
        a.state_kv = r.skv.ptr();
        a.state_score = r.ssc.ptr();
        a.rows = r.rows.ptr();
        be.CompressorUpdate(a);
        pos += n;
      }
      return r;
    };
    const Run tiled = run(*gpu_, true);
    EXPECT_TRUE(Ran("CompressorPoolKernel")) << c.ratio;
    const Run walk = run(*gpu_, false);
    EXPECT_FALSE(Ran("CompressorPoolKernel")) << c.ratio;
    const Run cpu = run(cpu_, false);
    const std::string what = "ratio " + std::to_string(c.ratio) + " d " + std::to_string(c.d);
    EXPECT_EQ(Compare(Get(*gpu_, tiled.rows), Get(*gpu_, walk.rows)).mismatches, 0u) << what;
    EXPECT_EQ(Compare(Get(*gpu_, tiled.skv), Get(*gpu_, walk.skv)).mismatches, 0u) << what;
    EXPECT_EQ(Compare(Get(*gpu_, tiled.ssc), Get(*gpu_, walk.ssc)).mismatches, 0u) << what;
    EXPECT_LE(Compare(Get(cpu_, cpu.rows), Get(*gpu_, tiled.rows)).max_abs, 1e-5) << what;
    EXPECT_EQ(Compare(Get(cpu_, cpu.skv), Get(*gpu_, tiled.skv)).mismatches, 0u) << what;
    EXPECT_EQ(Compare(Get(cpu_, cpu.ssc), Get(*gpu_, tiled.ssc)).mismatches, 0u) << what;
  }
}

// The tiled attention against the one-token kernels: the same batch with the tiled kernels
// off, and every token alone as decoding sees it (the ring then holds the chunk's earlier
// rows), bit for bit; small shapes also against the CPU.
void CudaTiledTest::CheckAttention(const std::vector<AttnCase>& cases) {
  for (const AttnCase& c : cases) {
    const AttnInputs in = MakeAttnInputs(cpu_, *gpu_, c, 200 + uint32_t(c.T));
    const size_t out_n = size_t(c.T) * c.n_head * c.d;
    auto tiled = Put<float>(*gpu_, std::vector<float>(out_n));
    auto plain = Put<float>(*gpu_, std::vector<float>(out_n));
    gpu_->SetTiledPrefill(true);
    gpu_->Attention(AttnArgsFor(c, in, true, tiled.ptr()));
    EXPECT_TRUE(Ran("AttnScoresKernel")) << c.name;
    gpu_->SetTiledPrefill(false);
    gpu_->Attention(AttnArgsFor(c, in, true, plain.ptr()));
    EXPECT_FALSE(Ran("AttnScoresKernel")) << c.name;
    const auto tiled_h = Get(*gpu_, tiled);
    const Diff dp = Compare(tiled_h, Get(*gpu_, plain));
    EXPECT_EQ(dp.mismatches, 0u) << c.name << ": vs one-token kernels on the batch, max|d| "
                                 << dp.max_abs << " at " << dp.worst;

    // Token by token: token t sees the ring with the chunk's rows before it stored.
    std::vector<float> ring_t = in.ring_h;
    auto ring = Put<float>(*gpu_, ring_t);
    auto one = Put<float>(*gpu_, std::vector<float>(size_t(c.n_head) * c.d));
    size_t token_mismatches = 0;
    for (int t = 0; t < c.T; ++t) {
      AttnCase ct = c;
      ct.T = 1;
      ct.pos0 = c.pos0 + t;
      AttentionArgs a = AttnArgsFor(ct, in, true, one.ptr());
      a.q = in.q.gpu.ptr() + size_t(t) * c.n_head * c.d;
      a.kv_new = in.kv.gpu.ptr() + size_t(t) * c.d;
      a.ring = ring.ptr();
      if (c.select) a.selected = in.sel.gpu.ptr() + size_t(t) * c.top_k;
      gpu_->Attention(a);
      const auto got = Get(*gpu_, one);
      token_mismatches += std::memcmp(got.data(), tiled_h.data() + size_t(t) * got.size(),
                                      sizeof(float) * got.size()) != 0;
      const int64_t p = c.pos0 + t;
      std::copy_n(in.kv_h.begin() + size_t(t) * c.d, c.d,
                  ring_t.begin() + size_t(p % c.n_swa) * c.d);
      ASSERT_TRUE(gpu_->Write(ring.ptr(), ring_t.data(), sizeof(float) * ring_t.size()).ok());
    }
    EXPECT_EQ(token_mismatches, 0u) << c.name << ": tokens differing from their decode step";

    if (c.cpu) {
      auto out_c = Put<float>(cpu_, std::vector<float>(out_n));
      cpu_.Attention(AttnArgsFor(c, in, false, out_c.ptr()));
      EXPECT_LE(Compare(Get(cpu_, out_c), tiled_h).max_abs, 2e-6) << c.name << " vs CPU";
    }
  }
}

TEST_F(CudaTiledTest, AttentionTilesAreBitIdenticalToDecodeSmall) {
  CheckAttention({{"odd heads and columns", 12, 96, 16, 4, 8, 45, 150, true, true},
                  {"two head tiles", 80, 64, 16, 8, 8, 37, 300, false, true},
                  {"tiny", 4, 32, 8, 4, 4, 64, 0, false, true}});
}

TEST_F(CudaTiledTest, AttentionTilesAreBitIdenticalToDecodeAtFlashShapes) {
  CheckAttention({{"flash csa selected", 64, 512, 128, 4, 512, 48, 3000, true, false},
                  {"flash csa all visible", 64, 512, 128, 4, 512, 40, 900, false, false},
                  {"flash hca", 64, 512, 128, 128, 512, 33, 20000, false, false},
                  {"flash sliding", 64, 512, 128, 0, 512, 36, 77, false, false},
                  {"flash first chunk", 64, 512, 128, 4, 512, 70, 0, false, false}});
}

// Indexer scores: IndexScoreTiledKernel's score matrix against the one-token kernel's on the
// same batch (tiled off) and every token scored alone, bit for bit and entry for entry (the
// same entries written); the selection with the tiled kernels on and off, and against the CPU.
void CudaTiledTest::CheckIndexer(const std::vector<IndexerCase>& cases) {
  for (const IndexerCase& c : cases) {
    const int64_t n_rows = (c.pos0 + c.T) / c.ratio;
    const int64_t stride = std::max<int64_t>(n_rows, 1);
    const uint32_t seed = 300 + uint32_t(c.T);
    auto q = PutBoth(cpu_, *gpu_, RandomFloats(size_t(c.T) * c.n_heads * c.dim, seed, -1, 1));
    auto w = PutBoth(cpu_, *gpu_, RandomFloats(size_t(c.T) * c.n_heads, seed + 1, -1, 1));
    std::vector<float> rows_h = RandomFloats(size_t(n_rows) * c.dim, seed + 2, -1, 1);
    // Equal rows give equal scores: the selection must take the lowest ids among them.
    for (int64_t r = 1; r < std::min<int64_t>(n_rows, 8); ++r) {
      std::copy_n(rows_h.begin(), c.dim, rows_h.begin() + r * c.dim);
    }
    auto rows = PutBoth(cpu_, *gpu_, rows_h);
    IndexerArgs a{};
    a.weight_scale = 1.0f / std::sqrt(float(c.n_heads * c.dim));
    a.pos0 = c.pos0;
    a.n_tokens = c.T;
    a.n_heads = c.n_heads;
    a.dim = c.dim;
    a.ratio = c.ratio;
    a.top_k = c.top_k;
    a.q = q.gpu.ptr();
    a.weights = w.gpu.ptr();
    a.rows = rows.gpu.ptr();
    const std::vector<float> unset(size_t(c.T) * stride, 12345.0f);
    auto plain = Put<float>(*gpu_, unset);
    gpu_->SetTiledPrefill(false);
    gpu_->IndexerScores(a, plain.ptr());
    EXPECT_FALSE(Ran("IndexScoreTiledKernel")) << c.name;
    const auto plain_h = Get(*gpu_, plain);
    int64_t want_written = 0;
    for (int t = 0; t < c.T; ++t) {
      const int64_t n_vis = (c.pos0 + t + 1) / c.ratio;
      if (n_vis > c.top_k) want_written += n_vis;
    }
    gpu_->SetTiledPrefill(true);
    {
      auto tiled = Put<float>(*gpu_, unset);
      gpu_->IndexerScores(a, tiled.ptr());
      EXPECT_TRUE(Ran("IndexScoreTiledKernel")) << c.name;
      const auto tiled_h = Get(*gpu_, tiled);
      size_t written = 0, differing = 0;
      for (size_t i = 0; i < tiled_h.size(); ++i) {
        written += tiled_h[i] != 12345.0f;
        differing += std::memcmp(&tiled_h[i], &plain_h[i], sizeof(float)) != 0;
      }
      EXPECT_EQ(differing, 0u) << c.name << ": vs the one-token kernel on the batch";
      EXPECT_EQ(int64_t(written), want_written) << c.name;
    }

    // Every token alone, as a decode step scores it.
    size_t token_mismatches = 0;
    for (int t = 0; t < c.T; ++t) {
      const int64_t n_vis = (c.pos0 + t + 1) / c.ratio;
      if (n_vis <= c.top_k) continue;
      IndexerArgs one = a;
      one.pos0 = c.pos0 + t;
      one.n_tokens = 1;
      one.q = q.gpu.ptr() + size_t(t) * c.n_heads * c.dim;
      one.weights = w.gpu.ptr() + size_t(t) * c.n_heads;
      auto out = Put<float>(*gpu_, std::vector<float>(size_t(n_vis), 0.0f));
      gpu_->IndexerScores(one, out.ptr());
      const auto got = Get(*gpu_, out);
      token_mismatches += std::memcmp(got.data(), plain_h.data() + size_t(t) * stride,
                                      sizeof(float) * size_t(n_vis)) != 0;
    }
    EXPECT_EQ(token_mismatches, 0u) << c.name << ": tokens differing from their decode step";

    // The selections, with the tiled kernel and without.
    const std::vector<int32_t> sel0(size_t(c.T) * c.top_k, 99);
    auto sel_tiled = Put<int32_t>(*gpu_, sel0);
    auto sel_plain = Put<int32_t>(*gpu_, sel0);
    a.selected = sel_tiled.ptr();
    gpu_->IndexerTopK(a);
    EXPECT_TRUE(Ran("IndexScoreTiledKernel") || n_rows <= c.top_k) << c.name;
    gpu_->SetTiledPrefill(false);
    a.selected = sel_plain.ptr();
    gpu_->IndexerTopK(a);
    gpu_->SetTiledPrefill(true);
    const auto sel_h = Get(*gpu_, sel_tiled);
    EXPECT_EQ(sel_h, Get(*gpu_, sel_plain)) << c.name;
    if (c.cpu) {
      auto sel_c = Put<int32_t>(cpu_, sel0);
      IndexerArgs ac = a;
      ac.q = q.cpu.ptr();
      ac.weights = w.cpu.ptr();
      ac.rows = rows.cpu.ptr();
      ac.selected = sel_c.ptr();
      cpu_.IndexerTopK(ac);
      EXPECT_EQ(Get(cpu_, sel_c), sel_h) << c.name << " vs CPU";
    }
  }
}

TEST_F(CudaTiledTest, IndexerScoresAreBitIdenticalToDecodeSmall) {
  CheckIndexer({{"odd heads and dims, token tail", 12, 36, 4, 6, 45, 150, true},
                {"first chunk crossing top_k", 8, 32, 4, 6, 70, 0, true},
                {"several row tiles", 5, 20, 4, 8, 40, 1000, true},
                {"dim 128, two row tiles", 3, 128, 4, 8, 40, 700, true},
                {"dim 128, one token tile, tail", 2, 128, 4, 3, 17, 60, true}});
}

TEST_F(CudaTiledTest, IndexerScoresAreBitIdenticalToDecodeAtFlashShapes) {
  CheckIndexer({{"flash", 64, 128, 4, 512, 70, 3000, false},
                {"flash crossing top_k", 64, 128, 4, 512, 100, 2000, false},
                {"flash long", 64, 128, 4, 512, 33, 20000, false}});
}

}  // namespace
}  // namespace flashkv::testing
