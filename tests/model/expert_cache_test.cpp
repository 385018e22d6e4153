// The routed experts in host memory behind a device cache (model/expert_cache.h,
// model/expert_cache_plan.h, model/expert_heat.h): the budget arithmetic, the heat and its
// trades, and on the CPU backend — whose "device" reads host memory where it lies, so the
// cache's tables, slots, copies and trades all run — logits equal to the fully resident
// model's bit for bit whatever the cache holds, before and after experts trade places.
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "model/expert_cache.h"
#include "model/expert_cache_plan.h"
#include "model/expert_heat.h"
#include "model/model.h"
#include "model_run_util.h"
#include "model_test_util.h"

namespace flashkv {
namespace {

constexpr uint64_t kGiB = uint64_t(1) << 30;
constexpr uint64_t kMiB = uint64_t(1) << 20;

ExpertCacheInputs Flash() {
  ExpertCacheInputs in;
  in.resident_bytes = 7 * kGiB;
  in.routed_bytes = 73 * kGiB;
  in.slot_bytes = 7 * kMiB;
  in.n_experts_total = 43 * 256;
  in.keep_free_bytes = 6 * kGiB;
  return in;
}

TEST(ExpertCachePlanTest, EverythingOnTheDeviceWhenItFits) {
  ExpertCacheInputs in = Flash();
  in.budget_bytes = 139 * kGiB;
  auto plan = PlanExpertCache(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_FALSE(plan->offload);
  EXPECT_NE(plan->explanation.find("every weight on the device"), std::string::npos);
}

TEST(ExpertCachePlanTest, SlotsTakeWhatTheBudgetLeaves) {
  ExpertCacheInputs in = Flash();
  in.budget_bytes = 78 * kGiB;
  auto plan = PlanExpertCache(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->offload);
  EXPECT_EQ(plan->slots, int64_t((78 - 7 - 6) * kGiB / (7 * kMiB)));
  EXPECT_NE(plan->explanation.find("of 11008 experts"), std::string::npos) << plan->explanation;
  // A budget of 20 GiB still runs: fewer slots.
  in.budget_bytes = 20 * kGiB;
  plan = PlanExpertCache(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->slots, int64_t(7 * kGiB / (7 * kMiB)));
  // Never more slots than experts, and a caller's cap holds.
  in.budget_bytes = 1000 * kGiB;
  in.force = true;
  plan = PlanExpertCache(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->slots, in.n_experts_total);
  in.max_slots = 5;
  plan = PlanExpertCache(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->slots, 5);
}

TEST(ExpertCachePlanTest, StagingBuffersComeOutOfTheSlots) {
  ExpertCacheInputs in = Flash();
  in.budget_bytes = 78 * kGiB;
  in.n_layer = 43;
  in.n_expert = 256;
  auto plan = PlanExpertCache(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const int64_t fit = int64_t((78 - 7 - 6) * kGiB / (7 * kMiB));
  // Each buffer takes a layer's uncached experts and kStageSpare more; both fit beside the slots.
  EXPECT_EQ(plan->stage_experts, 256 - plan->slots / 43 + kStageSpare);
  EXPECT_LE(plan->slots + 2 * plan->stage_experts, fit);
  EXPECT_GT(plan->slots + 2 * plan->stage_experts, fit - 4);
  EXPECT_NE(plan->explanation.find("2 prefill staging buffers of"), std::string::npos);
  // Everything cached: nothing to stage.
  in.budget_bytes = 200 * kGiB;
  in.force = true;
  plan = PlanExpertCache(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->slots, in.n_experts_total);
  EXPECT_EQ(plan->stage_experts, 0);
}

TEST(ExpertCachePlanTest, RefusedWhenTheResidentWeightsDoNotFit) {
  ExpertCacheInputs in = Flash();
  in.budget_bytes = 12 * kGiB;
  auto plan = PlanExpertCache(in);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(plan.status().message().find("7.00 GiB of weights besides the routed experts"),
            std::string::npos)
      << plan.status().message();
}

TEST(ExpertCachePlanTest, SlotPartsAreAligned) {
  EXPECT_EQ(ExpertSlotBytes(1, 256, 257), 256u + 256u + 512u);
  EXPECT_TRUE(IsRoutedExpertTensor("blk.3.ffn_down_exps.weight"));
  EXPECT_FALSE(IsRoutedExpertTensor("blk.3.ffn_down_shexp.weight"));
}

ExpertHostInputs FlashHost(ExpertHostMode mode, uint64_t available_gib, bool hmm) {
  ExpertHostInputs in;
  in.mode = mode;
  in.routed_bytes = 73 * kGiB;
  in.available_known = true;
  in.available_bytes = available_gib * kGiB;
  in.device_reads_pageable = hmm;
  return in;
}

TEST(ExpertHostTest, AutoPinsWhenHostMemoryHoldsTheExpertsElseReadsThemPageable) {
  auto pinned = ChooseExpertHost(FlashHost(ExpertHostMode::kAuto, 120, true));
  ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
  EXPECT_FALSE(pinned->pageable) << pinned->explanation;
  EXPECT_NE(pinned->explanation.find("73.00 GiB of experts + 4 GiB spare <= 120.00 GiB"),
            std::string::npos)
      << pinned->explanation;
  // 73 + 4 > 76: the page cache holds what it can, the rest comes from disk.
  auto pageable = ChooseExpertHost(FlashHost(ExpertHostMode::kAuto, 76, true));
  ASSERT_TRUE(pageable.ok()) << pageable.status().ToString();
  EXPECT_TRUE(pageable->pageable);
  EXPECT_NE(pageable->explanation.find("page cache"), std::string::npos) << pageable->explanation;
  // A file in tmpfs is pinned where it lies whatever MemAvailable says (its pages are RAM).
  ExpertHostInputs shm = FlashHost(ExpertHostMode::kAuto, 10, true);
  shm.on_memory_filesystem = true;
  EXPECT_FALSE(ChooseExpertHost(shm)->pageable);
  ExpertHostInputs unknown = FlashHost(ExpertHostMode::kAuto, 0, true);
  unknown.available_known = false;
  EXPECT_FALSE(ChooseExpertHost(unknown)->pageable);
}

TEST(ExpertHostTest, TooLittleRamWithoutPageableReadsIsAClearRefusal) {
  auto refused = ChooseExpertHost(FlashHost(ExpertHostMode::kAuto, 40, false));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("73.00 GiB"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("cannot read pageable host memory"), std::string::npos);
  auto forced = ChooseExpertHost(FlashHost(ExpertHostMode::kPageable, 400, false));
  ASSERT_FALSE(forced.ok());
  EXPECT_EQ(forced.status().code(), StatusCode::kFailedPrecondition);
  // The flags win over the arithmetic either way.
  EXPECT_FALSE(ChooseExpertHost(FlashHost(ExpertHostMode::kPinned, 10, true))->pageable);
  EXPECT_TRUE(ChooseExpertHost(FlashHost(ExpertHostMode::kPageable, 400, true))->pageable);
}

TEST(ExpertHostTest, FlagValues) {
  EXPECT_EQ(*ParseExpertHostMode("auto"), ExpertHostMode::kAuto);
  EXPECT_EQ(*ParseExpertHostMode("pin"), ExpertHostMode::kPinned);
  EXPECT_EQ(*ParseExpertHostMode("pageable"), ExpertHostMode::kPageable);
  auto bad = ParseExpertHostMode("mlock");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'mlock'"), std::string::npos);
}

TEST(ExpertHeatTest, DecaysAndTradesColdForHot) {
  ExpertHeat heat(2, 4, 0.5);
  // Layer 0 expert 3 and layer 1 expert 0 are hot; the cache holds experts 0 and 1 of layer 0.
  std::vector<uint32_t> counts = {0, 1, 0, 8, 6, 0, 0, 0};
  heat.Add(counts);
  heat.Add(counts);
  EXPECT_DOUBLE_EQ(heat.heat(ExpertId{0, 3}), 12.0);  // 8 · 0.5 + 8
  std::vector<uint8_t> cached = {1, 1, 0, 0, 0, 0, 0, 0};
  auto swaps = heat.PlanSwaps(cached, 8, 1.0);
  ASSERT_EQ(swaps.size(), 2u);
  EXPECT_EQ(swaps[0].admit, (ExpertId{0, 3}));
  EXPECT_EQ(swaps[0].evict, (ExpertId{0, 0}));  // the coldest first
  EXPECT_EQ(swaps[1].admit, (ExpertId{1, 0}));
  EXPECT_EQ(swaps[1].evict, (ExpertId{0, 1}));
  // The cap, and the margin: equal heat never trades.
  EXPECT_EQ(heat.PlanSwaps(cached, 1, 1.0).size(), 1u);
  ExpertHeat flat(1, 4, 0.9);
  flat.Add(std::vector<uint32_t>{3, 3, 3, 3});
  EXPECT_TRUE(flat.PlanSwaps(std::vector<uint8_t>{1, 1, 0, 0}, 4, 1.0).empty());
}

constexpr int kCtx = 64;
constexpr int kPrompt = 24;
constexpr int kDecode = 24;

std::vector<float> RunAll(Model& m) {
  return testing::PrefillThenDecodeLogits(m, kCtx, kPrompt, kDecode, 7);
}

using testing::SameBits;

TEST(ExpertCacheModelTest, LogitsEqualTheResidentModelWhateverTheCacheHolds) {
  CpuBackend be(nullptr);
  auto resident = Model::Load(testing::Ds4TinyPath(), be);
  ASSERT_TRUE(resident.ok()) << resident.status().ToString();
  const std::vector<float> want = RunAll(**resident);
  const int64_t total = int64_t((*resident)->config().n_layer) * (*resident)->config().n_expert;
  const int E = (*resident)->config().n_expert;
  struct Case {
    int64_t slots;
    int64_t stage;  // experts per staging buffer: all of a layer's, a few (the rest in place)
    bool pageable = false;  // the file's pages as they are, nothing mapped or pinned
  };
  for (Case c : {Case{0, 0}, Case{3, 0}, Case{total / 2, 0}, Case{total, 0}, Case{0, E},
                 Case{total / 2, E}, Case{total / 2, 2}, Case{total / 2, E, true}}) {
    const int64_t slots = c.slots;
    ExpertCacheOptions o;
    o.slots = slots;
    o.fold_interval = 2;  // trade often: the logits must not notice
    o.max_swaps = 4;
    o.margin = 0.0;
    o.stage_experts = c.stage;
    o.stage_min_rows = 7;  // the prompt's chunks of 7 stage, decode steps do not
    o.pageable_host = c.pageable;
    auto m = Model::LoadWithExpertCache(testing::Ds4TinyPath(), be, o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_TRUE(SameBits(RunAll(**m), want))
        << slots << " slots, staging " << c.stage << (c.pageable ? ", pageable" : "");
    ExpertCache& cache = *(*m)->expert_cache();
    EXPECT_EQ(cache.pageable_host(), c.pageable);
    ASSERT_TRUE(cache.Fold().ok());
    const ExpertCacheStats st = cache.stats();
    EXPECT_EQ(st.slots, slots);
    // Every route of every layer was counted once: 1 + kDecode steps' rows × n_used × layers.
    const auto& cfg = (*m)->config();
    EXPECT_EQ(st.hits + st.misses,
              uint64_t(kPrompt + kDecode) * uint64_t(cfg.n_expert_used) * uint64_t(cfg.n_layer));
    if (slots == 0) {
      EXPECT_EQ(st.hits, 0u);
    }
    if (slots == total) {
      EXPECT_EQ(st.misses, 0u);
    }
    if (slots > 0 && slots < total) {
      EXPECT_GT(st.swaps, 0u) << "no expert ever traded";
    }
    int64_t held = 0;
    for (int l = 0; l < cfg.n_layer; ++l) {
      for (int e = 0; e < cfg.n_expert; ++e) held += cache.cached(l, e) ? 1 : 0;
    }
    EXPECT_EQ(held, slots);
    if (c.stage > 0 && slots < total) {
      EXPECT_EQ(st.staged_steps, uint64_t(kPrompt / 7));  // the last chunk has 3 rows
      EXPECT_GT(st.staged_bytes, 0u);
    } else {
      EXPECT_EQ(st.staged_bytes, 0u);
    }
    // Decode gather rides on the first staging buffer: the decode steps and the prompt's last
    // chunk of 3 rows (the CPU reads host memory where it is, so only the count shows it).
    EXPECT_EQ(st.gather_steps, c.stage > 0 ? uint64_t(kDecode + 1) : 0u);
  }
}

TEST(ExpertCachePlanTest, TallySplitsTheTinyFileAndSizesOneExpert) {
  auto file = GgufFile::Open(testing::Ds4TinyPath());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const GgufWeightTally t = TallyGgufWeights(*file);
  uint64_t all = 0;
  for (const GgufTensorInfo& info : file->tensors()) all += info.nbytes;
  EXPECT_EQ(t.routed_bytes + t.other_bytes, all);
  const GgufTensorInfo* gate = file->FindTensor("blk.0.ffn_gate_exps.weight");
  const GgufTensorInfo* down = file->FindTensor("blk.0.ffn_down_exps.weight");
  ASSERT_TRUE(gate != nullptr && down != nullptr);
  EXPECT_EQ(t.expert_matrix_bytes[0], gate->nbytes / gate->ne[2]);
  EXPECT_EQ(t.expert_matrix_bytes[2], down->nbytes / down->ne[2]);
  EXPECT_GT(t.routed_bytes, 0u);
}

// A backend whose kernels cannot read pageable host memory (a GPU without HMM or ATS).
class NoPageableCpu : public CpuBackend {
 public:
  NoPageableCpu() : CpuBackend(nullptr) {}
  bool ReadsPageableHost() const override { return false; }
};

TEST(ExpertCacheModelTest, PageableExpertsNeedADeviceThatReadsPageableMemory) {
  NoPageableCpu be;
  ExpertCacheOptions o;
  o.slots = 3;
  o.pageable_host = true;
  auto m = Model::LoadWithExpertCache(testing::Ds4TinyPath(), be, o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(m.status().message().find("cannot read pageable host memory"), std::string::npos)
      << m.status().message();
  o.pageable_host = false;  // pinned (mapped) still loads there
  EXPECT_TRUE(Model::LoadWithExpertCache(testing::Ds4TinyPath(), be, o).ok());
}

// The plan counts the resident weights by their file bytes; when the device has less left
// once they are placed, the slots shrink so that keep_free_bytes stays free (the H100 at
// --gpu-memory 40 lost 0.5 GiB that way and refused to open a session).
TEST(ExpertCacheModelTest, SlotsShrinkToWhatTheDeviceHasLeftAfterTheResidentWeights) {
  CpuBackend be(nullptr);
  auto resident = Model::Load(testing::Ds4TinyPath(), be);
  ASSERT_TRUE(resident.ok()) << resident.status().ToString();
  const std::vector<float> want = RunAll(**resident);
  ExpertCacheOptions o;
  o.slots = 20;
  o.stage_experts = 2;
  o.keep_free_bytes = 1000;
  uint64_t slot_bytes = 0;
  {
    auto probe = Model::LoadWithExpertCache(testing::Ds4TinyPath(), be, o);
    ASSERT_TRUE(probe.ok()) << probe.status().ToString();
    slot_bytes = (*probe)->expert_cache()->stats().slot_bytes;
    EXPECT_EQ((*probe)->expert_cache()->stats().slots, 20);  // no limit asked: as planned
  }
  // Room for the two staging buffers, what must stay free and 7.5 slots: 7 slots.
  int asked = 0;
  o.device_bytes_left = [&]() -> std::optional<uint64_t> {
    ++asked;
    return 4 * slot_bytes + 1000 + 7 * slot_bytes + slot_bytes / 2;
  };
  auto m = Model::LoadWithExpertCache(testing::Ds4TinyPath(), be, o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(asked, 1);
  EXPECT_EQ((*m)->expert_cache()->stats().slots, 7);
  EXPECT_TRUE(SameBits(RunAll(**m), want));
  // Nothing left at all: no slots, every expert read from host memory, the same logits.
  o.device_bytes_left = []() -> std::optional<uint64_t> { return 0; };
  auto none = Model::LoadWithExpertCache(testing::Ds4TinyPath(), be, o);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ((*none)->expert_cache()->stats().slots, 0);
  EXPECT_TRUE(SameBits(RunAll(**none), want));
}

TEST(ExpertCacheModelTest, SlotsOutsideTheExpertCountAreRefused) {
  CpuBackend be(nullptr);
  ExpertCacheOptions o;
  o.slots = 1 << 30;
  auto m = Model::LoadWithExpertCache(testing::Ds4TinyPath(), be, o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("slots for"), std::string::npos) << m.status().message();
}

}  // namespace
}  // namespace flashkv
