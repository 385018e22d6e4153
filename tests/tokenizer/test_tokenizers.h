// Tokenizers shared by the tokenizer tests, each built once per process. The tiny ds4
// vocabulary loads in milliseconds (also under ASan), so tests use it unless they need
// the full DeepSeek vocabulary.
#pragma once

#include <stdexcept>
#include <string>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace flashkv::testing_tokenizers {

inline const std::string kTokenizerJson =
    std::string(FLASHKV_SOURCE_DIR) + "/models/tokenizer/tokenizer.json";
inline const std::string kTinyGguf = std::string(FLASHKV_FIXTURES_DIR) + "/ds4-tiny/ds4-tiny.gguf";

template <typename T>
T Must(Expected<T> e) {
  if (!e.ok()) throw std::runtime_error(e.status().ToString());
  return std::move(*e);
}

inline Tokenizer* LoadJson(bool add_markers) {
  Vocab v = Must(LoadVocabFromTokenizerJson(kTokenizerJson));
  if (add_markers) {
    if (Status s = AddMissingChatMarkers(v, 129280); !s.ok()) {
      throw std::runtime_error(s.ToString());
    }
  }
  return new Tokenizer(Must(Tokenizer::FromVocab(v)));
}

// tokenizer.json exactly as HF loads it (no <think>, </think>, ｜DSML｜): the fixture's
// reference.
inline const Tokenizer& V3() {
  static const Tokenizer* tok = LoadJson(false);
  return *tok;
}

// What flashkv runs: the same plus the V4 chat markers at 128815..128817.
inline const Tokenizer& Full() {
  static const Tokenizer* tok = LoadJson(true);
  return *tok;
}

// ds4-tiny.gguf: the first 1019 DeepSeek ids (all 256 byte tokens, 760 merges) plus the
// chat markers at 1019..1023.
inline const Tokenizer& Tiny() {
  static const Tokenizer* tok =
      new Tokenizer(Must(Tokenizer::FromGguf(Must(GgufFile::Open(kTinyGguf)))));
  return *tok;
}

}  // namespace flashkv::testing_tokenizers
