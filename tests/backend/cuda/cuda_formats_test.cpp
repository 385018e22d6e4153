// Tensor types the CUDA backend has no kernels for yet (Q3_K, Q5_K, Q6_K, MXFP4; the CPU
// backend runs them) are refused by PlaceWeight before anything is uploaded, the tensor and
// type named; the types it runs are still placed. Label `gpu`.
#include <vector>

#include "cuda_test_util.h"

namespace flashkv::testing {
namespace {

TEST(CudaFormats, TypesWithoutKernelsAreRefusedAtPlacement) {
  FLASHKV_REQUIRE_GPU();
  CudaBackend* gpu = SharedCuda();
  for (DType t : {DType::kMXFP4, DType::kQ3_K, DType::kQ5_K, DType::kQ6_K}) {
    const uint64_t ne0 = 256, rows = 4;
    std::vector<uint8_t> bytes(*RowBytes(t, ne0) * rows, 0);
    WeightSource src{"blk.0.ffn_gate_exps.weight", t, {ne0, rows, 1}, bytes.data(), bytes.size()};
    const auto w = gpu->PlaceWeight(src);
    ASSERT_FALSE(w.ok()) << GetDTypeInfo(t).name;
    EXPECT_EQ(w.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(w.status().message().find("blk.0.ffn_gate_exps.weight has type " +
                                        std::string(GetDTypeInfo(t).name)),
              std::string::npos)
        << w.status().message();
  }
  std::vector<uint8_t> q8(*RowBytes(DType::kQ8_0, 256) * 4, 0);
  WeightSource ok{"w", DType::kQ8_0, {256, 4, 1}, q8.data(), q8.size()};
  EXPECT_TRUE(gpu->PlaceWeight(ok).ok());
}

}  // namespace
}  // namespace flashkv::testing
