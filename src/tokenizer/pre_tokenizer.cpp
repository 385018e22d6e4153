#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <spdlog/spdlog.h>

#include "tokenizer/utf8.h"

namespace flashkv {

namespace {

struct Pattern {
  pcre2_code* code = nullptr;
  bool jit = false;
};

}  // namespace

struct PreTokenizer::Impl {
  Pattern stages[3];

  ~Impl() {
    for (Pattern& p : stages) pcre2_code_free(p.code);
  }

  // Splits `piece` with stage `s` ("Isolated") and hands each part to stage s + 1; false
  // once `budget` is spent (one step per match).
  bool SplitStage(int s, std::string_view piece, pcre2_match_data* md,
                  std::vector<std::string_view>* out, WorkBudget& budget) const;
};

namespace {

Expected<Pattern> Compile(const char* pattern) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return Internal("pre-tokenizer pattern does not compile at offset {}: {}", err_offset,
                    reinterpret_cast<const char*>(msg));
  }
  // JIT is an optimisation only: without it (no JIT support in this PCRE2) matching falls
  // back to the interpreter with identical results.
  bool jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return Pattern{code, jit};
}

}  // namespace

bool PreTokenizer::Impl::SplitStage(int s, std::string_view piece, pcre2_match_data* md,
                                    std::vector<std::string_view>* out, WorkBudget& budget) const {
  if (s == 3) {
    out->push_back(piece);
    return true;
  }
  const Pattern& pat = stages[s];
  auto subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  size_t pos = 0;
  size_t last = 0;
  while (pos < piece.size()) {
    if (!budget.Step()) return false;
    int rc = pat.jit ? pcre2_jit_match(pat.code, subject, piece.size(), pos, 0, md, nullptr)
                     : PCRE2_ERROR_JIT_BADOPTION;
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
      // JIT stack exhaustion and friends: the interpreter has no such limit in practice.
      rc = pcre2_match(pat.code, subject, piece.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      // Deterministic degradation: the rest of the piece stays unsplit at this stage.
      spdlog::warn("pre-tokenizer stage {} match error {} at byte {}; rest left unsplit", s + 1, rc,
                   pos);
      break;
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t start = ov[0];
    size_t end = ov[1];
    if (start > last && !SplitStage(s + 1, piece.substr(last, start - last), md, out, budget)) {
      return false;
    }
    if (end > start) {
      if (!SplitStage(s + 1, piece.substr(start, end - start), md, out, budget)) return false;
      last = end;
      pos = end;
    } else {
      // None of the patterns can match empty; guard anyway by stepping one character.
      size_t n = utf8::ValidSequenceLength(piece.substr(pos));
      pos += n ? n : 1;
    }
  }
  if (last < piece.size()) return SplitStage(s + 1, piece.substr(last), md, out, budget);
  return true;
}

Expected<PreTokenizer> PreTokenizer::Create() {
  auto impl = std::make_unique<Impl>();
  const char* patterns[3] = {kDigitsPattern, kCjkPattern, kMainPattern};
  for (int s = 0; s < 3; ++s) {
    FLASHKV_ASSIGN_OR_RETURN(impl->stages[s], Compile(patterns[s]));
  }
  return PreTokenizer(std::move(impl));
}

PreTokenizer::PreTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

bool PreTokenizer::Split(std::string_view text, std::vector<std::string_view>* pieces,
                         WorkBudget* budget) const {
  WorkBudget unlimited;
  WorkBudget& b = budget != nullptr ? *budget : unlimited;
  // One match block sized for the largest pattern serves all three stages (the stages
  // run nested, but each match's offsets are consumed before the next match call).
  pcre2_match_data* md = pcre2_match_data_create(4, nullptr);
  bool ok = true;
  size_t i = 0;
  while (ok && i < text.size()) {
    size_t valid = utf8::ValidPrefixLength(text.substr(i));
    if (valid > 0) {
      ok = impl_->SplitStage(0, text.substr(i, valid), md, pieces, b);
      i += valid;
      continue;
    }
    size_t j = i + 1;  // a maximal run of bytes that start no valid character
    while (j < text.size() && utf8::ValidSequenceLength(text.substr(j)) == 0) ++j;
    pieces->push_back(text.substr(i, j - i));
    ok = b.Step(j - i);
    i = j;
  }
  pcre2_match_data_free(md);
  return ok;
}

}  // namespace flashkv
