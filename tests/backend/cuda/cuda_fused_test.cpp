// The fused kernels of the coarse ops (CudaBackendOptions::fused, fused/). Each op's
// outputs with fusion on must have the bits of the unfused CUDA composition — every buffer
// the fine-op chain writes — at ds4-tiny's and Flash's shapes, for one token (fused) and a
// batch (the fallback), with hash and top-k routing, and again on a second run (the arrival
// counters reset themselves); against the CPU twin they agree within the ops' tolerances
// (the q8 products are exact, the fp32 sums are ordered differently), and the profile shows
// the fused kernels ran. Whole model with fusion on: ds4-tiny's logits and KV state are the
// fusion-off bits for prefill chunks 1, 7, 64 and whole, in both numerics; a Flash-width
// random model (random:flash:4) decodes to the same bits fused and unfused, and with the tile
// kernels' overlapped (programmatic dependent) launches off and on. The `*Small`
// tests are the sanitizer set. Label `gpu`.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../coarse_cases.h"
#include "cuda_test_util.h"
#include "model/model.h"
#include "model/random_model.h"
#include "util/thread_pool.h"

namespace flashkv::testing {
namespace {

class CudaFusedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FLASHKV_REQUIRE_GPU();
    gpu_ = SharedCuda();
  }
  void TearDown() override {
    if (gpu_ != nullptr) {
      gpu_->SetProfiling(false);
      gpu_->SetFused(false);
    }
  }

  // The case run on the CPU, on CUDA unfused, and on CUDA fused (twice); `kernels`: names
  // the fused run's profile must contain (none for a shape that falls back).
  template <typename Case>
  void Check(const typename Case::Dims& d, uint32_t seed, double rel_tol,
             const std::vector<std::string>& kernels, const std::string& what) {
    SCOPED_TRACE(what);
    Case ref(cpu_, d, seed);
    ref.Run();
    const std::vector<Output> want_cpu = ref.Outputs();

    gpu_->SetFused(false);
    Case off(*gpu_, d, seed);
    off.Run();
    const std::vector<Output> unfused = off.Outputs();

    gpu_->SetFused(true);
    Case on(*gpu_, d, seed);
    ASSERT_TRUE(gpu_->Synchronize().ok());
    gpu_->SetProfiling(true);
    gpu_->ProfileTimes(true);
    on.Run();
    ASSERT_TRUE(gpu_->Synchronize().ok());
    std::string names;
    for (const CudaKernelTime& k : gpu_->ProfileTimes(true)) names += k.name + "\n";
    gpu_->SetProfiling(false);
    const std::vector<Output> fused = on.Outputs();
    // Again on fresh inputs (NormRope works in place, so rerunning `on` would rotate its
    // output a second time): the arrival counters, which live in the backend, must have
    // reset themselves.
    Case twice(*gpu_, d, seed);
    twice.Run();
    const std::vector<Output> again = twice.Outputs();
    gpu_->SetFused(false);
    ASSERT_TRUE(gpu_->Synchronize().ok());

    ExpectBitIdentical(unfused, fused, "fused vs unfused CUDA");
    ExpectBitIdentical(fused, again, "fused, second run");
    for (const std::string& k : kernels) {
      EXPECT_NE(names.find(k), std::string::npos) << k << " did not run; kernels:\n" << names;
    }
    ASSERT_EQ(want_cpu.size(), fused.size());
    for (size_t i = 0; i < fused.size(); ++i) {
      if (fused[i].ints) {
        EXPECT_EQ(std::memcmp(fused[i].v.data(), want_cpu[i].v.data(), 4 * fused[i].v.size()), 0)
            << fused[i].name << " differs from the CPU";
        continue;
      }
      const Diff diff = Compare(want_cpu[i].v, fused[i].v);
      const double scale = std::max(1.0, MaxAbs(want_cpu[i].v));
      std::printf("%s: %s max|d| vs CPU %.3g (of %.3g)\n", what.c_str(), fused[i].name.c_str(),
                  diff.max_abs, scale);
      EXPECT_LE(diff.max_abs, rel_tol * scale) << fused[i].name << " at " << diff.worst;
    }
  }

  CudaBackend* gpu_ = nullptr;
  ThreadPool pool_{2};
  CpuBackend cpu_{&pool_};
};

const std::vector<std::string> kInputKernels = {"SublayerInputKernel", "ProjectSetKernel"};
const std::vector<std::string> kMoeKernels = {"MoeRouteKernel", "MoeGateUpKernel", "MoeDownKernel"};

// q8 products of inputs that differ from the CPU's in the last bits may requantize an int8
// differently: a few percent of one quantization step of the output's scale.
constexpr double kQ8Tol = 2e-2;
// RoPE's cosf / sinf may differ from the CPU's in the last bit (CudaOpsTest's 1e-4); a value
// an ulp away from an FP8 rounding boundary moves by one E4M3 step (1/8 of its binade).
constexpr double kRopeTol = 1e-4;
constexpr double kFp8Tol = 0.13;

TEST_F(CudaFusedTest, SublayerInputSmall) {
  SublayerInputCase::Dims d;  // ds4-tiny: q_a 128, kv 192 (Q8_0), and an F16 projection
  d.proj = {{DType::kQ8_0, 128}, {DType::kQ8_0, 192}, {DType::kF16, 64}};
  Check<SublayerInputCase>(d, 11, kQ8Tol, kInputKernels, "ds4-tiny, 1 token");
  d.n_tokens = 3;
  Check<SublayerInputCase>(d, 12, kQ8Tol, {}, "ds4-tiny, 3 tokens (unfused)");
  d.n_tokens = 1;
  d.aq = ActQuantMode::kOff;  // fp32 activations: HC + norm fused, the products unfused
  Check<SublayerInputCase>(d, 13, 1e-4, {"SublayerInputKernel"}, "ds4-tiny, fp32 products");
}

TEST_F(CudaFusedTest, SublayerInputFlash) {
  SublayerInputCase::Dims d;
  d.n_embd = 4096;
  d.proj = {{DType::kQ8_0, 1024}, {DType::kQ8_0, 512}};
  Check<SublayerInputCase>(d, 14, kQ8Tol, kInputKernels, "Flash attention input");
  d.proj.clear();
  Check<SublayerInputCase>(d, 15, 1e-4, {"SublayerInputKernel"}, "Flash FFN input");
}

TEST_F(CudaFusedTest, NormRopeSmall) {
  NormRopeCase::Dims q;  // ds4-tiny queries: 4 heads × 192, 64 rotated
  q.n_rows = 5;
  q.n_heads = 4;
  q.head_dim = 192;
  q.pos0 = 393;
  Check<NormRopeCase>(q, 21, kRopeTol, {"NormRopeKernel"}, "ds4-tiny q");
  NormRopeCase::Dims kv = q;  // raw KV rows: weight, FP8 over the 128 no-RoPE dims, F16
  kv.n_heads = 1;
  kv.n_rows = 1;
  kv.weight = true;
  kv.fp8_prefix = 128;
  kv.f16_round = true;
  Check<NormRopeCase>(kv, 22, kFp8Tol, {"NormRopeKernel"}, "ds4-tiny kv");
  NormRopeCase::Dims idx;  // indexer rows: 128 wide, no stored precision here
  idx.head_dim = 128;
  idx.n_rows = 3;
  idx.weight = true;
  idx.pos0 = 64;
  idx.pos_step = 4;
  Check<NormRopeCase>(idx, 23, kRopeTol, {"NormRopeKernel"}, "indexer rows");
}

TEST_F(CudaFusedTest, NormRopeFlash) {
  NormRopeCase::Dims q;  // Flash queries: 64 heads × 512, decode and a chunk
  q.n_heads = 64;
  q.pos0 = 31000;
  for (int rows : {1, 7}) {
    q.n_rows = rows;
    Check<NormRopeCase>(q, 31 + rows, kRopeTol, {"NormRopeKernel"}, "Flash q");
  }
  NormRopeCase::Dims kv;  // raw KV row: FP8 over 448, F16
  kv.weight = true;
  kv.fp8_prefix = 448;
  kv.f16_round = true;
  kv.pos0 = 8191;
  Check<NormRopeCase>(kv, 41, kFp8Tol, {"NormRopeKernel"}, "Flash kv");
  NormRopeCase::Dims comp = kv;  // compressed rows at w·4
  comp.n_rows = 3;
  comp.pos0 = 4096;
  comp.pos_step = 4;
  Check<NormRopeCase>(comp, 42, kFp8Tol, {"NormRopeKernel"}, "Flash compressed rows");
}

TEST_F(CudaFusedTest, MoeBlockSmall) {
  MoeBlockCase::Dims d;  // ds4-tiny: D 256, 8 experts top-2 of 256, shared 256
  for (bool hash : {true, false}) {
    d.hash = hash;
    d.n_tokens = 1;
    Check<MoeBlockCase>(d, 51, kQ8Tol, kMoeKernels, hash ? "ds4-tiny hash" : "ds4-tiny top-k");
    d.n_tokens = 3;
    Check<MoeBlockCase>(
        d, 52, kQ8Tol, {},
        hash ? "ds4-tiny hash, 3 tokens (unfused)" : "ds4-tiny top-k, 3 tokens (unfused)");
  }
}

TEST_F(CudaFusedTest, MoeBlockFlash) {
  MoeBlockCase::Dims d;
  d.n_embd = 4096;
  d.n_expert = 256;
  d.n_used = 6;
  d.n_ff = 2048;
  d.n_ff_shared = 2048;
  Check<MoeBlockCase>(d, 61, kQ8Tol, kMoeKernels, "Flash top-k");
  d.hash = true;
  Check<MoeBlockCase>(d, 62, kQ8Tol, kMoeKernels, "Flash hash");
}

// Whole model: with fusion on, ds4-tiny gives the fusion-off bits (logits and every KV
// section) whatever the prefill chunk — chunk 1 runs every token through the fused one-token
// kernels, larger chunks through the fallback and the fused NormRope.
TEST_F(CudaFusedTest, Ds4TinyChunkedPrefillIsBitIdenticalWithFusion) {
  const std::string path = std::string(FLASHKV_FIXTURES_DIR) + "/ds4-tiny/ds4-tiny.gguf";
  std::vector<int32_t> prompt(240);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 389 + 17) % 1019);
  for (ModelOptions o : {ModelOptions{NumericsMode::kOfficial, ActQuantMode::kQ8},
                         ModelOptions{NumericsMode::kHf, ActQuantMode::kOff}}) {
    auto m = Model::Load(path, *gpu_, &o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const int V = (*m)->config().n_vocab;
    auto run = [&](bool fused, int chunk, std::vector<float>* logits, std::vector<float>* state) {
      gpu_->SetFused(fused);
      auto st = (*m)->NewState(int(prompt.size()));
      ASSERT_TRUE(st.ok());
      logits->assign(prompt.size() * V, 0.0f);
      ASSERT_TRUE((*m)->Forward(prompt, *st, LogitsFor::kAll, logits->data(), chunk).ok());
      state->clear();
      for (int l = 0; l < (*m)->config().n_layer; ++l) {
        for (KvSection sec : {KvSection::kRaw, KvSection::kCompressed, KvSection::kCompressorKv,
                              KvSection::kCompressorScore, KvSection::kIndexerRows,
                              KvSection::kIndexerKv, KvSection::kIndexerScore}) {
          std::vector<float> v(st->SectionFloats(l, sec));
          ASSERT_TRUE(st->ReadSection(l, sec, v.data()).ok());
          state->insert(state->end(), v.begin(), v.end());
        }
      }
    };
    std::vector<float> want_logits, want_state;
    run(false, 0, &want_logits, &want_state);
    for (int chunk : {1, 7, 64, 0}) {
      std::vector<float> logits, state;
      run(true, chunk, &logits, &state);
      const Diff dl = Compare(want_logits, logits);
      const Diff ds = Compare(want_state, state);
      std::printf("ds4-tiny %s, fused, chunk %d: %zu logits and %zu state values differ\n",
                  o.numerics == NumericsMode::kHf ? "hf/off" : "official/q8", chunk, dl.mismatches,
                  ds.mismatches);
      EXPECT_EQ(dl.mismatches, 0u) << "chunk " << chunk;
      EXPECT_EQ(ds.mismatches, 0u) << "chunk " << chunk;
    }
  }
  gpu_->SetFused(false);
}

// Flash's width (D 4096, 256 experts top-6, 64 heads × 512; layers sliding, sliding, CSA,
// HCA): a prompt prefilled at once with fusion off and then decoded, against the same prompt
// fed token by token with fusion on and decoded — the same logits bit for bit, graphs on.
TEST_F(CudaFusedTest, FlashWidthDecodeIsBitIdenticalWithFusion) {
  auto spec = ParseRandomModelSource("random:flash:4");
  ASSERT_TRUE(spec.ok());
  const ModelOptions o{NumericsMode::kOfficial, ActQuantMode::kQ8};
  auto m = MakeRandomModel(*spec, *gpu_, &o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const int V = (*m)->config().n_vocab;
  std::vector<int32_t> prompt(160);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 7919 + 13) % V);
  const int steps = 8;
  auto run = [&](bool fused, int chunk) {
    gpu_->SetFused(fused);
    std::vector<float> all;
    auto st = (*m)->NewState(int(prompt.size()) + steps);
    EXPECT_TRUE(st.ok());
    if (!st.ok()) return all;
    std::vector<float> logits(V);
    EXPECT_TRUE((*m)->Forward(prompt, *st, LogitsFor::kLast, logits.data(), chunk).ok());
    all = logits;
    for (int s = 0; s < steps; ++s) {
      const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
      EXPECT_TRUE((*m)->Forward({&next, 1}, *st, LogitsFor::kLast, logits.data()).ok());
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
  };
  const std::vector<float> want = run(false, 0);
  const std::vector<float> got = run(true, 1);
  const Diff d = Compare(want, got);
  std::printf("random:flash:4, fused token by token vs unfused: %zu of %zu logits differ\n",
              d.mismatches, want.size());
  EXPECT_EQ(d.mismatches, 0u);
  EXPECT_GT(gpu_->graph_launches(), 0u);
  gpu_->SetFused(false);
}

// The one-token tile kernels as programmatic dependent launches (their weight copies start
// before the previous kernel ends, device/pdl.cuh): random:flash:4 decoded token by token, fused,
// graphs on, gives the same logits bit for bit with overlapped launches off and on. A kernel
// that read its predecessor's output before waiting would differ here.
TEST_F(CudaFusedTest, FlashWidthDecodeIsBitIdenticalWithOverlappedLaunches) {
  auto spec = ParseRandomModelSource("random:flash:4");
  ASSERT_TRUE(spec.ok());
  const ModelOptions o{NumericsMode::kOfficial, ActQuantMode::kQ8};
  auto m = MakeRandomModel(*spec, *gpu_, &o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const int V = (*m)->config().n_vocab;
  std::vector<int32_t> prompt(48);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 7919 + 13) % V);
  const int steps = 24;
  const bool was = gpu_->overlapped_launches();
  auto run = [&](bool overlap) {
    gpu_->SetOverlappedLaunches(overlap);
    std::vector<float> all;
    auto st = (*m)->NewState(int(prompt.size()) + steps);
    EXPECT_TRUE(st.ok());
    if (!st.ok()) return all;
    std::vector<float> logits(V);
    EXPECT_TRUE((*m)->Forward(prompt, *st, LogitsFor::kLast, logits.data(), 1).ok());
    all = logits;
    for (int s = 0; s < steps; ++s) {
      const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
      EXPECT_TRUE((*m)->Forward({&next, 1}, *st, LogitsFor::kLast, logits.data()).ok());
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
  };
  gpu_->SetFused(true);
  const uint64_t graphs0 = gpu_->graph_launches();
  const std::vector<float> want = run(false);
  const std::vector<float> got = run(true);
  gpu_->SetOverlappedLaunches(was);
  gpu_->SetFused(false);
  const Diff d = Compare(want, got);
  std::printf("random:flash:4, overlapped launches on vs off: %zu of %zu logits differ\n",
              d.mismatches, want.size());
  EXPECT_EQ(d.mismatches, 0u);
  EXPECT_GT(gpu_->graph_launches(), graphs0);
}

}  // namespace
}  // namespace flashkv::testing
