#include "engine/session.h"

#include <algorithm>

namespace flashkv {

Session::Session(int64_t id, KvState state, int n_vocab)
    : id_(id), state_(std::move(state)), logits_(size_t(n_vocab), 0.0f) {}

void Session::AddPending(int32_t id, std::string_view bytes) {
  pending_.push_back(id);
  text_.append(bytes);
  visible_keys_.clear();
}

void Session::CommitPending(size_t n, bool logits_valid) {
  n = std::min(n, pending_.size());
  tokens_.insert(tokens_.end(), pending_.begin(), pending_.begin() + ptrdiff_t(n));
  pending_.erase(pending_.begin(), pending_.begin() + ptrdiff_t(n));
  if (n > 0) logits_valid_ = logits_valid;
  visible_keys_.clear();
}

Status Session::Reset(int64_t new_id) {
  id_ = new_id;
  tokens_.clear();
  pending_.clear();
  text_.clear();
  logits_valid_ = false;
  visible_keys_.clear();
  return state_.Clear();
}

}  // namespace flashkv
