#include "kv/resume_point.h"

#include <algorithm>

namespace flashkv {

ResumeMatch MatchResumeKey(const ResumeKey& key, const ResumeLookup& lookup, bool has_logits) {
  if (key.tokens.size() <= lookup.tokens.size() &&
      std::equal(key.tokens.begin(), key.tokens.end(), lookup.tokens.begin()) &&
      (lookup.tokens.size() > key.tokens.size() || has_logits)) {
    return ResumeMatch::kTokens;
  }
  if (!key.text.empty() && lookup.text.starts_with(key.text) &&
      (lookup.text.size() > key.text.size() || !key.tail.empty() || has_logits)) {
    return ResumeMatch::kText;
  }
  return ResumeMatch::kNone;
}

bool ResumeBefore(int64_t a_tokens, bool a_by_text, uint64_t a_text_bytes, int64_t b_tokens,
                  bool b_by_text, uint64_t b_text_bytes) {
  if (a_tokens != b_tokens) return a_tokens > b_tokens;
  if (a_by_text != b_by_text) return !a_by_text;
  return a_by_text && a_text_bytes > b_text_bytes;
}

std::vector<int32_t> ResumeContinuation(
    const ResumeKey& key, ResumeMatch match, const ResumeLookup& lookup,
    const std::function<std::vector<int32_t>(std::string_view)>& encode) {
  std::vector<int32_t> out;
  if (match == ResumeMatch::kTokens) {
    out.assign(lookup.tokens.begin() + ptrdiff_t(key.tokens.size()), lookup.tokens.end());
  } else if (match == ResumeMatch::kText) {
    out.assign(key.tail.begin(), key.tail.end());
    std::vector<int32_t> rest = encode(lookup.text.substr(key.text.size()));
    out.insert(out.end(), rest.begin(), rest.end());
  }
  return out;
}

}  // namespace flashkv
