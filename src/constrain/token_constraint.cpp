#include "constrain/token_constraint.h"

#include <limits>

namespace flashkv {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes, const std::vector<bool>& usable)
    : vocab_size_(token_bytes.size()) {
  nodes_.emplace_back();
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    const std::string& bytes = token_bytes[id];
    if (bytes.empty() || (id < usable.size() && !usable[id])) continue;
    int at = 0;
    for (char ch : bytes) {
      const uint8_t b = uint8_t(ch);
      int next = -1;
      for (const auto& [cb, child] : nodes_[size_t(at)].children) {
        if (cb == b) next = child;
      }
      if (next < 0) {
        next = int(nodes_.size());
        nodes_[size_t(at)].children.emplace_back(b, next);
        nodes_.emplace_back();
      }
      at = next;
    }
    nodes_[size_t(at)].ids.push_back(int32_t(id));
  }
}

TokenConstraint::TokenConstraint(std::shared_ptr<const JsonGrammar> grammar,
                                 std::shared_ptr<const TokenTrie> trie, int32_t eos_id)
    : matcher_(std::move(grammar)), trie_(std::move(trie)), eos_id_(eos_id) {}

void TokenConstraint::Walk(int node, const JsonMatcher& m, std::vector<char>* allowed) const {
  for (const auto& [b, child] : trie_->node(node).children) {
    JsonMatcher next = m;
    if (!next.Feed(b)) continue;
    for (int32_t id : trie_->node(child).ids) (*allowed)[size_t(id)] = 1;
    Walk(child, next, allowed);
  }
}

size_t TokenConstraint::Mask(std::span<float> logits) const {
  std::vector<char> allowed(logits.size(), 0);
  if (!matcher_.done()) Walk(0, matcher_, &allowed);
  if (eos_id_ >= 0 && size_t(eos_id_) < logits.size() && matcher_.can_end()) {
    allowed[size_t(eos_id_)] = 1;
  }
  size_t left = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (allowed[i]) {
      ++left;
    } else {
      logits[i] = -std::numeric_limits<float>::infinity();
    }
  }
  return left;
}

bool TokenConstraint::Accept(std::string_view bytes) {
  JsonMatcher next = matcher_;
  for (char ch : bytes) {
    if (!next.Feed(uint8_t(ch))) return false;
  }
  matcher_ = std::move(next);
  return true;
}

}  // namespace flashkv
