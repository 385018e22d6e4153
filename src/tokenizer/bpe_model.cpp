#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <queue>
#include <string>
#include <unordered_map>

#include "tokenizer/byte_level.h"

namespace flashkv {
namespace {

// Pieces up to this many bytes use the quadratic array loop (no allocation, cache
// friendly); longer ones (whitespace runs, minified data) use the heap.
constexpr size_t kSmallPiece = 48;

}  // namespace

Expected<BpeModel> BpeModel::FromVocab(const Vocab& vocab) {
  BpeModel m;
  std::unordered_map<std::string_view, int32_t> id_of;
  id_of.reserve(vocab.tokens.size());
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    // Only normal tokens take part in BPE; a control token "<think>" must never be the
    // result of merging '<' 'think' '>'.
    if (vocab.token_types[i] != static_cast<int32_t>(TokenType::kNormal) &&
        vocab.token_types[i] != static_cast<int32_t>(TokenType::kByte)) {
      continue;
    }
    id_of.emplace(vocab.tokens[i], static_cast<int32_t>(i));
  }
  for (int b = 0; b < 256; ++b) {
    auto it = id_of.find(byte_level::EncodeByte(static_cast<uint8_t>(b)));
    m.byte_token_[b] = it == id_of.end() ? -1 : it->second;
    if (it == id_of.end()) ++m.missing_bytes_;
  }

  size_t capacity = 16;
  while (capacity < vocab.merges.size() * 2) capacity *= 2;
  m.keys_.assign(capacity, kEmptyKey);
  m.values_.assign(capacity, Merge{0, 0});
  m.mask_ = capacity - 1;
  std::string joined;
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    std::string_view merge = vocab.merges[rank];
    size_t space = merge.find(' ');
    if (space == std::string_view::npos) {
      return Corrupt("merge #{} \"{}\" has no space between its two parts", rank, merge);
    }
    std::string_view left = merge.substr(0, space);
    std::string_view right = merge.substr(space + 1);
    joined.assign(left);
    joined.append(right);
    auto l = id_of.find(left);
    auto r = id_of.find(right);
    auto j = id_of.find(joined);
    if (l == id_of.end() || r == id_of.end() || j == id_of.end()) {
      ++m.skipped_merges_;
      continue;
    }
    // A pair listed twice keeps its last rank, as HF's merge map does (never happens in
    // DeepSeek's file).
    m.Insert(l->second, r->second, Merge{static_cast<int32_t>(rank), j->second});
  }
  return m;
}

void BpeModel::Insert(int32_t left, int32_t right, Merge merge) {
  uint64_t key = Key(left, right);
  size_t i = Hash(key) & mask_;
  while (keys_[i] != kEmptyKey && keys_[i] != key) i = (i + 1) & mask_;
  if (keys_[i] == kEmptyKey) ++merge_count_;
  keys_[i] = key;
  values_[i] = merge;
}

bool BpeModel::EncodePiece(std::string_view piece, std::vector<int32_t>* out,
                           WorkBudget* budget) const {
  if (piece.size() > kSmallPiece) return EncodePieceWithHeap(piece, out, budget);
  int32_t sym[kSmallPiece];
  int32_t rank[kSmallPiece];  // rank of the pair (sym[i], sym[i + 1]); INT_MAX: none
  int32_t merged[kSmallPiece];
  size_t n = 0;
  for (char c : piece) {
    int32_t id = byte_token_[static_cast<uint8_t>(c)];
    if (id >= 0) sym[n++] = id;
  }
  auto pair_at = [&](size_t i) {
    const Merge* mg = Find(sym[i], sym[i + 1]);
    rank[i] = mg ? mg->rank : INT_MAX;
    merged[i] = mg ? mg->new_id : -1;
  };
  for (size_t i = 0; i + 1 < n; ++i) pair_at(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (rank[i] < rank[best]) best = i;
    }
    if (rank[best] == INT_MAX) break;
    sym[best] = merged[best];
    size_t tail = n - best - 2;  // elements after best + 1
    std::memmove(&sym[best + 1], &sym[best + 2], tail * sizeof(int32_t));
    std::memmove(&rank[best + 1], &rank[best + 2], tail * sizeof(int32_t));
    std::memmove(&merged[best + 1], &merged[best + 2], tail * sizeof(int32_t));
    --n;
    if (best > 0) pair_at(best - 1);
    if (best + 1 < n) pair_at(best);
  }
  out->insert(out->end(), sym, sym + n);
  return budget == nullptr || budget->Step(piece.size());
}

bool BpeModel::EncodePieceWithHeap(std::string_view piece, std::vector<int32_t>* out,
                                   WorkBudget* budget) const {
  // A piece of many megabytes (a word without spaces, or text the pre-tokenizer could not
  // split) costs seconds here: with a budget, every byte and every merge is a step.
  WorkBudget unlimited;
  WorkBudget& b = budget != nullptr ? *budget : unlimited;
  // Symbols form a linked list over their original positions; a merged symbol keeps the
  // left position and the right one is marked dead (len 0), as in HF's Word::merge_all.
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool alive;
  };
  std::vector<Symbol> syms;
  syms.reserve(piece.size());
  for (char c : piece) {
    int32_t id = byte_token_[static_cast<uint8_t>(c)];
    if (id < 0) continue;
    auto i = static_cast<int32_t>(syms.size());
    syms.push_back(Symbol{id, i - 1, i + 1, true});
  }
  if (syms.empty()) return true;
  syms.back().next = -1;

  struct Candidate {
    int32_t rank, pos, new_id;
    // std::priority_queue is a max-heap: "less" means lower priority (higher rank, then
    // further right).
    bool operator<(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate> queue;
  auto push_pair = [&](int32_t pos) {
    int32_t next = syms[pos].next;
    if (next < 0) return;
    if (const Merge* mg = Find(syms[pos].id, syms[next].id)) {
      queue.push(Candidate{mg->rank, pos, mg->new_id});
    }
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(syms.size()); ++i) {
    push_pair(i);
    if (!b.Step()) return false;
  }

  while (!queue.empty()) {
    if (!b.Step()) return false;
    Candidate top = queue.top();
    queue.pop();
    Symbol& left = syms[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = syms[left.next];
    // Stale entry: the pair at this position changed since it was queued.
    const Merge* mg = Find(left.id, right.id);
    if (mg == nullptr || mg->new_id != top.new_id) continue;
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) syms[right.next].prev = top.pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) out->push_back(syms[i].id);
  return true;
}

}  // namespace flashkv
