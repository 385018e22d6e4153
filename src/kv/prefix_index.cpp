#include "kv/prefix_index.h"

#include <algorithm>
#include <cstring>

#include "kv/resume_point.h"

namespace flashkv {

struct TokenPrefixIndex::Node {
  std::vector<int32_t> label;  // ids on the edge into this node
  std::map<int32_t, std::unique_ptr<Node>> children;
  std::string key;  // non-empty: an entry ends here
};

TokenPrefixIndex::TokenPrefixIndex() : root_(std::make_unique<Node>()) {}
TokenPrefixIndex::~TokenPrefixIndex() = default;

void TokenPrefixIndex::Insert(const std::string& key, std::span<const int32_t> tokens) {
  Node* n = root_.get();
  size_t i = 0;
  while (i < tokens.size()) {
    auto it = n->children.find(tokens[i]);
    if (it == n->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->label.assign(tokens.begin() + i, tokens.end());
      n = (n->children[tokens[i]] = std::move(leaf)).get();
      i = tokens.size();
      break;
    }
    Node* c = it->second.get();
    size_t j = 0;
    while (j < c->label.size() && i + j < tokens.size() && c->label[j] == tokens[i + j]) ++j;
    if (j < c->label.size()) {
      // Split the edge: a middle node takes the common run, c keeps the rest.
      auto mid = std::make_unique<Node>();
      mid->label.assign(c->label.begin(), c->label.begin() + j);
      std::unique_ptr<Node> old = std::move(it->second);
      old->label.erase(old->label.begin(), old->label.begin() + j);
      const int32_t first = old->label[0];
      mid->children[first] = std::move(old);
      it->second = std::move(mid);
      c = it->second.get();
    }
    n = c;
    i += j;
  }
  if (n->key.empty()) ++size_;
  n->key = key;
}

bool TokenPrefixIndex::Erase(std::span<const int32_t> tokens) {
  // Path of (parent, child) links to the node.
  std::vector<std::pair<Node*, int32_t>> path;
  Node* n = root_.get();
  size_t i = 0;
  while (i < tokens.size()) {
    auto it = n->children.find(tokens[i]);
    if (it == n->children.end()) return false;
    Node* c = it->second.get();
    if (c->label.size() > tokens.size() - i ||
        !std::equal(c->label.begin(), c->label.end(), tokens.begin() + i)) {
      return false;
    }
    path.emplace_back(n, tokens[i]);
    i += c->label.size();
    n = c;
  }
  if (n->key.empty()) return false;
  n->key.clear();
  --size_;
  // Prune upward: drop empty leaves, merge key-less single-child nodes into their child.
  for (auto p = path.rbegin(); p != path.rend(); ++p) {
    Node* parent = p->first;
    auto it = parent->children.find(p->second);
    Node* c = it->second.get();
    if (!c->key.empty()) break;
    if (c->children.empty()) {
      parent->children.erase(it);
      continue;
    }
    if (c->children.size() == 1) {
      std::unique_ptr<Node> only = std::move(c->children.begin()->second);
      only->label.insert(only->label.begin(), c->label.begin(), c->label.end());
      it->second = std::move(only);
    }
    break;
  }
  return true;
}

std::vector<std::pair<std::string, int64_t>> TokenPrefixIndex::PrefixesOf(
    std::span<const int32_t> query) const {
  std::vector<std::pair<std::string, int64_t>> out;
  const Node* n = root_.get();
  size_t i = 0;
  while (true) {
    if (!n->key.empty()) out.emplace_back(n->key, int64_t(i));
    if (i >= query.size()) break;
    auto it = n->children.find(query[i]);
    if (it == n->children.end()) break;
    const Node* c = it->second.get();
    if (c->label.size() > query.size() - i ||
        !std::equal(c->label.begin(), c->label.end(), query.begin() + i)) {
      break;
    }
    i += c->label.size();
    n = c;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

size_t TokenPrefixIndex::node_count() const {
  size_t count = 0;
  std::vector<const Node*> stack = {root_.get()};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    ++count;
    for (const auto& [id, c] : n->children) stack.push_back(c.get());
  }
  return count;
}

uint64_t TextPrefixIndex::Hash(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

void TextPrefixIndex::Insert(const std::string& key, std::string_view text) {
  if (text.empty()) return;
  by_length_[text.size()].emplace_back(Hash(text), key);
}

void TextPrefixIndex::Erase(const std::string& key, std::string_view text) {
  auto it = by_length_.find(text.size());
  if (it == by_length_.end()) return;
  auto& v = it->second;
  v.erase(std::remove_if(v.begin(), v.end(), [&](const auto& e) { return e.second == key; }),
          v.end());
  if (v.empty()) by_length_.erase(it);
}

std::vector<std::pair<std::string, int64_t>> TextPrefixIndex::PrefixesOf(
    std::string_view query,
    const std::function<std::string_view(const std::string&)>& text_of) const {
  std::vector<std::pair<std::string, int64_t>> out;
  uint64_t h = 1469598103934665603ull;
  size_t pos = 0;
  for (const auto& [len, bucket] : by_length_) {
    if (len > query.size()) break;
    for (; pos < len; ++pos) h = (h ^ static_cast<unsigned char>(query[pos])) * 1099511628211ull;
    for (const auto& [hash, key] : bucket) {
      if (hash != h) continue;
      const std::string_view t = text_of(key);
      if (t.size() == len && std::memcmp(t.data(), query.data(), len) == 0) {
        out.emplace_back(key, int64_t(len));
      }
    }
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<PrefixMatch> MatchPrefixes(
    const TokenPrefixIndex& ids, const TextPrefixIndex& texts, std::span<const int32_t> tokens,
    std::string_view text, const std::function<std::string_view(const std::string&)>& text_of,
    const std::function<std::optional<int64_t>(const std::string&)>& usable) {
  std::map<std::string, bool> found;  // key → by_text
  for (const auto& [key, len] : ids.PrefixesOf(tokens)) found.emplace(key, false);
  if (!text.empty()) {
    for (const auto& [key, len] : texts.PrefixesOf(text, text_of)) found.emplace(key, true);
  }
  std::vector<PrefixMatch> out;
  for (const auto& [key, by_text] : found) {
    if (std::optional<int64_t> n = usable(key)) {
      out.push_back(PrefixMatch{key, *n, by_text, by_text ? text_of(key).size() : 0});
    }
  }
  std::sort(out.begin(), out.end(), [](const PrefixMatch& a, const PrefixMatch& b) {
    return ResumeBefore(a.n_tokens, a.by_text, a.text_bytes, b.n_tokens, b.by_text, b.text_bytes);
  });
  return out;
}

}  // namespace flashkv
