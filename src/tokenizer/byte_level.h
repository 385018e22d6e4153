// The GPT-2 byte-level alphabet: every byte 0..255 has a printable stand-in character
// (0x20 ' ' → 'Ġ' U+0120, 0x0A → 'Ċ' U+010A, printable Latin-1 maps to itself), and BPE
// tokens in tokenizer.json / GGUF are written in that alphabet. Must not: know the
// vocabulary. Exists separately because the loader, the merge table and the decoder all
// translate between raw bytes and this form.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace flashkv::byte_level {

// UTF-8 of the stand-in character for byte b.
std::string_view EncodeByte(uint8_t b);

// Raw bytes → stand-in text ("a b" → "aĠb").
std::string Encode(std::string_view bytes);

// Stand-in text → raw bytes. Characters outside the alphabet (control tokens are not
// byte-level) are copied through as their UTF-8; returns false when that happened.
bool Decode(std::string_view text, std::string* out);

}  // namespace flashkv::byte_level
