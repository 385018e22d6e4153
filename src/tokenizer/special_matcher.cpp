#include "tokenizer/special_matcher.h"

#include <algorithm>

namespace flashkv {

void SpecialMatcher::Add(std::string_view text, int32_t id) {
  if (text.empty()) return;
  first_byte_[static_cast<uint8_t>(text[0])] = true;
  int32_t node = 0;
  for (char c : text) {
    auto b = static_cast<uint8_t>(c);
    auto& kids = nodes_[node].children;
    auto it = std::lower_bound(kids.begin(), kids.end(), b,
                               [](const auto& kid, uint8_t v) { return kid.first < v; });
    if (it != kids.end() && it->first == b) {
      node = it->second;
      continue;
    }
    auto next = static_cast<int32_t>(nodes_.size());
    kids.insert(it, {b, next});  // may reallocate nodes_ below: `kids` is not used after
    nodes_.emplace_back();
    node = next;
  }
  // A text listed twice keeps its first id.
  if (nodes_[node].token < 0) nodes_[node].token = id;
}

int32_t SpecialMatcher::Child(int32_t node, uint8_t b) const {
  const auto& kids = nodes_[node].children;
  auto it = std::lower_bound(kids.begin(), kids.end(), b,
                             [](const auto& kid, uint8_t v) { return kid.first < v; });
  return it != kids.end() && it->first == b ? it->second : -1;
}

SpecialMatcher::Match SpecialMatcher::FindNext(std::string_view text, size_t from) const {
  for (size_t i = from; i < text.size(); ++i) {
    if (!first_byte_[static_cast<uint8_t>(text[i])]) continue;
    Match best;
    int32_t node = 0;
    for (size_t j = i; j < text.size(); ++j) {
      node = Child(node, static_cast<uint8_t>(text[j]));
      if (node < 0) break;
      if (nodes_[node].token >= 0) best = Match{i, j - i + 1, nodes_[node].token};
    }
    if (best.len > 0) return best;
  }
  return Match{text.size(), 0, -1};
}

}  // namespace flashkv
