// UTF-8 validity helpers shared by the encoder (which must keep invalid bytes away from
// PCRE2's UTF mode) and the streaming decoder (which must not split a character).
// Must not: know tokens. "Valid" means RFC 3629: shortest form, no surrogates, at most
// U+10FFFF, which is exactly what PCRE2 accepts in UTF mode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace flashkv::utf8 {

// Length of the valid UTF-8 sequence starting at s[0], or 0 when s[0] does not start one
// (an invalid lead, a bad continuation, or a sequence cut short by the end of s).
size_t ValidSequenceLength(std::string_view s);

// Number of bytes at the start of s that form complete valid UTF-8 characters.
size_t ValidPrefixLength(std::string_view s);

// For a streaming writer: how many bytes at the end of s are the start of a valid sequence
// that is merely incomplete (more bytes could complete it). 0 when s ends on a boundary or
// its tail can never become valid.
size_t IncompleteTailLength(std::string_view s);

// s with every maximal invalid subpart (Unicode's "substitution of maximal subparts")
// replaced by U+FFFD, for consumers that require valid UTF-8.
std::string ReplaceInvalid(std::string_view s);

// Decodes the valid sequence at s[0] (ValidSequenceLength(s) must be > 0).
uint32_t DecodeAt(std::string_view s);

// Appends the UTF-8 encoding of code point cp (cp <= 0x10FFFF, not a surrogate).
template <typename Out>
void Append(uint32_t cp, Out& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace flashkv::utf8
