// Prefix comparisons the resume cascade is built from: token-id prefixes (the exact key)
// and byte prefixes of rendered text (the key that survives BPE boundary differences when a
// client resends sampled text). Must not: own sessions or tokenize (callers pass ids).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace flashkv {

// Length of the longest common prefix of two id sequences.
size_t CommonTokenPrefix(std::span<const int32_t> a, std::span<const int32_t> b);

// True when `prefix` is a (not necessarily strict) prefix of `whole`.
bool IsTokenPrefix(std::span<const int32_t> prefix, std::span<const int32_t> whole);

// True when `prefix` is a byte prefix of `whole`.
inline bool IsBytePrefix(std::string_view prefix, std::string_view whole) {
  return prefix.size() <= whole.size() && whole.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace flashkv
