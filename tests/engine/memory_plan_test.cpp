// The live-pool and RAM-tier sizes `serve` picks for "auto": sessions from the device
// memory the weights left (after the activation reserve), the host default on a backend
// whose memory is the host's, a clear error naming the numbers when not one session fits.
#include "engine/memory_plan.h"

#include <gtest/gtest.h>

namespace flashkv {
namespace {

constexpr uint64_t kGiB = uint64_t(1) << 30;

TEST(MemoryPlanTest, SizesThePoolFromTheDeviceMemoryLeftAfterTheWeights) {
  LivePoolInputs in;
  // An H200 after Flash's 80.8 GiB of weights: ~58 GiB free of 139.8.
  in.device = Backend::MemoryInfo{58 * kGiB, uint64_t(139.8 * double(kGiB))};
  in.session_bytes = kGiB / 2;
  in.ctx = 32768;
  in.prefill_chunk = 2048;
  const uint64_t reserve = ActivationReserveBytes(*in.device, in.prefill_chunk);
  // 5 % of the device (~7 GiB) is more than 2 GiB + 2048 MiB.
  EXPECT_EQ(reserve, in.device->total_bytes / 20);
  auto plan = PlanLivePool(in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(uint64_t(plan->sessions), (in.device->free_bytes - reserve) / in.session_bytes);
  EXPECT_NE(plan->explanation.find("--ctx 32768"), std::string::npos) << plan->explanation;

  in.max_sessions = 8;
  plan = PlanLivePool(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->sessions, 8);
  EXPECT_NE(plan->explanation.find("capped at 8"), std::string::npos) << plan->explanation;
}

TEST(MemoryPlanTest, AHostMemoryBackendKeepsTheDefaultCount) {
  LivePoolInputs in;
  in.session_bytes = kGiB;
  in.host_sessions = 4;
  auto plan = PlanLivePool(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->sessions, 4);
}

TEST(MemoryPlanTest, NotOneSessionFittingIsAnErrorNamingTheNumbers) {
  LivePoolInputs in;
  in.device = Backend::MemoryInfo{6 * kGiB, 80 * kGiB};
  in.session_bytes = 3 * kGiB;  // 6 GiB free, 4 GiB reserved: 2 GiB left
  in.ctx = 100000;
  in.prefill_chunk = 2048;
  auto plan = PlanLivePool(in);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kResourceExhausted);
  const std::string m = plan.status().message();
  EXPECT_NE(m.find("--ctx 100000"), std::string::npos) << m;
  EXPECT_NE(m.find("3.00 GiB"), std::string::npos) << m;
  EXPECT_NE(m.find("6.00 GiB free of 80.00 GiB"), std::string::npos) << m;
  EXPECT_NE(m.find("4.00 GiB must stay free"), std::string::npos) << m;
}

TEST(MemoryPlanTest, RamBudgetIsAQuarterOfTheAvailableMemoryAtMost64GiB) {
  EXPECT_EQ(DefaultRamBudgetBytes(24 * kGiB), 6 * kGiB);
  EXPECT_EQ(DefaultRamBudgetBytes(1024 * kGiB), 64 * kGiB);
  EXPECT_EQ(DefaultRamBudgetBytes(0), 0u);
}

}  // namespace
}  // namespace flashkv
