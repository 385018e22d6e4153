// The engine's snapshot decisions beyond CachePolicy's fixed rules, from what it has seen
// of its sessions:
// - Shared-prefix anchors. Sessions of one agent can share more than the chat anchor
//   (system + tools, up to the last user turn before the first reply): Claude Code opens
//   every first user message with the same attribution reminder, other agents with their
//   skill or environment listings. SharedPrefixAnchors remembers the prompts that started
//   recent sessions and, when a new session's prompt shares a longer token prefix with
//   one of them than what it restored, proposes an anchor where they part (DeepSeek's own
//   API cuts its cache units at detected common prefixes). Saved like the chat anchor, it
//   is restored by the next session of that agent; DiskCache's budget and value-based
//   eviction bound them.
// - Replies. A continued frontier reached while decoding is not saved there: a snapshot
//   inside a reply matches no later request (the client resends the reply re-rendered,
//   often without its reasoning), and a runaway reply left one every 10k tokens. The
//   session is saved once after the reply instead, under the key its client resends.
// Must not: touch the model, sessions or files (the engine saves what this proposes).
//
// Threading: used by the engine's worker thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "kv/cache_policy.h"

namespace flashkv {

struct SharedPrefixOptions {
  size_t remembered_prompts = 8;  // session-start prompts kept (most recent)
  // An anchor must add at least this many tokens to what the session restored: each one
  // costs a snapshot's disk space and write.
  int64_t min_gain_tokens = 64;
};

class SharedPrefixAnchors {
 public:
  explicit SharedPrefixAnchors(SharedPrefixOptions options = {}) : options_(options) {}

  // Where a session that starts from `prompt`, with its first `restored` ids already in
  // the state (a disk hit; 0 when cold), should save a shared-prefix anchor: the longest
  // token prefix it shares with a remembered prompt, less the policy's boundary trim (the
  // last ids before the divergence may tokenize differently in the next prompt), when
  // that is at least the policy's min_tokens, no longer than the prompt and at least
  // min_gain_tokens past `restored`. nullopt otherwise. Then remembers `prompt`.
  std::optional<int64_t> NextSession(std::span<const int32_t> prompt, int64_t restored,
                                     const CachePolicy& policy);

  size_t size() const { return prompts_.size(); }

 private:
  SharedPrefixOptions options_;
  std::deque<std::vector<int32_t>> prompts_;  // most recent first
};

// After a reply: whether the session, now `n_tokens` long and last saved at
// `last_saved_tokens`, passed a continued frontier that the decode loop did not save.
bool SaveAfterReply(const CachePolicy& policy, int64_t n_tokens, int64_t last_saved_tokens);

// `point` added to ascending, duplicate-free `points`.
void AddSavePoint(int64_t point, std::vector<int64_t>* points);

}  // namespace flashkv
