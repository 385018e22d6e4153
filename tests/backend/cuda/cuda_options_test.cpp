// CudaOptionsFromEnvironment (backend/cuda/cuda_options.cpp): the FLASHKV_CUDA_* variables'
// defaults, ranges and errors, and an explicit option beating its variable. Host code only:
// runs without a GPU (the binary's label is `gpu`, so CI reaches it through the device runs).
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"

namespace flashkv::testing {
namespace {

// The variables, in the order of Fields below.
const char* const kVariables[] = {"FLASHKV_CUDA_GRAPHS",        "FLASHKV_CUDA_PDL",
                                  "FLASHKV_CUDA_IMMA",          "FLASHKV_CUDA_IMMA_MIN_TOKENS",
                                  "FLASHKV_CUDA_TILED",         "FLASHKV_CUDA_FUSED",
                                  "FLASHKV_CUDA_TILE_BYTES",    "FLASHKV_CUDA_TILE_BLOCKS_PER_SM",
                                  "FLASHKV_CUDA_MOE_GROUP_MAX", "FLASHKV_CUDA_IMMA_FEW",
                                  "FLASHKV_CUDA_MOE_NARROW",    "FLASHKV_CUDA_FINISH_BATCH"};

// Clears the variables for one test and puts the process's values back after it.
class CudaOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kVariables) {
      const char* v = std::getenv(name);
      saved_.push_back(v != nullptr ? std::optional<std::string>(v) : std::nullopt);
      ::unsetenv(name);
    }
  }
  void TearDown() override {
    for (size_t i = 0; i < saved_.size(); ++i) {
      if (saved_[i]) {
        ::setenv(kVariables[i], saved_[i]->c_str(), 1);
      } else {
        ::unsetenv(kVariables[i]);
      }
    }
  }
  static CudaBackendOptions Resolve(const CudaBackendOptions& o = {}) {
    auto r = CudaOptionsFromEnvironment(o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : CudaBackendOptions{};
  }

 private:
  std::vector<std::optional<std::string>> saved_;
};

// The settings, in the order of kVariables.
std::vector<int> Fields(const CudaBackendOptions& o) {
  return {o.graphs,        o.pdl,      o.imma,       o.imma_min_tokens,
          o.tiled,         o.fused,    o.tile_bytes, o.tile_blocks_per_sm,
          o.moe_group_max, o.imma_few, o.moe_narrow, o.finish_batch};
}

TEST_F(CudaOptionsTest, UnsetVariablesGiveTheDefaults) {
  EXPECT_EQ(Fields(Resolve()), (std::vector<int>{1, 1, 1, kCudaImmaMinTokens, 1, 1, kCudaTileBytes,
                                                 kCudaTileBlocksPerSm, kCudaMoeGroupMaxTokens,
                                                 kCudaImmaFew, kCudaMoeNarrowBelow, 1}));
}

TEST_F(CudaOptionsTest, VariablesSetTheFieldsAndExplicitOptionsBeatThem) {
  const std::vector<int> from_env = {0, 0, 0, 2, 0, 0, 32768, 4, 64, 3, 5, 1};
  for (size_t i = 0; i < from_env.size(); ++i) {
    ::setenv(kVariables[i], std::to_string(from_env[i]).c_str(), 1);
  }
  EXPECT_EQ(Fields(Resolve()), from_env);
  const CudaBackendOptions explicit_options{.device = 0,
                                            .graphs = 1,
                                            .imma = 3,
                                            .imma_min_tokens = 16,
                                            .imma_few = 2,
                                            .tiled = 1,
                                            .fused = 1,
                                            .pdl = 1,
                                            .tile_bytes = 8192,
                                            .tile_blocks_per_sm = 2,
                                            .moe_group_max = 0,
                                            .moe_narrow = 9,
                                            .finish_batch = 0};
  EXPECT_EQ(Fields(Resolve(explicit_options)),
            (std::vector<int>{1, 1, 3, 16, 1, 1, 8192, 2, 0, 2, 9, 0}));
}

// A switch is on for any value but "0" (an empty one included), as before.
TEST_F(CudaOptionsTest, SwitchesAreOnUnlessZero) {
  ::setenv("FLASHKV_CUDA_GRAPHS", "", 1);
  ::setenv("FLASHKV_CUDA_FUSED", "off", 1);
  const CudaBackendOptions o = Resolve();
  EXPECT_EQ(o.graphs, 1);
  EXPECT_EQ(o.fused, 1);
}

// The measurement settings fall back to their defaults out of range; the tensor-core ones
// are errors.
TEST_F(CudaOptionsTest, OutOfRangeValues) {
  ::setenv("FLASHKV_CUDA_TILE_BYTES", "1000", 1);
  ::setenv("FLASHKV_CUDA_TILE_BLOCKS_PER_SM", "17", 1);
  ::setenv("FLASHKV_CUDA_MOE_GROUP_MAX", "-3", 1);
  ::setenv("FLASHKV_CUDA_MOE_NARROW", "-1", 1);
  CudaBackendOptions o = Resolve();
  EXPECT_EQ(o.moe_narrow, kCudaMoeNarrowBelow);
  EXPECT_EQ(o.tile_bytes, kCudaTileBytes);
  EXPECT_EQ(o.tile_blocks_per_sm, kCudaTileBlocksPerSm);
  EXPECT_EQ(o.moe_group_max, kCudaMoeGroupMaxTokens);
  ::setenv("FLASHKV_CUDA_TILE_BYTES", std::to_string(kCudaTileMaxBytes + 1).c_str(), 1);
  EXPECT_EQ(Resolve().tile_bytes, kCudaTileBytes);

  ::setenv("FLASHKV_CUDA_IMMA", "9", 1);
  EXPECT_FALSE(CudaOptionsFromEnvironment({}).ok());
  ::unsetenv("FLASHKV_CUDA_IMMA");
  ::setenv("FLASHKV_CUDA_IMMA_MIN_TOKENS", "0", 1);
  EXPECT_FALSE(CudaOptionsFromEnvironment({}).ok());
  ::unsetenv("FLASHKV_CUDA_IMMA_MIN_TOKENS");
  ::setenv("FLASHKV_CUDA_IMMA_FEW", "4", 1);
  EXPECT_FALSE(CudaOptionsFromEnvironment({}).ok());
  ::unsetenv("FLASHKV_CUDA_IMMA_FEW");
  CudaBackendOptions bad;
  bad.imma_min_tokens = 0;
  EXPECT_FALSE(CudaOptionsFromEnvironment(bad).ok());
}

}  // namespace
}  // namespace flashkv::testing
