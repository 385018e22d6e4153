// Synthetic states and temp directories shared by the kv tests.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "kv/kv_state.h"
#include "kv/snapshot_codec.h"
#include "util/sha1.h"

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

inline SnapshotIdentity TestIdentity(std::string_view model = "model-a") {
  return SnapshotIdentity{Sha1Of(model), "official/q8"};
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

inline std::vector<int32_t> Tokens(int64_t n, int32_t salt = 0) {
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = int32_t((i * 7 + salt) % 1000);
  return t;
}

inline std::vector<float> Logits(int n_vocab, float salt = 0) {
  std::vector<float> v(n_vocab);
  for (int i = 0; i < n_vocab; ++i) v[i] = float(i) * 0.25f + salt;
  return v;
}

// n pseudo-random bytes from a seed: object payloads for the remote-store tests.
inline std::string BytePattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (char& c : s) {
    x = x * 1664525u + 1013904223u;
    c = char(x >> 24);
  }
  return s;
}

inline std::string MakeTempDir(const char* what) {
  std::string tmpl = ::testing::TempDir() + what + ".XXXXXX";
  EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

}  // namespace flashkv::testing
