#include "tensor/dtype.h"

#include <limits>

#include <gtest/gtest.h>

namespace flashkv {
namespace {

TEST(DTypeTest, RowBytesOfWholeBlocks) {
  EXPECT_EQ(*RowBytes(DType::kF32, 10), 40u);
  EXPECT_EQ(*RowBytes(DType::kF16, 3), 6u);
  EXPECT_EQ(*RowBytes(DType::kQ8_0, 64), 68u);
  EXPECT_EQ(*RowBytes(DType::kQ2_K, 512), 168u);
  EXPECT_EQ(*RowBytes(DType::kQ4_K, 256), 144u);
  EXPECT_EQ(*RowBytes(DType::kIQ2_XXS, 4096), 16u * 66u);
  EXPECT_EQ(*RowBytes(DType::kQ8_0, 0), 0u);
}

TEST(DTypeTest, RowBytesRejectsPartialBlocks) {
  auto r = RowBytes(DType::kQ8_0, 33);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("q8_0"), std::string::npos) << r.status().message();
  EXPECT_FALSE(RowBytes(DType::kQ2_K, 255).ok());
  EXPECT_FALSE(RowBytes(DType::kIQ2_XXS, 128).ok());
}

TEST(DTypeTest, RowBytesRejectsUnknownTypesAndOverflow) {
  auto r = RowBytes(static_cast<DType>(4), 32);  // id 4 (old Q4_2) no longer exists
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  const uint64_t huge = std::numeric_limits<uint64_t>::max() / 32 * 32;
  EXPECT_EQ(RowBytes(DType::kQ8_0, huge).status().code(), StatusCode::kOutOfRange);
  const uint64_t ne[2] = {1ull << 40, 1ull << 40};
  EXPECT_EQ(TensorBytes(DType::kF32, ne, 2).status().code(), StatusCode::kOutOfRange);
}

TEST(DTypeTest, ComputableTypes) {
  for (DType t : {DType::kF32,   DType::kF16,   DType::kBF16,   DType::kQ8_0,   DType::kQ2_K,
                  DType::kQ3_K,  DType::kQ4_K,  DType::kQ5_K,   DType::kQ6_K,   DType::kIQ2_XXS,
                  DType::kQ8_K,  DType::kMXFP4, DType::kIQ2_XS, DType::kIQ1_M,  DType::kIQ3_XXS,
                  DType::kIQ3_S, DType::kIQ2_S, DType::kIQ1_S,  DType::kIQ4_NL, DType::kIQ4_XS})
    EXPECT_TRUE(GetDTypeInfo(t).computable) << GetDTypeInfo(t).name;
  EXPECT_FALSE(GetDTypeInfo(DType::kQ4_0).computable);
  EXPECT_FALSE(GetDTypeInfo(DType::kTQ1_0).computable);
}

}  // namespace
}  // namespace flashkv
