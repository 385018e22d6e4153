#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "backend_test_util.h"

namespace flashkv {
namespace {

using testing::DevVec;
using testing::F32Weight;
using testing::Upload;
using testing::Zeros;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One compressor's frontier and rows on the CPU backend.
struct Compressor {
  Compressor(Backend& be, int ratio, int d_c, bool overlap, std::vector<float> ape_values, int cap)
      : be(be), ratio(ratio), d_c(d_c), overlap(overlap), ape_host(std::move(ape_values)) {
    const int c = overlap ? 2 : 1;
    width = c * d_c;
    ape = F32Weight(be, {uint64_t(width), uint64_t(ratio)}, ape_host);
    state_kv = Zeros<float>(be, size_t(c * ratio) * width);
    state_score = Upload<float>(be, std::vector<float>(size_t(c * ratio) * width, kNegInf));
    rows = Zeros<float>(be, size_t(cap) * d_c);
  }
  // Feeds tokens [first, first + n) of kv/score ([*, width] host arrays).
  void Feed(const std::vector<float>& kv, const std::vector<float>& score, int first, int n) {
    auto dkv = Upload<float>(
        be, std::vector<float>(kv.begin() + first * width, kv.begin() + (first + n) * width));
    auto dsc = Upload<float>(
        be, std::vector<float>(score.begin() + first * width, score.begin() + (first + n) * width));
    CompressorArgs a{dkv.ptr(),  dsc.ptr(), &ape, state_kv.ptr(), state_score.ptr(),
                     rows.ptr(), first,     n,    ratio,          overlap,
                     d_c};
    be.CompressorUpdate(a);
  }

  Backend& be;
  int ratio, d_c;
  bool overlap;
  int width = 0;
  std::vector<float> ape_host;
  Weight ape;
  DevVec<float> state_kv, state_score, rows;
};

// HCA, ratio 2, one channel: softmax over the window's two slots of score + ape.
// ape = [0, ln 3] gives weights 1/4, 3/4 in every window.
TEST(CompressorTest, NonOverlappingWindowPoolsBySoftmax) {
  CpuBackend be(nullptr);
  Compressor c(be, 2, 1, false, {0.0f, std::log(3.0f)}, 4);
  const std::vector<float> kv = {1, 3, 5, 7};
  const std::vector<float> score = {0, 0, 0, 0};
  c.Feed(kv, score, 0, 4);
  const auto rows = c.rows.Get(be);
  EXPECT_FLOAT_EQ(rows[0], (1 * 1 + 3 * 3) / 4.0f);
  EXPECT_FLOAT_EQ(rows[1], (5 * 1 + 7 * 3) / 4.0f);
  // The open window is cleared after it closes.
  const auto sc = c.state_score.Get(be);
  EXPECT_EQ(sc[0], kNegInf);
  EXPECT_EQ(sc[1], kNegInf);
}

// CSA, ratio 2, one channel (width 2: [first half a | second half b]). Window 0 pools
// only its own second halves (the previous window is empty, weight 0); window 1 pools
// window 0's first halves with its own second halves. Equal scores: plain averages.
TEST(CompressorTest, OverlappingWindowPoolsPreviousFirstHalves) {
  CpuBackend be(nullptr);
  Compressor c(be, 2, 1, true, {0, 0, 0, 0}, 4);
  const std::vector<float> kv = {1, 10, 2, 20, 3, 30, 4, 40};
  const std::vector<float> score(8, 0.0f);
  c.Feed(kv, score, 0, 4);
  const auto rows = c.rows.Get(be);
  EXPECT_FLOAT_EQ(rows[0], (10 + 20) / 2.0f);
  EXPECT_FLOAT_EQ(rows[1], (1 + 2 + 30 + 40) / 4.0f);
  // Frontier (ds4 layout, rows 0..1 previous window, 2..3 open): previous = tokens 2, 3.
  const auto st = c.state_kv.Get(be);
  EXPECT_EQ(st, (std::vector<float>{3, 30, 4, 40, 0, 0, 0, 0}));
}

// The frontier is carried across chunk boundaries: any split of the same tokens gives the
// same rows and the same state, bit for bit.
TEST(CompressorTest, ChunkBoundariesDoNotChangeRowsOrState) {
  const int ratio = 4, d_c = 3, n = 23;
  for (bool overlap : {true, false}) {
    const int width = (overlap ? 2 : 1) * d_c;
    std::vector<float> kv(size_t(n) * width), score(size_t(n) * width);
    for (size_t i = 0; i < kv.size(); ++i) {
      kv[i] = std::sin(0.37f * float(i)) * 3.0f;
      score[i] = std::cos(0.91f * float(i)) * 2.0f;
    }
    std::vector<float> ape(size_t(width) * ratio);
    for (size_t i = 0; i < ape.size(); ++i) ape[i] = 0.1f * float(i % 7) - 0.3f;

    auto run = [&](const std::vector<int>& chunks) {
      ThreadPool pool(2);
      CpuBackend be(&pool);
      Compressor c(be, ratio, d_c, overlap, ape, n / ratio + 2);
      int first = 0;
      for (int len : chunks) {
        c.Feed(kv, score, first, len);
        first += len;
      }
      EXPECT_EQ(first, n);
      std::vector<float> all = c.rows.Get(be);
      for (float v : c.state_kv.Get(be)) all.push_back(v);
      for (float v : c.state_score.Get(be)) all.push_back(v);
      return all;
    };
    const auto whole = run({n});
    const auto ones = run(std::vector<int>(n, 1));
    const auto mixed = run({5, 7, 3, 8});
    ASSERT_EQ(whole.size(), ones.size());
    EXPECT_EQ(std::memcmp(whole.data(), ones.data(), whole.size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(whole.data(), mixed.data(), whole.size() * sizeof(float)), 0);
  }
}

}  // namespace
}  // namespace flashkv
