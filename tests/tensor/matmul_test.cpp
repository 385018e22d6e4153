#include "tensor/matmul.h"

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/dot.h"
#include "tensor/half.h"
#include "test_blocks.h"

namespace flashkv {
namespace {

using testing::RandomActivations;
using testing::RandomRows;

class MatMulTest : public ::testing::TestWithParam<DType> {};

TEST_P(MatMulTest, ThreadCountDoesNotChangeBits) {
  const DType t = GetParam();
  const int64_t rows = 37, n = 512, n_tokens = 7;  // token groups of 4 and a partial one
  const auto w = RandomRows(t, rows, n, 5);
  const auto x = RandomActivations(n * n_tokens, 6);
  const int64_t row_bytes = static_cast<int64_t>(*RowBytes(t, n));
  for (bool q8 : {false, true}) {
    auto run = [&](ThreadPool* pool) {
      std::vector<float> y(static_cast<size_t>(rows * n_tokens));
      (q8 ? MatMulQ8 : MatMulF32)(t, w.data(), rows, n, x.data(), n_tokens, y.data(), pool);
      return y;
    };
    const auto base = run(nullptr);
    // Each output is the single-row dot of its row and token.
    std::vector<uint8_t> xq(static_cast<size_t>(ActQuantBytes(ActQuantFor(t), n)));
    for (int64_t tok = 0; tok < n_tokens; ++tok) {
      QuantizeAct(ActQuantFor(t), x.data() + tok * n, xq.data(), n);
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* row = w.data() + r * row_bytes;
        const float want = q8 ? DotQ8(t, row, xq.data(), n) : DotF32(t, row, x.data() + tok * n, n);
        ASSERT_EQ(FloatBits(base[tok * rows + r]), FloatBits(want))
            << "row " << r << " token " << tok;
      }
    }
    for (int threads : {1, 2, 3, 5}) {
      ThreadPool pool(threads);
      const auto y = run(&pool);
      ASSERT_EQ(std::memcmp(y.data(), base.data(), y.size() * sizeof(float)), 0)
          << GetDTypeInfo(t).name << (q8 ? " q8" : " f32") << " threads=" << threads;
    }
  }
}

TEST_P(MatMulTest, PrequantizedMatchesMatMulQ8) {
  const DType t = GetParam();
  const int64_t rows = 9, n = 256, n_tokens = 2;
  const auto w = RandomRows(t, rows, n, 8);
  const auto x = RandomActivations(n * n_tokens, 9);
  const ActQuant aq = ActQuantFor(t);
  const int64_t ab = ActQuantBytes(aq, n);
  std::vector<float> xq_storage(static_cast<size_t>((ab * n_tokens + 3) / 4));
  auto* xq = reinterpret_cast<uint8_t*>(xq_storage.data());
  for (int64_t tok = 0; tok < n_tokens; ++tok)
    QuantizeAct(aq, x.data() + tok * n, xq + tok * ab, n);
  std::vector<float> a(rows * n_tokens), b(rows * n_tokens);
  ThreadPool pool(2);
  MatMulQ8(t, w.data(), rows, n, x.data(), n_tokens, a.data(), &pool);
  MatMulQ8Prequantized(t, w.data(), rows, n, xq, n_tokens, b.data(), &pool);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatMulTest,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0,
                                           DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K,
                                           DType::kQ6_K, DType::kIQ2_XXS, DType::kMXFP4),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(GetDTypeInfo(info.param).name);
                         });

}  // namespace
}  // namespace flashkv
