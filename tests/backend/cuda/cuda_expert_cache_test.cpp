// The routed experts in host memory behind a device cache on CUDA (model/expert_cache.h):
// kernels read cached experts from device slots and the rest across PCIe from the mapped
// GGUF; the bits must equal the fully resident model's — chunked prefill (the tensor-core
// and token-parallel expert kernels), one-token decode (the fused MoE kernels) and batched
// decode rows (the grouped expert kernels) — with experts trading places every two steps.
// Label `gpu`.
#include <algorithm>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda_test_util.h"
#include "model/expert_cache.h"
#include "model/model.h"

namespace flashkv::testing {
namespace {

std::string Ds4Tiny() {
  return std::string(FLASHKV_FIXTURES_DIR) + "/ds4-tiny/ds4-tiny.gguf";
}

std::vector<int32_t> Prompt(int n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = int32_t((i * 131 + 17) % 1000);
  return t;
}

bool Same(const std::vector<float>& a, const std::vector<float>& b) {
  return !a.empty() && a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A 300-token prefill in chunks of 64, 12 decode steps, then three sessions decoding
// together for 6 steps: every logit, in order.
std::vector<float> RunAll(Model& m) {
  const int V = m.config().n_vocab;
  const auto prompt = Prompt(300);
  std::vector<float> out;
  auto st = m.NewState(400);
  EXPECT_TRUE(st.ok());
  if (!st.ok()) return out;
  std::vector<float> logits(prompt.size() * size_t(V));
  Status s = m.Forward(prompt, *st, LogitsFor::kAll, logits.data(), 64);
  EXPECT_TRUE(s.ok()) << s.ToString();
  out.insert(out.end(), logits.begin(), logits.end());
  std::vector<float> row(static_cast<size_t>(V));
  int32_t next = 5;
  for (int i = 0; i < 12 && s.ok(); ++i) {
    s = m.Forward({&next, 1}, *st, LogitsFor::kLast, row.data());
    EXPECT_TRUE(s.ok()) << s.ToString();
    out.insert(out.end(), row.begin(), row.end());
    next = int32_t(std::max_element(row.begin(), row.end()) - row.begin());
  }
  std::vector<KvState> states;
  for (int k = 0; k < 3; ++k) {
    auto more = m.NewState(64);
    EXPECT_TRUE(more.ok());
    if (!more.ok()) return out;
    states.push_back(std::move(*more));
    s = m.Forward(std::span(prompt).subspan(size_t(10 * k), 20), states.back(), LogitsFor::kNone,
                  nullptr);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  std::vector<float> rows(3 * static_cast<size_t>(V));
  std::vector<int32_t> toks = {7, 70, 700};
  for (int step = 0; step < 6 && s.ok(); ++step) {
    std::vector<SessionChunk> chunks;
    for (int k = 0; k < 3; ++k) {
      chunks.push_back(SessionChunk{std::span(toks).subspan(size_t(k), 1), &states[size_t(k)],
                                    LogitsFor::kLast, rows.data() + size_t(k) * size_t(V)});
    }
    s = m.ForwardBatch(chunks);
    EXPECT_TRUE(s.ok()) << s.ToString();
    out.insert(out.end(), rows.begin(), rows.end());
    for (int k = 0; k < 3; ++k) toks[size_t(k)] = int32_t((toks[size_t(k)] * 7 + step) % 1000);
  }
  return out;
}

// A cache that trades experts every two steps (so the logits must not notice), staging
// chunks of 64 rows and gathering steps of up to `gather` rows.
ExpertCacheOptions TradingCache(int64_t slots, int64_t stage, int gather) {
  ExpertCacheOptions c;
  c.slots = slots;
  c.fold_interval = 2;
  c.max_swaps = 8;
  c.margin = 0.0;
  c.stage_experts = stage;
  c.stage_min_rows = 64;
  c.gather_max_rows = gather;
  return c;
}

TEST(CudaExpertCacheTest, LogitsEqualTheResidentModelBitForBit) {
  FLASHKV_REQUIRE_GPU();
  for (ModelOptions o : {ModelOptions{NumericsMode::kOfficial, ActQuantMode::kQ8},
                         ModelOptions{NumericsMode::kHf, ActQuantMode::kOff}}) {
    auto resident = Model::Load(Ds4Tiny(), *SharedCuda(), &o);
    ASSERT_TRUE(resident.ok()) << resident.status().ToString();
    const std::vector<float> want = RunAll(**resident);
    const int64_t total = int64_t((*resident)->config().n_layer) * (*resident)->config().n_expert;
    const int E = (*resident)->config().n_expert;
    resident->reset();
    // (slots, experts per staging buffer, decode gather rows): in place, then staged through
    // the upload stream (the chunks of 64 rows stage; all of a layer's uncached experts, or 3
    // and the rest in place); decode and the 3-row steps gather into the first buffer (every
    // choice, or 3 and the rest in place), or read in place (0).
    for (auto [slots, stage, gather] : {std::tuple<int64_t, int64_t, int>{0, 0, 16},
                                        {5, 0, 16},
                                        {total / 2, 0, 16},
                                        {total, 0, 16},
                                        {0, E, 16},
                                        {0, E, 0},
                                        {total / 2, E, 16},
                                        {total / 2, E, 0},
                                        {total / 2, 3, 16}}) {
      auto m = Model::LoadWithExpertCache(Ds4Tiny(), *SharedCuda(),
                                          TradingCache(slots, stage, gather), &o);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      EXPECT_TRUE(Same(RunAll(**m), want))
          << slots << " slots, staging " << stage << ", gather " << gather << ", act-quant "
          << ActQuantModeName(o.act_quant);
      ASSERT_TRUE((*m)->expert_cache()->Fold().ok());
      const ExpertCacheStats st = (*m)->expert_cache()->stats();
      EXPECT_GT(st.hits + st.misses, 0u);
      if (slots > 0 && slots < total) {
        EXPECT_GT(st.swaps, 0u);
      }
      if (slots == 0) {
        EXPECT_EQ(st.hits, 0u);
      }
      if (slots == total) {
        EXPECT_EQ(st.misses, 0u);
      }
      if (stage > 0) {
        EXPECT_EQ(st.staged_steps, 4u);  // the 300-token prompt's chunks of 64
        EXPECT_GT(st.staged_bytes, 0u);
      }
      EXPECT_EQ(st.gather_steps > 0, stage > 0 && gather > 0);
    }
  }
}

// --expert-host pageable: nothing page-locked; the device reads the GGUF's shared mapping at
// its own address through the host's page tables (HMM / ATS), the gather and staging copies
// included. The same bytes, so the same bits; a device without pageable reads skips.
TEST(CudaExpertCacheTest, PageableHostExpertsGiveTheResidentBits) {
  FLASHKV_REQUIRE_GPU();
  if (!SharedCuda()->ReadsPageableHost()) {
    GTEST_SKIP() << "this device cannot read pageable host memory (no HMM or ATS)";
  }
  ModelOptions o{NumericsMode::kOfficial, ActQuantMode::kQ8};
  auto resident = Model::Load(Ds4Tiny(), *SharedCuda(), &o);
  ASSERT_TRUE(resident.ok()) << resident.status().ToString();
  const std::vector<float> want = RunAll(**resident);
  const int64_t total = int64_t((*resident)->config().n_layer) * (*resident)->config().n_expert;
  const int E = (*resident)->config().n_expert;
  resident->reset();
  for (auto [slots, stage, gather] :
       {std::tuple<int64_t, int64_t, int>{0, 0, 0}, {total / 2, E, 16}, {total / 2, 3, 16}}) {
    ExpertCacheOptions c = TradingCache(slots, stage, gather);
    c.pageable_host = true;
    auto m = Model::LoadWithExpertCache(Ds4Tiny(), *SharedCuda(), c, &o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_TRUE((*m)->expert_cache()->pageable_host());
    EXPECT_TRUE(Same(RunAll(**m), want))
        << slots << " slots, staging " << stage << ", gather " << gather << ", pageable";
  }
}

}  // namespace
}  // namespace flashkv::testing
