#include "tokenizer/utf8.h"

namespace flashkv::utf8 {
namespace {

// Allowed range of the second byte for each lead byte (RFC 3629 table 3-7); the third and
// fourth bytes are plain continuations 0x80..0xBF.
struct LeadInfo {
  uint8_t length;  // 0: not a lead byte
  uint8_t lo, hi;  // second byte range
};

LeadInfo Lead(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};  // no surrogates
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};  // <= U+10FFFF
  return {0, 0, 0};
}

// How many bytes of s starting at 0 are a consistent (possibly incomplete) sequence
// prefix, and the sequence's full length.
size_t MatchedPrefix(std::string_view s, size_t* full_length) {
  LeadInfo lead = Lead(static_cast<uint8_t>(s[0]));
  *full_length = lead.length;
  if (lead.length <= 1) return lead.length;
  size_t i = 1;
  for (; i < lead.length && i < s.size(); ++i) {
    auto c = static_cast<uint8_t>(s[i]);
    uint8_t lo = i == 1 ? lead.lo : 0x80;
    uint8_t hi = i == 1 ? lead.hi : 0xBF;
    if (c < lo || c > hi) break;
  }
  return i;
}

}  // namespace

size_t ValidSequenceLength(std::string_view s) {
  if (s.empty()) return 0;
  if (static_cast<uint8_t>(s[0]) < 0x80) return 1;
  size_t full = 0;
  size_t matched = MatchedPrefix(s, &full);
  return matched == full ? full : 0;
}

size_t ValidPrefixLength(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII runs dominate real text; skip them eight bytes at a time would be a micro-win
    // that the encoder's regex cost dwarfs, so keep this simple.
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t n = ValidSequenceLength(s.substr(i));
    if (n == 0) break;
    i += n;
  }
  return i;
}

size_t IncompleteTailLength(std::string_view s) {
  // A sequence is at most 4 bytes, so only the last 3 bytes can be an incomplete start.
  size_t start = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t i = start; i < s.size(); ++i) {
    auto b = static_cast<uint8_t>(s[i]);
    if (b < 0xC2 || b > 0xF4) continue;  // not a multi-byte lead
    size_t full = 0;
    size_t matched = MatchedPrefix(s.substr(i), &full);
    if (matched == s.size() - i && matched < full) return matched;
  }
  return 0;
}

std::string ReplaceInvalid(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t full = 0;
    size_t matched = MatchedPrefix(s.substr(i), &full);
    if (matched > 0 && matched == full) {
      out.append(s.substr(i, matched));
      i += matched;
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD for the longest consistent prefix
      i += matched > 0 ? matched : 1;
    }
  }
  return out;
}

uint32_t DecodeAt(std::string_view s) {
  auto b0 = static_cast<uint8_t>(s[0]);
  if (b0 < 0x80) return b0;
  auto cont = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(s[i]) & 0x3F); };
  if (b0 < 0xE0) return ((b0 & 0x1Fu) << 6) | cont(1);
  if (b0 < 0xF0) return ((b0 & 0x0Fu) << 12) | (cont(1) << 6) | cont(2);
  return ((b0 & 0x07u) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
}

}  // namespace flashkv::utf8
