// Synthetic states (the state tests' SmallShape, RandomState, LayerOf) and temp directories
// shared by the kv tests.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../state/state_test_util.h"
#include "backend/cpu/cpu_backend.h"
#include "snapshot/snapshot_codec.h"
#include "state/kv_state.h"
#include "util/sha1.h"

namespace flashkv::testing {

inline SnapshotIdentity TestIdentity(std::string_view model = "model-a") {
  return SnapshotIdentity{Sha1Of(model), "official/q8"};
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
