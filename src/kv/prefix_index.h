// The in-memory prefix indexes the snapshot tiers share (DiskCache in kv_disk/, RamCache in
// kv_ram/): a radix tree over token ids and a length-bucketed hash index over rendered
// texts. Both answer "which entries are a prefix of this request", longest first.
// Must not: do I/O or know file formats.
//
// Threading: none; DiskCache guards them with its mutex, RamCache's owner is one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flashkv {

// A compressed trie: each edge holds a run of ids; a node may end one entry.
class TokenPrefixIndex {
 public:
  TokenPrefixIndex();
  ~TokenPrefixIndex();

  // Adds (or replaces) the entry `key` for `tokens` (non-empty).
  void Insert(const std::string& key, std::span<const int32_t> tokens);
  // Removes the entry for `tokens`; false if none.
  bool Erase(std::span<const int32_t> tokens);
  // (key, length) of every entry whose ids are a prefix of `query` (or equal), longest
  // first.
  std::vector<std::pair<std::string, int64_t>> PrefixesOf(std::span<const int32_t> query) const;
  size_t size() const { return size_; }
  // Nodes in the tree (tests check that erasing merges them back).
  size_t node_count() const;

 private:
  struct Node;
  std::unique_ptr<Node> root_;
  size_t size_ = 0;
};

// Texts bucketed by length with a 64-bit FNV-1a hash; one pass over a request's text
// checks every bucket length it reaches. Hash hits are confirmed byte for byte.
class TextPrefixIndex {
 public:
  void Insert(const std::string& key, std::string_view text);
  void Erase(const std::string& key, std::string_view text);
  // (key, text length) of every entry whose text is a byte prefix of `query`, longest
  // first. `text_of` returns an entry's full text for the confirmation.
  std::vector<std::pair<std::string, int64_t>> PrefixesOf(
      std::string_view query,
      const std::function<std::string_view(const std::string&)>& text_of) const;

  static uint64_t Hash(std::string_view text);

 private:
  // length → (hash, key)
  std::map<size_t, std::vector<std::pair<uint64_t, std::string>>> by_length_;
};

// An entry a request can resume from, and whether only its text matched.
struct PrefixMatch {
  std::string key;
  int64_t n_tokens = 0;
  bool by_text = false;
  uint64_t text_bytes = 0;  // of a text match
};

// The entries of both indexes a request continues: each whose ids are a prefix of `tokens`
// or whose text is a byte prefix of `text` (once; an id match wins where both match), kept
// when `usable` gives its token count, in the resume order (kv/resume_point.h ResumeBefore:
// longest first, an id match before a text match of the same length) — the candidates of
// the resume rule, found through the indexes instead of entry by entry.
// `text_of` returns an entry's text for the text index's confirmation.
std::vector<PrefixMatch> MatchPrefixes(
    const TokenPrefixIndex& ids, const TextPrefixIndex& texts, std::span<const int32_t> tokens,
    std::string_view text, const std::function<std::string_view(const std::string&)>& text_of,
    const std::function<std::optional<int64_t>(const std::string&)>& usable);

}  // namespace flashkv
