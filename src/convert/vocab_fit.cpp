#include "convert/vocab_fit.h"

#include <string_view>
#include <unordered_set>

#include <fmt/format.h>

namespace flashkv {
namespace {

// Markers not among the first `keep` tokens.
size_t MissingMarkers(const Vocab& vocab, size_t keep) {
  std::unordered_set<std::string_view> present;
  for (size_t i = 0; i < keep && i < vocab.tokens.size(); ++i) present.insert(vocab.tokens[i]);
  size_t missing = 0;
  for (const char* m : kChatMarkerTexts) missing += !present.count(m);
  return missing;
}

}  // namespace

Status FitVocabToModel(Vocab& vocab, size_t n_vocab, std::vector<std::string>* notes) {
  const size_t before = vocab.tokens.size();
  if (before > n_vocab) {
    // Keep the longest prefix that leaves room for the markers it does not contain. Cutting
    // may drop a marker that sat in the tail, so iterate to the fixed point (at most once per
    // marker).
    size_t missing = MissingMarkers(vocab, n_vocab);
    for (;;) {
      if (missing > n_vocab)
        return InvalidArgument("vocab_size {} cannot hold the chat markers", n_vocab);
      size_t again = MissingMarkers(vocab, n_vocab - missing);
      if (again == missing) break;
      missing = again;
    }
    const size_t keep = n_vocab - missing;
    vocab.tokens.resize(keep);
    vocab.token_types.resize(keep);
    if (vocab.bos_id >= static_cast<int32_t>(keep)) vocab.bos_id = -1;
    if (vocab.eos_id >= static_cast<int32_t>(keep)) vocab.eos_id = -1;
    std::unordered_set<std::string_view> kept(vocab.tokens.begin(), vocab.tokens.end());
    std::vector<std::string> merges;
    for (std::string& m : vocab.merges) {
      size_t sp = m.find(' ');
      if (sp == std::string::npos) continue;
      std::string_view left(m.data(), sp), right(m.data() + sp + 1, m.size() - sp - 1);
      if (kept.count(left) && kept.count(right) &&
          kept.count(std::string(left) + std::string(right)))
        merges.push_back(std::move(m));
    }
    if (notes)
      notes->push_back(fmt::format(
          "vocabulary cut from {} to {} ids for vocab_size {} ({} merges kept of {}), chat "
          "markers in the last {} ids",
          before, keep, n_vocab, merges.size(), vocab.merges.size(), missing));
    vocab.merges = std::move(merges);
  }
  const size_t missing_before = MissingMarkers(vocab, vocab.tokens.size());
  const size_t size_before = vocab.tokens.size();
  FLASHKV_RETURN_IF_ERROR(AddMissingChatMarkers(vocab, n_vocab));
  if (notes && (missing_before > 0 || size_before < n_vocab) && before <= n_vocab)
    notes->push_back(fmt::format("vocabulary padded from {} to {} ids, {} chat markers added",
                                 size_before, n_vocab, missing_before));
  if (vocab.tokens.size() != n_vocab)
    return Internal("vocabulary has {} tokens after fitting to {}", vocab.tokens.size(), n_vocab);
  return ValidateVocab(vocab);
}

}  // namespace flashkv
