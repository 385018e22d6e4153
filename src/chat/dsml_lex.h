// Lexical pieces of DSML shared by the output parser (generated text → tool calls) and the
// syntax tracker (which bytes are sampled greedily). They must agree on where a tag ends and
// what an attribute holds, or sampling and parsing would disagree about the same bytes.
// Must not: know about blocks, invokes or parameters (that is the parser's grammar).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace flashkv::dsml_lex {

// A tag longer than this without its '>' is not DSML; the block is abandoned.
inline constexpr size_t kMaxTagBytes = 4096;

// Concatenation without operator+ chains (GCC 12 -Wrestrict false positives on them).
std::string Cat(std::initializer_list<std::string_view> parts);

inline bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// Position of the '>' closing the tag that starts at text[pos] == '<' (quotes respected),
// looking at most `max_bytes` ahead of pos. npos when not (yet) found.
size_t TagEnd(std::string_view text, size_t pos, size_t max_bytes);

// The raw (still entity-encoded) value of attribute `key` in a complete opening tag.
std::optional<std::string_view> RawAttribute(std::string_view tag, std::string_view key);

}  // namespace flashkv::dsml_lex
