#include "constrain/token_constraint.h"

#include <limits>

namespace flashkv {

namespace {

// Characters in `bytes` when it is plain JSON string text (JsonMatcher's string rules),
// else -1.
int32_t PlainChars(const std::string& bytes) {
  int32_t chars = 0;
  for (size_t i = 0; i < bytes.size();) {
    const uint8_t c = uint8_t(bytes[i]);
    if (c == '"' || c == '\\' || c < 0x20) return -1;
    size_t len = 1;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0x80) {
      if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
      } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
      } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
      } else {
        return -1;
      }
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    }
    if (i + len > bytes.size()) return -1;  // a character cut by the token's end
    for (size_t k = 1; k < len; ++k) {
      const uint8_t d = uint8_t(bytes[i + k]);
      if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF)) return -1;
    }
    i += len;
    ++chars;
  }
  return chars;
}

void Insert(std::vector<TokenTrie::Node>* nodes, const std::string& bytes, int32_t id) {
  int at = 0;
  for (char ch : bytes) {
    const uint8_t b = uint8_t(ch);
    int next = -1;
    for (const auto& [cb, child] : (*nodes)[size_t(at)].children) {
      if (cb == b) next = child;
    }
    if (next < 0) {
      next = int(nodes->size());
      (*nodes)[size_t(at)].children.emplace_back(b, next);
      nodes->emplace_back();
    }
    at = next;
  }
  (*nodes)[size_t(at)].ids.push_back(id);
}

}  // namespace

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes, const std::vector<bool>& usable)
    : plain_chars_(token_bytes.size(), -1), vocab_size_(token_bytes.size()) {
  nodes_.emplace_back();
  not_plain_nodes_.emplace_back();
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    const std::string& bytes = token_bytes[id];
    if (bytes.empty() || (id < usable.size() && !usable[id])) continue;
    Insert(&nodes_, bytes, int32_t(id));
    plain_chars_[id] = PlainChars(bytes);
    if (plain_chars_[id] < 0) Insert(&not_plain_nodes_, bytes, int32_t(id));
  }
}

TokenConstraint::TokenConstraint(std::shared_ptr<const JsonGrammar> grammar,
                                 std::shared_ptr<const TokenTrie> trie, int32_t eos_id)
    : matcher_(std::move(grammar)), trie_(std::move(trie)), eos_id_(eos_id) {}

void TokenConstraint::Walk(const std::vector<TokenTrie::Node>& nodes, int node,
                           const JsonMatcher& m, std::vector<char>* allowed) const {
  for (const auto& [b, child] : nodes[size_t(node)].children) {
    JsonMatcher next = m;
    if (!next.Feed(b)) continue;
    for (int32_t id : nodes[size_t(child)].ids) (*allowed)[size_t(id)] = 1;
    Walk(nodes, child, next, allowed);
  }
}

size_t TokenConstraint::Mask(std::span<float> logits) const {
  std::vector<char> allowed(logits.size(), 0);
  int64_t room = 0;
  if (matcher_.InPlainString(&room)) {
    // Every plain token that fits; the others ('"', escapes, cut characters) walk.
    const std::vector<int32_t>& chars = trie_->plain_chars();
    for (size_t id = 0; id < chars.size() && id < allowed.size(); ++id) {
      if (chars[id] >= 0 && chars[id] <= room) allowed[id] = 1;
    }
    Walk(trie_->not_plain(), 0, matcher_, &allowed);
  } else if (!matcher_.done()) {
    Walk(trie_->all(), 0, matcher_, &allowed);
  }
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
