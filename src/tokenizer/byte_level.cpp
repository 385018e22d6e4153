#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace flashkv::byte_level {
namespace {

struct Tables {
  std::array<std::string, 256> byte_to_text;
  std::array<int16_t, 512> cp_to_byte;  // stand-ins are all below U+0200

  Tables() {
    cp_to_byte.fill(-1);
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int next_extra = 0;
    for (int b = 0; b < 256; ++b) {
      uint32_t cp = printable(b) ? static_cast<uint32_t>(b) : 256u + next_extra++;
      utf8::Append(cp, byte_to_text[b]);
      cp_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

}  // namespace

std::string_view EncodeByte(uint8_t b) {
  return GetTables().byte_to_text[b];
}

std::string Encode(std::string_view bytes) {
  const Tables& t = GetTables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.byte_to_text[static_cast<uint8_t>(c)];
  return out;
}

bool Decode(std::string_view text, std::string* out) {
  const Tables& t = GetTables();
  bool all_mapped = true;
  size_t i = 0;
  while (i < text.size()) {
    size_t n = utf8::ValidSequenceLength(text.substr(i));
    if (n == 0) {  // not UTF-8 at all: pass the byte through
      out->push_back(text[i++]);
      all_mapped = false;
      continue;
    }
    uint32_t cp = utf8::DecodeAt(text.substr(i));
    if (cp < t.cp_to_byte.size() && t.cp_to_byte[cp] >= 0) {
      out->push_back(static_cast<char>(t.cp_to_byte[cp]));
    } else {
      out->append(text.substr(i, n));
      all_mapped = false;
    }
    i += n;
  }
  return all_mapped;
}

}  // namespace flashkv::byte_level
