// Byte-level BPE over one pre-tokenized piece: start from one token per byte, then apply
// merges by rank exactly as HF `tokenizers` does (lowest rank first, leftmost on ties,
// one occurrence at a time). Owns the merge table keyed by token-id pairs. Must not: split
// text (pre_tokenizer.h) or know special tokens (tokenizer.h).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"
#include "util/status.h"
#include "util/work_budget.h"

namespace flashkv {

class BpeModel {
 public:
  // Builds the byte table and the merge table from byte-level token texts. Merges whose
  // parts or result are not in the vocabulary are skipped (counted in skipped_merges()).
  static Expected<BpeModel> FromVocab(const Vocab& vocab);

  // Appends the token ids of `piece` (raw bytes) to `out`. Bytes without a token (only in
  // a broken vocabulary) are dropped, as HF does without an unk token. With a `budget`
  // the merge loop of a long piece steps it (one step per byte and per merge): false,
  // with `out` holding a partial result, once it is spent.
  bool EncodePiece(std::string_view piece, std::vector<int32_t>* out,
                   WorkBudget* budget = nullptr) const;

  // The heap-based merge loop that EncodePiece uses for long pieces; public so a test can
  // check it against the short-piece loop on every input.
  bool EncodePieceWithHeap(std::string_view piece, std::vector<int32_t>* out,
                           WorkBudget* budget = nullptr) const;

  size_t merge_count() const { return merge_count_; }
  size_t skipped_merges() const { return skipped_merges_; }
  int missing_bytes() const { return missing_bytes_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};
  static uint64_t Key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  void Insert(int32_t left, int32_t right, Merge merge);
  // The merge of (left, right), or nullptr.
  const Merge* Find(int32_t left, int32_t right) const {
    uint64_t key = Key(left, right);
    size_t i = Hash(key) & mask_;
    while (true) {
      uint64_t k = keys_[i];
      if (k == key) return &values_[i];
      if (k == kEmptyKey) return nullptr;
      i = (i + 1) & mask_;
    }
  }
  static size_t Hash(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return static_cast<size_t>(key);
  }

  int32_t byte_token_[256];  // token id of each single byte, -1 if missing
  // Open-addressing merge table, capacity a power of two at most half full.
  std::vector<uint64_t> keys_;
  std::vector<Merge> values_;
  size_t mask_ = 0;
  size_t merge_count_ = 0;
  size_t skipped_merges_ = 0;
  int missing_bytes_ = 0;
};

}  // namespace flashkv
