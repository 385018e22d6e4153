// The coarse ops' defaults (backend/coarse_ops.cpp) against the fine-op chains they stand for,
// written out in coarse_cases.h: the same inputs through both give the same bits in every
// buffer the chain writes, for one token and for a batch. (The model-level check is that
// ds4-tiny and hf-tiny-a keep their logits: tests/model.)
#include "backend/cpu/cpu_backend.h"
#include "coarse_cases.h"
#include "util/thread_pool.h"

namespace flashkv::testing {
namespace {

class CoarseOpsTest : public ::testing::Test {
 protected:
  ThreadPool pool_{2};
  CpuBackend a_{&pool_};
  CpuBackend b_{&pool_};
};

TEST_F(CoarseOpsTest, SublayerInputIsItsChain) {
  for (int T : {1, 3}) {
    for (ActQuantMode aq : {ActQuantMode::kQ8, ActQuantMode::kOff}) {
      SublayerInputCase::Dims d;
      d.n_tokens = T;
      d.proj = {{DType::kQ8_0, 128}, {DType::kQ8_0, 192}, {DType::kF16, 64}};
      d.aq = aq;
      SublayerInputCase coarse(a_, d, 11), fine(b_, d, 11);
      coarse.Run();
      fine.RunFine();
      ExpectBitIdentical(fine.Outputs(), coarse.Outputs(), Numbered("T ", T));
    }
  }
}

TEST_F(CoarseOpsTest, NormRopeIsItsChain) {
  NormRopeCase::Dims q;  // queries: heads, no weight, no stored precision
  q.n_rows = 3;
  q.n_heads = 4;
  q.head_dim = 192;
  q.pos0 = 70000;
  NormRopeCase::Dims kv = q;  // raw KV rows: one head, weight, FP8 + F16
  kv.n_heads = 1;
  kv.weight = true;
  kv.fp8_prefix = 128;
  kv.f16_round = true;
  NormRopeCase::Dims comp = kv;  // compressed rows at w·m
  comp.pos0 = 128;
  comp.pos_step = 4;
  comp.yarn = false;
  for (const auto& d : {q, kv, comp}) {
    NormRopeCase coarse(a_, d, 21), fine(b_, d, 21);
    coarse.Run();
    fine.RunFine();
    ExpectBitIdentical(fine.Outputs(), coarse.Outputs(), "norm-rope");
  }
}

TEST_F(CoarseOpsTest, MoeBlockIsItsChain) {
  for (bool hash : {false, true}) {
    for (int T : {1, 5}) {
      MoeBlockCase::Dims d;
      d.n_tokens = T;
      d.hash = hash;
      MoeBlockCase coarse(a_, d, 31), fine(b_, d, 31);
      coarse.Run();
      fine.RunFine();
      ExpectBitIdentical(fine.Outputs(), coarse.Outputs(),
                         Numbered(hash ? "hash, T " : "top-k, T ", T));
    }
  }
}

}  // namespace
}  // namespace flashkv::testing
