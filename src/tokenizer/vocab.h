// The DeepSeek BPE vocabulary as data: token strings, GGML token types, merges, BOS/EOS.
// Owns loading it from HF `tokenizer.json` (for `flashkv convert` / `make-tiny`), adding
// the DS4 chat markers that the V3 tokenizer lacks, and reading/writing the
// `tokenizer.ggml.*` GGUF keys. Must not: know chat formats or run BPE (tokenizer.h does).
// Separate from Tokenizer so the converter can move a vocabulary between files without
// building the encoder's tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "util/status.h"

namespace flashkv {

// GGML token types (llama.cpp's `llama_token_type`), stored in `tokenizer.ggml.token_type`.
enum class TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // special: matched in text only when the caller allows specials
  kUserDefined = 4,  // added token that is not special
  kUnused = 5,       // padding between the BPE vocabulary and the model's vocab_size
  kByte = 6,
};

struct Vocab {
  // [n_vocab] token text, index = id. Normal tokens are in byte-level form ("Ġthe");
  // control / user-defined tokens are their literal UTF-8 text ("<｜User｜>").
  std::vector<std::string> tokens;
  // [n_vocab] TokenType values as int32 (the GGUF array type).
  std::vector<int32_t> token_types;
  // "left right" in byte-level form, rank order (index = rank).
  std::vector<std::string> merges;
  int32_t bos_id = -1;
  int32_t eos_id = -1;

  size_t size() const { return tokens.size(); }
};

// The DS4 chat markers every flashkv vocabulary must contain (ds4 refuses a GGUF without
// them). Text, never ids: ids differ between the real vocabulary and tiny ones.
inline constexpr const char* kBosText = "<｜begin▁of▁sentence｜>";
inline constexpr const char* kEosText = "<｜end▁of▁sentence｜>";
inline constexpr const char* kChatMarkerTexts[] = {
    kBosText, kEosText, "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "｜DSML｜",
};

// Reads model.vocab, model.merges (either "a b" strings or [a, b] pairs) and added_tokens.
// Added tokens become kControl when marked special or when they look like DeepSeek markers
// ("<｜…｜>", "<|…|>"), else kUserDefined. Ids missing between 0 and the largest id are filled
// with kUnused placeholders "[PAD<id>]". BOS/EOS are found by their text.
Expected<Vocab> LoadVocabFromTokenizerJson(const std::string& path);

// DeepSeek V3's tokenizer.json lacks V4's chat markers: gives each missing one of
// kChatMarkerTexts a kControl id, reusing kUnused ids first and then appending, after
// padding the vocabulary up to n_vocab with kUnused placeholders. Fails when the markers do
// not fit below n_vocab. Sets bos_id/eos_id when they were unset.
Status AddMissingChatMarkers(Vocab& vocab, size_t n_vocab);

// Reads tokenizer.ggml.tokens, token_type (optional: derived from the marker shape when
// absent), merges (optional), bos_token_id / eos_token_id (optional: found by text).
Expected<Vocab> LoadVocabFromGguf(const GgufFile& gguf);

// Writes tokenizer.ggml.model "gpt2", pre "joyai-llm", tokens, token_type (i32 array),
// merges, bos_token_id / eos_token_id (u32, only when set) in that order, as DS4 GGUFs do.
void WriteVocabToGguf(const Vocab& vocab, GgufWriter& writer);

// Checks the parallel arrays agree and bos/eos are in range.
Status ValidateVocab(const Vocab& vocab);

}  // namespace flashkv
