// The DeepSeek tokenizer: text ↔ token ids with the byte-level BPE of a Vocab (from the
// GGUF or tokenizer.json). Owns special-token recognition, the encode pipeline
// (specials → pre-tokenizer → BPE) and decoding ids back to exact bytes. Must not: know
// chat formats (chat/ renders text; this only tokenizes it) or do I/O.
//
// Policies (docs/TOKENIZER.md):
// - Added tokens (GGML control / user-defined: BOS, EOS, <｜User｜>, <think>, ｜DSML｜, ...)
//   are recognised in text only when the caller passes allow_specials; otherwise their
//   text is ordinary characters and is BPE-encoded (user content can never forge a role
//   marker).
// - Invalid UTF-8 input is never rejected: each maximal run of bytes that starts no valid
//   character is its own pre-token piece and is encoded byte by byte through the BPE, so
//   Decode(Encode(x)) == x for every byte string x.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe_model.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/special_matcher.h"
#include "tokenizer/vocab.h"
#include "util/status.h"
#include "util/work_budget.h"

namespace flashkv {

class Tokenizer {
 public:
  static Expected<Tokenizer> FromVocab(const Vocab& vocab);
  // LoadVocabFromGguf + FromVocab.
  static Expected<Tokenizer> FromGguf(const GgufFile& gguf);

  Tokenizer(Tokenizer&&) noexcept = default;
  Tokenizer& operator=(Tokenizer&&) noexcept = default;

  // Thread-safe (const, no shared mutable state). Never adds BOS by itself. With
  // allow_specials every added token's text is recognised, as HF `tokenizers` does.
  std::vector<int32_t> Encode(std::string_view text, bool allow_specials) const;

  // A rendered DS4 prompt (docs/TOKENIZER.md "Encoding pipeline"): only the seven chat
  // markers (BOS, EOS, <｜User｜>, <｜Assistant｜>, <think>, </think>, ｜DSML｜) become
  // special ids; V3 leftovers such as "<｜tool▁calls▁begin｜>" inside user text stay
  // ordinary text, as in ds4.
  std::vector<int32_t> EncodeChatPrompt(std::string_view text) const;
  // The same under a budget (a request's, util/work_budget.h): every pre-tokenizer match,
  // piece byte and merge is a step, and once the budget is spent the encoding stops with
  // its status (kResourceExhausted, or kCancelled when its stop flag was set).
  Expected<std::vector<int32_t>> EncodeChatPrompt(std::string_view text, WorkBudget& budget) const;

  // The most bytes one token stands for. Since Decode(Encode(x)) == x, a text of n bytes
  // is at least ceil(n / max_token_bytes()) tokens: a bound known before encoding it.
  size_t max_token_bytes() const { return max_token_bytes_; }

  // The exact bytes of the ids concatenated (not necessarily valid UTF-8 when a character
  // is split across a cut). OutOfRange for an id outside the vocabulary.
  Expected<std::string> Decode(std::span<const int32_t> ids) const;

  // The raw bytes one token stands for; empty for an id outside the vocabulary.
  std::string_view TokenBytes(int32_t id) const;
  // The vocabulary string of a token as stored ("Ġthe", "<｜User｜>"); empty if out of range.
  std::string_view TokenPiece(int32_t id) const;
  // The id whose vocabulary string is exactly `text`, or -1. For markers: FindToken("<think>").
  int32_t FindToken(std::string_view text) const;
  // Control or user-defined (an added token, not produced by BPE).
  bool IsSpecial(int32_t id) const;

  size_t vocab_size() const { return pieces_.size(); }
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }

 private:
  Tokenizer(BpeModel bpe, PreTokenizer pre) : bpe_(std::move(bpe)), pre_(std::move(pre)) {}
  // Encodes text that contains no special token to recognise; false once `budget` (when
  // given) is spent.
  bool EncodeOrdinary(std::string_view text, std::vector<int32_t>* out,
                      WorkBudget* budget = nullptr) const;
  bool EncodeWith(const SpecialMatcher& specials, std::string_view text, std::vector<int32_t>* ids,
                  WorkBudget* budget = nullptr) const;

  BpeModel bpe_;
  PreTokenizer pre_;
  SpecialMatcher specials_;          // every control / user-defined token
  SpecialMatcher chat_markers_;      // the kChatMarkerTexts present in the vocabulary
  std::vector<std::string> pieces_;  // [n_vocab] vocabulary strings
  std::vector<std::string> bytes_;   // [n_vocab] raw bytes each id decodes to
  std::vector<int32_t> types_;       // [n_vocab] TokenType values
  std::unordered_map<std::string_view, int32_t> id_of_piece_;  // views into pieces_
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  size_t max_token_bytes_ = 1;
};

}  // namespace flashkv
