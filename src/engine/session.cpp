#include "engine/session.h"

#include <algorithm>

namespace flashkv {

Session::Session(int64_t id, KvState state, int n_vocab)
    : id_(id), state_(std::move(state)), logits_(size_t(n_vocab), 0.0f) {}

void Session::AddPending(int32_t id, std::string_view bytes) {
  pending_.push_back(id);
  pending_piece_bytes_.push_back(uint32_t(bytes.size()));
  text_.append(bytes);
  pending_bytes_ += bytes.size();
  visible_keys_.clear();
}

void Session::CommitPending(size_t n, bool logits_valid) {
  n = std::min(n, pending_.size());
  tokens_.insert(tokens_.end(), pending_.begin(), pending_.begin() + ptrdiff_t(n));
  pending_.erase(pending_.begin(), pending_.begin() + ptrdiff_t(n));
  for (size_t i = 0; i < n; ++i) pending_bytes_ -= pending_piece_bytes_[i];
  pending_piece_bytes_.erase(pending_piece_bytes_.begin(),
                             pending_piece_bytes_.begin() + ptrdiff_t(n));
  if (n > 0) logits_valid_ = logits_valid;
  visible_keys_.clear();
}

void Session::DropPending() {
  text_.resize(text_.size() - pending_bytes_);
  pending_.clear();
  pending_piece_bytes_.clear();
  pending_bytes_ = 0;
  visible_keys_.clear();
}

std::vector<ResumeKey> Session::ResumeKeys() const {
  std::vector<ResumeKey> keys;
  keys.push_back(ResumeKey{tokens_, text_, pending_});
  for (const VisibleKey& k : visible_keys_) keys.push_back(ResumeKey{tokens_, k.text, k.tail});
  return keys;
}

void Session::AdoptRestored(std::vector<int32_t> tokens, std::string text,
                            std::span<const float> logits) {
  tokens_ = std::move(tokens);
  pending_.clear();
  pending_piece_bytes_.clear();
  pending_bytes_ = 0;
  text_ = std::move(text);
  const size_t n = std::min(logits.size(), logits_.size());
  std::copy(logits.begin(), logits.begin() + ptrdiff_t(n), logits_.begin());
  logits_valid_ = n == logits_.size();
  visible_keys_.clear();
  last_saved_tokens_ = int64_t(tokens_.size());
}

Status Session::Reset(int64_t new_id) {
  id_ = new_id;
  tokens_.clear();
  pending_.clear();
  pending_piece_bytes_.clear();
  pending_bytes_ = 0;
  text_.clear();
  logits_valid_ = false;
  visible_keys_.clear();
  last_saved_tokens_ = 0;
  return state_.Clear();
}

}  // namespace flashkv
