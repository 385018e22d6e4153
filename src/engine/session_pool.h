// SessionPool: the live tier — up to `capacity` Sessions kept in memory, the search for
// the one a new prompt continues (the resume rule of kv/resume_point.h over each
// session's own key and its visible keys; docs/SERVER.md §2.2), and LRU replacement when a prompt
// continues none. Must not: run the model, read or write disk (the engine saves an evicted session
// through the hook it passes), or parse requests.
//
// Threading: owned by the engine worker; not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "engine/session.h"
#include "tokenizer/tokenizer.h"

namespace flashkv {

// How a prompt was found to continue a live session.
enum class LiveMatchKind {
  kToken,    // the session's ids are a prefix of the prompt's ids
  kText,     // the session's decoded bytes are a prefix of the prompt text
  kVisible,  // one of the session's visible keys is a prefix of the prompt text
};
const char* LiveMatchKindName(LiveMatchKind kind);  // "memory-token", ...

struct LiveMatch {
  int slot = -1;
  LiveMatchKind kind = LiveMatchKind::kToken;
  size_t reused = 0;  // ids already evaluated in the session that the request keeps
  // Ids to decide after the session's evaluated tokens (its pending ids are dropped first,
  // Session::DropPending): the rest of the prompt, as for a restored snapshot.
  std::vector<int32_t> continuation;
};

class SessionPool {
 public:
  using StateFactory = std::function<Expected<KvState>()>;

  // `make_state` allocates the KvState of a new slot (called at most `capacity` times).
  SessionPool(int capacity, int n_vocab, StateFactory make_state);

  int capacity() const { return capacity_; }
  // Slots allocated so far (<= capacity); slot indices are stable.
  int size() const { return int(sessions_.size()); }
  Session& at(int slot) { return *sessions_[size_t(slot)]; }
  const Session& at(int slot) const { return *sessions_[size_t(slot)]; }
  // Sessions that hold at least one id.
  int live_count() const;

  // The session the prompt continues by the resume rule and order of every tier
  // (kv/resume_point.h: most evaluated ids, an id match before a text match), ties going
  // to the most recent, or nullopt. A match always leaves at least one id to evaluate or
  // logits to sample from. `tokenizer` encodes a text continuation (EncodeChatPrompt).
  std::optional<LiveMatch> FindBest(std::string_view prompt_text,
                                    std::span<const int32_t> prompt_tokens,
                                    const Tokenizer& tokenizer) const;

  // A cleared slot for a new sequence with id `new_id`: an unused slot if any, else an
  // empty one, else the least recently used, which is first handed to `on_evict` (to save
  // it) when it holds ids. When a new slot's KvState does not fit (kResourceExhausted) and
  // the pool holds sessions, the capacity shrinks to what was allocated and the LRU one
  // is reused instead. Sessions in use (Session::in_use) are skipped by both this and
  // FindBest. Errors when allocating the first state or clearing one fails, or when every
  // session is in use.
  Expected<int> AcquireFresh(int64_t new_id, const std::function<void(Session&)>& on_evict);

  // Marks the slot as just used.
  void Touch(int slot) { at(slot).set_last_used(++clock_); }

 private:
  int capacity_;
  int n_vocab_;
  StateFactory make_state_;
  std::vector<std::unique_ptr<Session>> sessions_;
  uint64_t clock_ = 0;
};

}  // namespace flashkv
