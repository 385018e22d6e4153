// Which kernel code the device runs: a build with sm_90a code (the default where nvcc
// knows it: src/backend/cuda/CMakeLists.txt) must run it on a Hopper GPU — so the kernels
// behind device/arch.cuh's FLASHKV_HOPPER_FEATURES are the ones the other GPU tests check —
// and nothing else may claim it (other GPUs, a build without 90a, compute_90 PTX). Label
// `gpu`: skipped where no GPU is present.
#include <algorithm>
#include <string>
#include <string_view>

#include "cuda_test_util.h"

namespace flashkv::testing {
namespace {

// Whether FLASHKV_CUDA_ARCHS (commas for CMake's semicolons) has sm_90a code for an H100 to
// run: an entry "90a", "90a-real" (machine code) or "90a-virtual" (PTX it compiles at load).
bool BuildHasSm90a(std::string_view archs) {
  size_t begin = 0;
  while (begin <= archs.size()) {
    const size_t end = std::min(archs.find(',', begin), archs.size());
    const std::string_view entry = archs.substr(begin, end - begin);
    if (entry == "90a" || entry == "90a-real" || entry == "90a-virtual") return true;
    begin = end + 1;
  }
  return false;
}

TEST(CudaArchTest, Sm90aEntriesOfTheArchitectureList) {
  EXPECT_TRUE(BuildHasSm90a("90a-real,90-virtual"));
  EXPECT_TRUE(BuildHasSm90a("80,86,89,90a,120"));
  EXPECT_FALSE(BuildHasSm90a("90"));
  EXPECT_TRUE(BuildHasSm90a("90a-virtual"));
  EXPECT_FALSE(BuildHasSm90a("90-real,100a"));
  EXPECT_FALSE(BuildHasSm90a("80,90-virtual"));
}

TEST(CudaArchTest, HopperGpusRunTheBuildsSm90aCode) {
  FLASHKV_REQUIRE_GPU();
  CudaBackend* gpu = SharedCuda();
  const std::string device = gpu->DeviceDescription();
  const bool hopper = device.ends_with("sm_90");
  EXPECT_EQ(gpu->hopper_features(), hopper && BuildHasSm90a(CudaBackend::BuildArchitectures()))
      << device << ", FLASHKV_CUDA_ARCHS=" << CudaBackend::BuildArchitectures();
}

}  // namespace
}  // namespace flashkv::testing
