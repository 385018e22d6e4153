// Finds added/special token texts ("<｜User｜>", "｜DSML｜", ...) inside text, leftmost and
// then longest, as HF `tokenizers`' AddedVocabulary does. Must not: run BPE. A byte trie:
// the vocabulary has ~800 such texts, most sharing the "<｜" prefix, so a per-position
// list scan would cost hundreds of comparisons at every '<' in source code.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace flashkv {

class SpecialMatcher {
 public:
  void Add(std::string_view text, int32_t id);
  bool empty() const { return nodes_.size() <= 1; }

  struct Match {
    size_t pos = 0;  // byte offset of the match in the searched text
    size_t len = 0;  // 0: no match
    int32_t id = -1;
  };
  // The leftmost match at or after `from`, the longest one at that position.
  Match FindNext(std::string_view text, size_t from) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    int32_t token = -1;
  };
  int32_t Child(int32_t node, uint8_t b) const;

  std::vector<Node> nodes_ = std::vector<Node>(1);
  bool first_byte_[256] = {};
};

}  // namespace flashkv
