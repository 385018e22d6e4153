// Model::ForwardBatch on CUDA (issue 18): every session's logits, greedy tokens and KV
// sections are the same bits alone (Model::Forward) and batched with 1..8 other sessions at
// other positions and another session's prefill chunks in the same steps — the scenario of
// tests/model/model_batch_test.cpp on the GPU, where a shared step also switches kernels
// (a decode row alone takes the one-token kernels; beside a 33-token chunk, the 32-token tiled
// and tensor-core ones). Label `gpu`.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../../model/batch_scenario.h"
#include "../../model/model_test_util.h"
#include "convert/hf_converter.h"
#include "cuda_test_util.h"
#include "model/model.h"
#include "util/thread_pool.h"

namespace flashkv::testing {
namespace {

constexpr int kCtx = 64;

// hf-tiny-a converted to an f32 GGUF once per process.
std::string BatchHfTinyA() {
  static const std::string path = [] {
    const std::string out = std::string(FLASHKV_BINARY_DIR) + "/test-tmp-cuda-batch-hf-tiny-a.gguf";
    ConvertOptions o;
    o.hf_dir = FixturePath("hf-tiny-a");
    o.out_path = out;
    o.tokenizer_path = std::string(FLASHKV_SOURCE_DIR) + "/models/tokenizer/tokenizer.json";
    o.scheme = Ds4WeightScheme::kF32;
    o.show_progress = false;
    auto r = ConvertHfCheckpoint(o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return out;
  }();
  return path;
}

struct BatchCase {
  std::string name;
  std::string path;
  ModelOptions options;
};

std::vector<BatchCase> BatchCases() {
  return {
      {"ds4-tiny official/q8",
       SmallWindowDs4TinyPath(),
       {NumericsMode::kOfficial, ActQuantMode::kQ8}},
      {"ds4-tiny hf/off", SmallWindowDs4TinyPath(), {NumericsMode::kHf, ActQuantMode::kOff}},
      {"ds4-tiny full official/q8", Ds4TinyPath(), {NumericsMode::kOfficial, ActQuantMode::kQ8}},
      {"hf-tiny-a hf/off", BatchHfTinyA(), {NumericsMode::kHf, ActQuantMode::kOff}},
  };
}

class CudaBatchTest : public ::testing::Test {
 protected:
  void SetUp() override { FLASHKV_REQUIRE_GPU(); }
};

// Batched CUDA ≡ alone CUDA, bit for bit, for n = 1 … 8 others, a 33-token prefill chunk
// beside all of them, and all of them in the reverse order.
TEST_F(CudaBatchTest, SessionsAreBitIdenticalAloneAndBatchedOnCuda) {
  for (const BatchCase& k : BatchCases()) {
    auto model = Model::Load(k.path, *SharedCuda(), &k.options);
    ASSERT_TRUE(model.ok()) << k.name << ": " << model.status().ToString();
    Model& m = **model;
    const int V = m.config().n_vocab;
    const std::vector<SessionPlan> all = BatchPlans(V);
    std::vector<SessionRun> alone;
    for (const SessionPlan& p : all) alone.push_back(RunAlone(m, p, kCtx));
    for (size_t n = 1; n <= 8; ++n) {
      const std::vector<SessionPlan> plans(all.begin(), all.begin() + 2 + n);
      const std::vector<SessionRun> batched = RunBatched(m, plans, kCtx);
      ASSERT_EQ(batched.size(), plans.size());
      for (size_t i = 0; i < plans.size(); ++i) {
        ExpectSameRun(alone[i], batched[i],
                      k.name + ", " + std::to_string(n) + " others, session " + std::to_string(i));
      }
    }
    const std::vector<SessionPlan> wide = BatchPlans(V, 40, 33);
    const std::vector<SessionRun> wide_batched = RunBatched(m, wide, kCtx);
    for (size_t i = 0; i < wide.size(); ++i) {
      ExpectSameRun(RunAlone(m, wide[i], kCtx), wide_batched[i],
                    k.name + ", 33-token chunk, session " + std::to_string(i));
    }
    const std::vector<SessionPlan> reversed(all.rbegin(), all.rend());
    const std::vector<SessionRun> rev = RunBatched(m, reversed, kCtx);
    for (size_t i = 0; i < all.size(); ++i) {
      ExpectSameRun(alone[i], rev[all.size() - 1 - i],
                    k.name + ", reversed, session " + std::to_string(i));
    }
  }
}

// The batch on CUDA follows the CPU: hf/off greedy tokens agree and logits stay within the
// backends' 1e-3 (as CudaModelTest.Ds4TinyCpuAndCudaAgreeInHfParityMode holds for one session).
TEST_F(CudaBatchTest, BatchedCudaAgreesWithBatchedCpu) {
  ThreadPool pool(2);
  CpuBackend cpu(&pool);
  const ModelOptions o{NumericsMode::kHf, ActQuantMode::kOff};
  auto mg = Model::Load(SmallWindowDs4TinyPath(), *SharedCuda(), &o);
  auto mc = Model::Load(SmallWindowDs4TinyPath(), cpu, &o);
  ASSERT_TRUE(mg.ok() && mc.ok());
  const std::vector<SessionPlan> all = BatchPlans((*mg)->config().n_vocab);
  const std::vector<SessionRun> g = RunBatched(**mg, all, kCtx);
  const std::vector<SessionRun> c = RunBatched(**mc, all, kCtx);
  ASSERT_EQ(g.size(), c.size());
  for (size_t i = 0; i < g.size(); ++i) {
    double worst = 0;
    for (size_t j = 0; j < g[i].logits.size(); ++j) {
      worst = std::max(worst, double(std::fabs(g[i].logits[j] - c[i].logits[j])));
    }
    EXPECT_LE(worst, 1e-3) << "session " << i;
    EXPECT_EQ(g[i].tokens, c[i].tokens) << "session " << i;
  }
}

}  // namespace
}  // namespace flashkv::testing
