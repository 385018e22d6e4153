#include "tokenizer/tokenizer.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "tokenizer/byte_level.h"

namespace flashkv {
namespace {

// Texts longer than this get a per-call cache of piece → ids: natural text repeats its
// words, and a hash lookup is cheaper than re-running the merges. Short texts (chat
// turns) skip it because building the map costs more than it saves.
constexpr size_t kCacheMinText = 8192;
// Long pieces are rare and would bloat the cache.
constexpr size_t kCacheMaxPiece = 32;

bool IsAdded(int32_t type) {
  return type == static_cast<int32_t>(TokenType::kControl) ||
         type == static_cast<int32_t>(TokenType::kUserDefined);
}

}  // namespace

Expected<Tokenizer> Tokenizer::FromVocab(const Vocab& vocab) {
  FLASHKV_RETURN_IF_ERROR(ValidateVocab(vocab));
  FLASHKV_ASSIGN_OR_RETURN(BpeModel bpe, BpeModel::FromVocab(vocab));
  FLASHKV_ASSIGN_OR_RETURN(PreTokenizer pre, PreTokenizer::Create());
  if (bpe.missing_bytes() > 0) {
    spdlog::warn("tokenizer: {} of 256 bytes have no token; such bytes cannot be encoded",
                 bpe.missing_bytes());
  }
  if (bpe.skipped_merges() > 0) {
    spdlog::warn("tokenizer: {} merges name tokens absent from the vocabulary and are ignored",
                 bpe.skipped_merges());
  }
  Tokenizer t(std::move(bpe), std::move(pre));
  t.pieces_ = vocab.tokens;
  t.types_ = vocab.token_types;
  t.bos_id_ = vocab.bos_id;
  t.eos_id_ = vocab.eos_id;
  t.bytes_.resize(vocab.tokens.size());
  t.id_of_piece_.reserve(vocab.tokens.size());
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    const std::string& piece = t.pieces_[i];
    auto id = static_cast<int32_t>(i);
    t.id_of_piece_.emplace(piece, id);  // first id wins for a duplicated string
    if (IsAdded(t.types_[i])) {
      t.bytes_[i] = piece;  // added tokens are literal text, not byte-level
      t.specials_.Add(piece, id);
    } else if (t.types_[i] == static_cast<int32_t>(TokenType::kUnused)) {
      t.bytes_[i] = piece;  // never produced by Encode; decodes to its placeholder text
    } else {
      byte_level::Decode(piece, &t.bytes_[i]);
    }
  }
  for (const std::string& b : t.bytes_) t.max_token_bytes_ = std::max(t.max_token_bytes_, b.size());
  for (const char* marker : kChatMarkerTexts) {
    int32_t id = t.FindToken(marker);
    if (id >= 0 && IsAdded(t.types_[id])) t.chat_markers_.Add(marker, id);
  }
  return t;
}

Expected<Tokenizer> Tokenizer::FromGguf(const GgufFile& gguf) {
  FLASHKV_ASSIGN_OR_RETURN(Vocab vocab, LoadVocabFromGguf(gguf));
  return FromVocab(vocab);
}

bool Tokenizer::EncodeOrdinary(std::string_view text, std::vector<int32_t>* out,
                               WorkBudget* budget) const {
  std::vector<std::string_view> pieces;
  pieces.reserve(text.size() / 4 + 1);
  if (!pre_.Split(text, &pieces, budget)) return false;
  if (text.size() < kCacheMinText) {
    for (std::string_view p : pieces) {
      if (!bpe_.EncodePiece(p, out, budget)) return false;
    }
    return true;
  }
  // piece → [begin, end) of its ids inside *out (the first time it was encoded).
  std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> cache;
  cache.reserve(pieces.size() / 8 + 16);
  for (std::string_view p : pieces) {
    if (p.size() > kCacheMaxPiece) {
      if (!bpe_.EncodePiece(p, out, budget)) return false;
      continue;
    }
    auto [it, inserted] = cache.try_emplace(p, 0u, 0u);
    if (!inserted) {
      for (uint32_t k = it->second.first; k < it->second.second; ++k) {
        int32_t id = (*out)[k];  // copy first: push_back may reallocate
        out->push_back(id);
      }
      if (budget != nullptr && !budget->Step()) return false;
      continue;
    }
    auto begin = static_cast<uint32_t>(out->size());
    if (!bpe_.EncodePiece(p, out, budget)) return false;
    it->second = {begin, static_cast<uint32_t>(out->size())};
  }
  return true;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool allow_specials) const {
  if (!allow_specials) {
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 4);
    EncodeOrdinary(text, &ids);
    return ids;
  }
  std::vector<int32_t> ids;
  EncodeWith(specials_, text, &ids);
  return ids;
}

std::vector<int32_t> Tokenizer::EncodeChatPrompt(std::string_view text) const {
  std::vector<int32_t> ids;
  EncodeWith(chat_markers_, text, &ids);
  return ids;
}

Expected<std::vector<int32_t>> Tokenizer::EncodeChatPrompt(std::string_view text,
                                                           WorkBudget& budget) const {
  std::vector<int32_t> ids;
  if (!EncodeWith(chat_markers_, text, &ids, &budget)) return budget.status();
  return ids;
}

bool Tokenizer::EncodeWith(const SpecialMatcher& specials, std::string_view text,
                           std::vector<int32_t>* ids, WorkBudget* budget) const {
  ids->reserve(text.size() / 3 + 4);
  size_t pos = 0;
  while (pos < text.size()) {
    SpecialMatcher::Match m = specials.FindNext(text, pos);
    if (m.pos > pos && !EncodeOrdinary(text.substr(pos, m.pos - pos), ids, budget)) return false;
    if (m.len == 0) break;
    ids->push_back(m.id);
    pos = m.pos + m.len;
  }
  return true;
}

Expected<std::string> Tokenizer::Decode(std::span<const int32_t> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || static_cast<size_t>(ids[i]) >= bytes_.size()) {
      return OutOfRange("token id {} at position {} is outside the vocabulary of {}", ids[i], i,
                        bytes_.size());
    }
    out += bytes_[ids[i]];
  }
  return out;
}

std::string_view Tokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= bytes_.size()) return {};
  return bytes_[id];
}

std::string_view Tokenizer::TokenPiece(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) return {};
  return pieces_[id];
}

int32_t Tokenizer::FindToken(std::string_view text) const {
  auto it = id_of_piece_.find(text);
  return it == id_of_piece_.end() ? -1 : it->second;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < types_.size() && IsAdded(types_[id]);
}

}  // namespace flashkv
