// States of a growing conversation for the chunk tests: the compressed and indexer rows
// are a function of (layer, row) only — as the model makes them a function of the ids
// before them — so states of one sequence at different lengths agree on every closed row,
// while the window ring and the frontiers are drawn afresh for each length.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "snapshot/snapshot_chunks.h"
#include "state/kv_state.h"

namespace flashkv::testing {

inline float RowValue(size_t layer, uint64_t row, uint64_t col, uint32_t salt) {
  uint64_t x = (uint64_t(layer) << 48) ^ (row << 20) ^ col ^ (uint64_t(salt) << 40);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return float(int64_t(x % 20001) - 10000) / 1000.0f;
}

// Host layers (ReadLayer layout) of the state at `n` tokens of sequence `salt`; rows of
// windows inside the first `shared_tokens` tokens are those of salt 0 (a shared prompt).
inline std::vector<std::vector<float>> GrownLayers(const KvShape& shape, int64_t n, uint32_t salt,
                                                   uint32_t tail_seed, int64_t shared_tokens = 0) {
  std::mt19937 rng(tail_seed);
  std::normal_distribution<float> dist;
  std::vector<std::vector<float>> out;
  for (size_t l = 0; l < shape.layers.size(); ++l) {
    size_t floats = 0;
    for (KvSection s : {KvSection::kRaw, KvSection::kCompressed, KvSection::kCompressorKv,
                        KvSection::kCompressorScore, KvSection::kIndexerRows, KvSection::kIndexerKv,
                        KvSection::kIndexerScore}) {
      floats += KvState::SectionFloatsFor(shape, int(l), s, n);
    }
    std::vector<float> v(floats);
    for (float& x : v) x = dist(rng);
    const LayerRowSpans r = RowSpansOf(shape, int(l), n);
    if (r.ratio > 0) {
      const uint64_t rows = uint64_t(n / r.ratio);
      for (uint64_t i = 0; i < rows; ++i) {
        const uint32_t row_salt = int64_t(i + 1) * r.ratio <= shared_tokens ? 0 : salt;
        for (uint64_t c = 0; c < r.comp_row; ++c) {
          v[r.comp_offset + i * r.comp_row + c] = RowValue(l, i, c, row_salt);
        }
        for (uint64_t c = 0; c < r.index_row; ++c) {
          v[r.index_offset + i * r.index_row + c] = RowValue(l, i, 1000 + c, row_salt);
        }
      }
    }
    out.push_back(std::move(v));
  }
  return out;
}

inline void WriteGrown(KvState& st, const std::vector<std::vector<float>>& layers, int64_t n) {
  ASSERT_TRUE(st.SetTokenCount(n).ok());
  for (size_t l = 0; l < layers.size(); ++l) {
    ASSERT_TRUE(st.WriteLayer(int(l), layers[l].data()).ok());
  }
}

inline void ExpectLayers(const KvState& st, const std::vector<std::vector<float>>& layers) {
  for (size_t l = 0; l < layers.size(); ++l) {
    std::vector<float> got(st.LayerFloats(int(l)));
    ASSERT_EQ(got.size(), layers[l].size()) << "layer " << l;
    ASSERT_TRUE(st.ReadLayer(int(l), got.data()).ok());
    EXPECT_EQ(std::memcmp(got.data(), layers[l].data(), got.size() * 4), 0) << "layer " << l;
  }
}

}  // namespace flashkv::testing
