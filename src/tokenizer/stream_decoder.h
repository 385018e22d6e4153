// Turns generated token ids into text one token at a time without ever cutting a UTF-8
// character in half: a token that ends inside a multi-byte character (DeepSeek's BPE
// splits CJK and emoji across tokens) is held back until the character completes. Must
// not: know chat markers (chat/ parses the text it emits).
//
// The concatenation of every Push() result and the final Flush() is exactly
// Tokenizer::Decode of all ids. Bytes that can never become valid UTF-8 are passed through
// immediately, unchanged; use utf8::ReplaceInvalid on a chunk when the consumer (JSON)
// needs valid UTF-8 — chunks never split a valid character, so per-chunk replacement is
// the same as replacing on the whole text.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace flashkv {

class StreamDecoder {
 public:
  // `tokenizer` must outlive the decoder.
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  // The text that is complete after this token (often empty while a character is split).
  // OutOfRange for an id outside the vocabulary; the decoder state is unchanged then.
  Expected<std::string> Push(int32_t id);

  // End of stream: returns the held bytes of an unfinished character (as-is) and resets.
  std::string Flush();

  // Bytes held back right now (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;
};

}  // namespace flashkv
