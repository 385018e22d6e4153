#include "engine/prefix_match.h"

#include <algorithm>

namespace flashkv {

size_t CommonTokenPrefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

bool IsTokenPrefix(std::span<const int32_t> prefix, std::span<const int32_t> whole) {
  return prefix.size() <= whole.size() && CommonTokenPrefix(prefix, whole) == prefix.size();
}

}  // namespace flashkv
