#include "engine/session_pool.h"

#include <spdlog/spdlog.h>

#include "engine/prefix_match.h"

namespace flashkv {

const char* LiveMatchKindName(LiveMatchKind kind) {
  switch (kind) {
    case LiveMatchKind::kToken:
      return "memory-token";
    case LiveMatchKind::kText:
      return "memory-text";
    case LiveMatchKind::kVisible:
      return "memory-visible";
  }
  return "?";
}

SessionPool::SessionPool(int capacity, int n_vocab, StateFactory make_state)
    : capacity_(capacity < 1 ? 1 : capacity),
      n_vocab_(n_vocab),
      make_state_(std::move(make_state)) {}

int SessionPool::live_count() const {
  int n = 0;
  for (const auto& s : sessions_) n += s->total_tokens() > 0 ? 1 : 0;
  return n;
}

std::optional<LiveMatch> SessionPool::FindBest(std::string_view prompt_text,
                                               std::span<const int32_t> prompt_tokens,
                                               const Tokenizer& tokenizer) const {
  // First pass: decide each session's best key by comparisons only; tokenize the text
  // continuation of the winner alone (tokenizing is the expensive part).
  struct Candidate {
    int slot = -1;
    LiveMatchKind kind = LiveMatchKind::kToken;
    size_t reused = 0;
    const VisibleKey* key = nullptr;
    uint64_t last_used = 0;
  };
  std::optional<Candidate> best;
  auto better = [&](const Candidate& c) {
    if (!best) return true;
    if (c.reused != best->reused) return c.reused > best->reused;
    if ((c.kind == LiveMatchKind::kToken) != (best->kind == LiveMatchKind::kToken)) {
      return c.kind == LiveMatchKind::kToken;
    }
    return c.last_used > best->last_used;
  };

  for (size_t i = 0; i < sessions_.size(); ++i) {
    const Session& s = *sessions_[i];
    if (s.total_tokens() == 0) continue;
    Candidate c;
    c.slot = int(i);
    c.reused = s.tokens().size();
    c.last_used = s.last_used();
    const bool has_more_tokens = prompt_tokens.size() > s.tokens().size();
    if (s.total_tokens() <= prompt_tokens.size() && IsTokenPrefix(s.tokens(), prompt_tokens) &&
        IsTokenPrefix(s.pending(), prompt_tokens.subspan(s.tokens().size())) &&
        (has_more_tokens || s.has_logits())) {
      c.kind = LiveMatchKind::kToken;
    } else if (IsBytePrefix(s.text(), prompt_text) &&
               (prompt_text.size() > s.text().size() || !s.pending().empty() || s.has_logits())) {
      c.kind = LiveMatchKind::kText;
    } else {
      const VisibleKey* hit = nullptr;
      for (const VisibleKey& k : s.visible_keys()) {
        if (IsBytePrefix(k.text, prompt_text) && (!hit || k.text.size() > hit->text.size())) {
          hit = &k;
        }
      }
      if (hit == nullptr) continue;
      c.kind = LiveMatchKind::kVisible;
      c.key = hit;
    }
    if (better(c)) best = c;
  }
  if (!best) return std::nullopt;

  const Session& s = *sessions_[size_t(best->slot)];
  LiveMatch m;
  m.slot = best->slot;
  m.kind = best->kind;
  m.reused = best->reused;
  switch (best->kind) {
    case LiveMatchKind::kToken:
      m.continuation.assign(prompt_tokens.begin() + ptrdiff_t(s.total_tokens()),
                            prompt_tokens.end());
      break;
    case LiveMatchKind::kText:
      m.continuation = tokenizer.EncodeChatPrompt(prompt_text.substr(s.text().size()));
      break;
    case LiveMatchKind::kVisible: {
      m.continuation = best->key->append;
      std::vector<int32_t> rest =
          tokenizer.EncodeChatPrompt(prompt_text.substr(best->key->text.size()));
      m.continuation.insert(m.continuation.end(), rest.begin(), rest.end());
      break;
    }
  }
  return m;
}

Expected<int> SessionPool::AcquireFresh(int64_t new_id,
                                        const std::function<void(Session&)>& on_evict) {
  // An empty slot costs nothing to reuse.
  for (size_t i = 0; i < sessions_.size(); ++i) {
    if (sessions_[i]->total_tokens() == 0) {
      FLASHKV_RETURN_IF_ERROR(sessions_[i]->Reset(new_id));
      Touch(int(i));
      return int(i);
    }
  }
  if (int(sessions_.size()) < capacity_) {
    Expected<KvState> state = make_state_();
    if (state.ok()) {
      sessions_.push_back(std::make_unique<Session>(new_id, std::move(*state), n_vocab_));
      const int slot = int(sessions_.size()) - 1;
      Touch(slot);
      return slot;
    }
    // Out of device memory with sessions to spare: the pool stops growing here and the
    // least recently used session makes room, so the others keep being served.
    if (state.status().code() != StatusCode::kResourceExhausted || sessions_.empty()) {
      return state.status();
    }
    spdlog::warn("live pool: a new session's KV does not fit ({}); keeping {} of {} sessions",
                 state.status().message(), sessions_.size(), capacity_);
    capacity_ = int(sessions_.size());
  }
  size_t lru = 0;
  for (size_t i = 1; i < sessions_.size(); ++i) {
    if (sessions_[i]->last_used() < sessions_[lru]->last_used()) lru = i;
  }
  if (on_evict) on_evict(*sessions_[lru]);
  FLASHKV_RETURN_IF_ERROR(sessions_[lru]->Reset(new_id));
  Touch(int(lru));
  return int(lru);
}

}  // namespace flashkv
