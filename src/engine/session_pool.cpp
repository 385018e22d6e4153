#include "engine/session_pool.h"

#include <spdlog/spdlog.h>

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
  // The resume rule and order of every tier (kv/resume_point.h) over each session's keys,
  // ties between sessions going to the most recent. Only the winner's text continuation
  // is tokenized (tokenizing is the expensive part).
  ResumeLookup lookup;
  lookup.tokens = prompt_tokens;
  lookup.text = prompt_text;
  struct Candidate {
    int slot = -1;
    size_t key = 0;  // index into the session's ResumeKeys()
    ResumeMatch match = ResumeMatch::kNone;
    ResumeKey resume;
    uint64_t last_used = 0;
  };
  auto before = [](const Candidate& a, const Candidate& b) {
    return ResumeBefore(int64_t(a.resume.tokens.size()), a.match == ResumeMatch::kText,
                        a.resume.text.size(), int64_t(b.resume.tokens.size()),
                        b.match == ResumeMatch::kText, b.resume.text.size());
  };
  std::optional<Candidate> best;
  for (size_t i = 0; i < sessions_.size(); ++i) {
    const Session& s = *sessions_[i];
    if (s.total_tokens() == 0 || s.in_use()) continue;
    const std::vector<ResumeKey> keys = s.ResumeKeys();
    for (size_t k = 0; k < keys.size(); ++k) {
      Candidate c{int(i), k, MatchResumeKey(keys[k], lookup, s.logits_valid()), keys[k],
                  s.last_used()};
      if (c.match == ResumeMatch::kNone) continue;
      if (!best || before(c, *best) || (!before(*best, c) && c.last_used > best->last_used)) {
        best = c;
      }
    }
  }
  if (!best) return std::nullopt;

  LiveMatch m;
  m.slot = best->slot;
  m.kind = best->match == ResumeMatch::kTokens ? LiveMatchKind::kToken
           : best->key == 0                    ? LiveMatchKind::kText
                                               : LiveMatchKind::kVisible;
  m.reused = best->resume.tokens.size();
  m.continuation = ResumeContinuation(best->resume, best->match, lookup, [&](std::string_view t) {
    return tokenizer.EncodeChatPrompt(t);
  });
  return m;
}

Expected<int> SessionPool::AcquireFresh(int64_t new_id,
                                        const std::function<void(Session&)>& on_evict) {
  // An empty slot costs nothing to reuse.
  for (size_t i = 0; i < sessions_.size(); ++i) {
    if (sessions_[i]->total_tokens() == 0 && !sessions_[i]->in_use()) {
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
  // Sessions a running request holds are never taken from it.
  std::optional<size_t> found;
  for (size_t i = 0; i < sessions_.size(); ++i) {
    if (sessions_[i]->in_use()) continue;
    if (!found || sessions_[i]->last_used() < sessions_[*found]->last_used()) found = i;
  }
  if (!found) {
    return ResourceExhausted("every one of the {} live sessions is in use", sessions_.size());
  }
  const size_t lru = *found;
  if (on_evict) on_evict(*sessions_[lru]);
  FLASHKV_RETURN_IF_ERROR(sessions_[lru]->Reset(new_id));
  Touch(int(lru));
  return int(lru);
}

}  // namespace flashkv
