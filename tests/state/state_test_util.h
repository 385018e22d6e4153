// Synthetic KvStates shared by the state tests and, through kv_test_util.h, the kv tests.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "backend/backend.h"
#include "state/kv_state.h"

namespace flashkv::testing {

// Three layers like a tiny DS4: sliding only, ratio 4 with overlap + indexer, ratio 8
// without. head_dim 4, window 8, indexer dim 2.
inline KvShape SmallShape(int ctx = 64) {
  KvShape s;
  s.head_dim = 4;
  s.n_swa = 8;
  s.indexer_dim = 2;
  s.ctx_size = ctx;
  s.layers = {KvLayerShape{0, false, false}, KvLayerShape{4, true, true},
              KvLayerShape{8, false, false}};
  return s;
}

// A state of `n_tokens` whose every live float is drawn from `seed`.
inline KvState RandomState(Backend& be, const KvShape& shape, int64_t n_tokens, uint32_t seed) {
  auto st = KvState::Create(be, shape);
  EXPECT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_TRUE(st->SetTokenCount(n_tokens).ok());
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  for (size_t l = 0; l < shape.layers.size(); ++l) {
    std::vector<float> v(st->LayerFloats(int(l)));
    for (float& x : v) x = dist(rng);
    EXPECT_TRUE(st->WriteLayer(int(l), v.data()).ok());
  }
  return std::move(*st);
}

inline std::vector<float> LayerOf(const KvState& st, int l) {
  std::vector<float> v(st.LayerFloats(l));
  EXPECT_TRUE(st.ReadLayer(l, v.data()).ok());
  return v;
}

}  // namespace flashkv::testing
