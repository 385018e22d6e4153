// TokenConstraint: constrained decoding over a byte-level BPE vocabulary. A token is
// allowed iff its whole byte string can be consumed by the grammar from the current state
// (JsonMatcher on a copy), so the mask is exact for the DeepSeek vocabulary: no token that
// would break the value is ever sampled, and none that keeps it valid is lost. The tokens'
// bytes are put once in a trie (TokenTrie) so shared prefixes are tried once per step.
// Inside a string, where nearly every token fits, the plain-text tokens are allowed by
// their character count and only the others walk the trie (a 129k vocabulary: ~100 ms a
// step the slow way, see docs/SERVER.md).
// Special tokens are never allowed; EOS only where the value can end.
// Must not: sample (the engine masks the logits, then samples as usual) or know tokenizers.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "constrain/json_matcher.h"

namespace flashkv {

class TokenTrie {
 public:
  // token_bytes[id]: what id decodes to; ids with `usable[id]` false (special tokens) and
  // empty ones are left out.
  TokenTrie(const std::vector<std::string>& token_bytes, const std::vector<bool>& usable);

  struct Node {
    std::vector<std::pair<uint8_t, int>> children;  // byte → node
    std::vector<int32_t> ids;                       // tokens whose bytes end here
  };
  // The whole vocabulary, and the tokens that are not plain string text (below) alone.
  const std::vector<Node>& all() const { return nodes_; }
  const std::vector<Node>& not_plain() const { return not_plain_nodes_; }
  // Per id: how many characters the token is when it is plain string text — no '"', '\\'
  // or control characters, whole valid UTF-8 characters — else -1 (and for left-out ids).
  const std::vector<int32_t>& plain_chars() const { return plain_chars_; }
  size_t vocab_size() const { return vocab_size_; }

 private:
  std::vector<Node> nodes_;            // [0]: the root (no bytes)
  std::vector<Node> not_plain_nodes_;  // the same for the tokens that are not plain
  std::vector<int32_t> plain_chars_;
  size_t vocab_size_ = 0;
};

class TokenConstraint {
 public:
  TokenConstraint(std::shared_ptr<const JsonGrammar> grammar, std::shared_ptr<const TokenTrie> trie,
                  int32_t eos_id);

  // logits: [n_vocab]. Every token that cannot continue the value gets -infinity. Returns
  // how many are left (0: nothing can continue, the request must end).
  size_t Mask(std::span<float> logits) const;
  // After a pick: advances over the token's bytes; false if they cannot continue the value.
  bool Accept(std::string_view bytes);
  // The value is complete and nothing may follow: generation ends.
  bool done() const { return matcher_.done(); }

 private:
  void Walk(const std::vector<TokenTrie::Node>& nodes, int node, const JsonMatcher& m,
            std::vector<char>* allowed) const;

  JsonMatcher matcher_;
  std::shared_ptr<const TokenTrie> trie_;
  int32_t eos_id_;
};

}  // namespace flashkv
