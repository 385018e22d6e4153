// Backend::RandomWeight: the GPU generator (backend/cuda/ops/elementwise.cu) and its CPU
// twin (backend/cpu/cpu_random_weight.cpp) produce the same bytes for every type, including
// the tail of a tensor whose size is not a whole number of 4-byte words — so a
// `random:flash` model on the GPU holds the weights the CPU tests exercise. Label `gpu`.
#include <vector>

#include "cuda_test_util.h"

namespace flashkv::testing {
namespace {

TEST(CudaRandomWeight, BytesEqualTheCpuTwin) {
  FLASHKV_REQUIRE_GPU();
  CudaBackend* gpu = SharedCuda();
  CpuBackend cpu(nullptr);
  struct Case {
    DType type;
    std::array<uint64_t, 3> ne;
  };
  const Case cases[] = {
      {DType::kF32, {64, 5, 1}},        {DType::kF16, {96, 7, 3}},
      {DType::kBF16, {64, 3, 1}},       {DType::kQ8_0, {32, 3, 1}},  // 102 bytes: 2-byte tail
      {DType::kQ8_0, {4096, 9, 1}},     {DType::kQ2_K, {256, 5, 3}},
      {DType::kQ4_K, {512, 3, 1}},      {DType::kIQ2_XXS, {256, 7, 3}},  // 1386 bytes: tail 2
      {DType::kIQ2_XXS, {4096, 64, 8}},
  };
  uint64_t seed = 11;
  for (const Case& c : cases) {
    const std::string name = std::string(GetDTypeInfo(c.type).name);
    auto a = cpu.RandomWeight(name, c.type, c.ne, seed * 0x9e3779b9ull, 0.25f);
    auto b = gpu->RandomWeight(name, c.type, c.ne, seed * 0x9e3779b9ull, 0.25f);
    ++seed;
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    ASSERT_EQ(a->row_bytes, b->row_bytes);
    const size_t bytes = a->row_bytes * c.ne[1] * c.ne[2];
    std::vector<uint8_t> ha(bytes), hb(bytes);
    ASSERT_TRUE(cpu.Read(a->data, ha.data(), bytes).ok());
    ASSERT_TRUE(gpu->Read(b->data, hb.data(), bytes).ok());
    size_t first_diff = bytes;
    for (size_t i = 0; i < bytes && first_diff == bytes; ++i) {
      if (ha[i] != hb[i]) first_diff = i;
    }
    EXPECT_EQ(first_diff, bytes) << name << ": first differing byte of " << bytes;
  }
}

}  // namespace
}  // namespace flashkv::testing
