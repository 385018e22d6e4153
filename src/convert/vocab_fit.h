// Fits a tokenizer vocabulary to a model's vocab_size before it is written into a GGUF:
// pads a short one (DeepSeek's 128815-id tokenizer for V4's 129280 rows) and adds the DS4
// chat markers it lacks; cuts a long one (tiny test models with 512 or 1024 rows) to the
// first ids, keeping only merges whose parts and result all survive, with the markers in
// the last ids (as ds4-tiny.gguf does). Must not: parse tokenizer.json (tokenizer/vocab.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tokenizer/vocab.h"
#include "util/status.h"

namespace flashkv {

// After success vocab.size() == n_vocab and every kChatMarkerTexts entry is present.
// `notes` gets one line per change worth logging.
Status FitVocabToModel(Vocab& vocab, size_t n_vocab, std::vector<std::string>* notes);

}  // namespace flashkv
