#include <vector>

#include <gtest/gtest.h>

#include "backend_test_util.h"

namespace flashkv {
namespace {

using testing::Upload;
using testing::Zeros;

// One head of width 2, weight 1, query (1, 0): the score of row w is max(0, rows[w].x).
struct IndexerCase {
  std::vector<float> rows;  // [n_rows, 2]
  int64_t pos0;
  int n_tokens;
  int ratio;
  int top_k;
};

std::vector<int32_t> Select(const IndexerCase& ic) {
  CpuBackend be(nullptr);
  std::vector<float> q, w;
  for (int i = 0; i < ic.n_tokens; ++i) {
    q.insert(q.end(), {1.0f, 0.0f});
    w.push_back(1.0f);
  }
  auto dq = Upload<float>(be, q);
  auto dw = Upload<float>(be, w);
  auto rows = Upload<float>(be, ic.rows);
  auto sel = Zeros<int32_t>(be, size_t(ic.n_tokens) * ic.top_k);
  IndexerArgs a{dq.ptr(),    dw.ptr(), 1.0f, rows.ptr(), sel.ptr(), ic.pos0,
                ic.n_tokens, 1,        2,    ic.ratio,   ic.top_k};
  be.IndexerTopK(a);
  return sel.Get(be);
}

// A token at position p sees only rows w < (p + 1) / ratio, however good later rows score.
TEST(IndexerTest, OnlyClosedWindowsAreVisible) {
  // Rows 0..4 score 1, 2, 3, 9, 8. Ratio 4, top-2.
  const std::vector<float> rows = {1, 0, 2, 0, 3, 0, 9, 0, 8, 0};
  // Position 11 sees rows 0..2 (3 > 2, so scoring runs): picks rows 1 and 2.
  EXPECT_EQ(Select({rows, 11, 1, 4, 2}), (std::vector<int32_t>{1, 2}));
  // Position 15 sees rows 0..3: picks 2 and 3, ascending.
  EXPECT_EQ(Select({rows, 15, 1, 4, 2}), (std::vector<int32_t>{2, 3}));
  // Position 14 still sees only rows 0..2.
  EXPECT_EQ(Select({rows, 14, 1, 4, 2}), (std::vector<int32_t>{1, 2}));
}

// With at most top_k visible rows everything visible is selected, padded with -1.
TEST(IndexerTest, FewRowsSelectsAllVisible) {
  const std::vector<float> rows = {5, 0, 1, 0, 7, 0};
  // Tokens at positions 3..8 (ratio 4, top-3): visible counts 1,1,1,1,2,2.
  const auto sel = Select({rows, 3, 6, 4, 3});
  const std::vector<int32_t> want = {0, -1, -1, 0, -1, -1, 0, -1, -1,
                                     0, -1, -1, 0, 1,  -1, 0, 1,  -1};
  EXPECT_EQ(sel, want);
}

// Equal scores go to the lower row id; ReLU makes every negative score an equal 0.
TEST(IndexerTest, TiesGoToTheLowestRow) {
  const std::vector<float> rows = {-1, 0, 4, 0, -2, 0, 4, 0, -3, 0, 0, 0};
  // Position 23, ratio 4: 6 rows visible, scores 0, 4, 0, 4, 0, 0; top-3 → 1, 3, then 0.
  EXPECT_EQ(Select({rows, 23, 1, 4, 3}), (std::vector<int32_t>{0, 1, 3}));
}

}  // namespace
}  // namespace flashkv
