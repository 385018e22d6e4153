// A whole-model run for tests that compare two placements of the same weights (expert
// shards, the expert cache): every logit of a chunked prefill and of one-token decode steps
// after it, and a bit-for-bit comparison.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "model/model.h"

namespace flashkv::testing {

// Token i of the runs: (i · 53 + 7) mod 1000, inside every tiny vocabulary.
inline std::vector<int32_t> RunTokens(int n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = int32_t((i * 53 + 7) % 1000);
  return t;
}

// `prompt` tokens in chunks of `chunk`, then `decode` one-token steps; [prompt + decode, V].
inline std::vector<float> PrefillThenDecodeLogits(Model& m, int ctx, int prompt, int decode,
                                                  int chunk) {
  auto st = m.NewState(ctx);
  EXPECT_TRUE(st.ok()) << st.status().ToString();
  if (!st.ok()) return {};
  const int V = m.config().n_vocab;
  const auto tokens = RunTokens(prompt + decode);
  std::vector<float> out(size_t(prompt + decode) * size_t(V));
  Status s =
      m.Forward(std::span(tokens).first(size_t(prompt)), *st, LogitsFor::kAll, out.data(), chunk);
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (int i = 0; i < decode; ++i) {
    s = m.Forward(std::span(tokens).subspan(size_t(prompt + i), 1), *st, LogitsFor::kLast,
                  out.data() + size_t(prompt + i) * size_t(V));
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  return out;
}

inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return !a.empty() && a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace flashkv::testing
