// The DeepSeek V3/V4 pre-tokenizer ("joyai-llm" in GGUF): the three `Split` stages of
// tokenizer.json's `pre_tokenizer` Sequence, each with behaviour "Isolated" (every match
// and every gap between matches becomes its own piece), applied one after another:
//   1. \p{N}{1,3}                   digit groups of at most three
//   2. [一-龥぀-ゟ゠-ヿ]+            CJK ideograph / kana runs
//   3. the main regex (letters with one leading non-letter, punctuation runs, newline
//      runs, whitespace not followed by non-space, ...)
// The final ByteLevel stage (use_regex false) only maps bytes, which the BPE does.
// Must not: know the vocabulary or special tokens (they are split out before this).
//
// Input may be any bytes: maximal runs of invalid UTF-8 are passed through as their own
// pieces, never shown to PCRE2 (whose UTF mode rejects them).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "util/status.h"
#include "util/work_budget.h"

namespace flashkv {

class PreTokenizer {
 public:
  // The tokenizer.json regex strings, exposed so a test can check them against the file.
  static constexpr const char* kDigitsPattern = "\\p{N}{1,3}";
  static constexpr const char* kCjkPattern = "[一-龥぀-ゟ゠-ヿ]+";
  static constexpr const char* kMainPattern =
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}"
      "\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";

  // Compiles the three patterns (PCRE2, UTF + UCP, JIT when available).
  static Expected<PreTokenizer> Create();

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Appends the pieces of `text` (views into it, in order, covering it exactly) to
  // `pieces`. Thread-safe: compiled patterns are shared, match state is per call. With a
  // `budget`, every match is a step: false, with `pieces` partial, once it is spent.
  bool Split(std::string_view text, std::vector<std::string_view>* pieces,
             WorkBudget* budget = nullptr) const;

 private:
  struct Impl;
  explicit PreTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashkv
