// Session: one live sequence kept in memory between requests (tier 1 of the resume
// cascade) — the KvState, the token ids it holds, tokens already decided but not yet run
// through the model, the next-token logits, and the bytes those ids decode to. Must not:
// run the model or sample (the engine worker does), or know HTTP.
//
// Why "pending" tokens exist: the last token of a generation (EOS, the tool-call end
// marker, the token that hit max_tokens) is sampled but never evaluated — evaluating it
// would cost a forward step nobody may need. The next request that continues the session
// evaluates pending tokens first, so the KV always matches what the client replays.
//
// Threading: owned by the engine worker; never touched by another thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kv/resume_point.h"
#include "state/kv_state.h"

namespace flashkv {

// A text that a client is expected to resend as the start of its next prompt although it
// is not the decoded text of the session's tokens — e.g. the rendered turn without the
// hidden reasoning the KV holds (docs/SERVER.md §2.3, visible keys). A prompt that starts
// with `text` continues the session after its tokens and `tail`.
struct VisibleKey {
  std::string text;
  // Ids the visible text covers beyond the evaluated tokens: the session's pending ids,
  // then those the text implies (the EOS) — the key's resume tail (kv/resume_point.h).
  std::vector<int32_t> tail;
};

class Session {
 public:
  Session(int64_t id, KvState state, int n_vocab);

  Session(Session&&) noexcept = default;
  Session& operator=(Session&&) noexcept = default;

  int64_t id() const { return id_; }
  KvState& state() { return state_; }
  const KvState& state() const { return state_; }

  // Ids evaluated into the KV, in order (== state().n_tokens() entries).
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // Ids decided after tokens() but not evaluated yet.
  const std::vector<int32_t>& pending() const { return pending_; }
  size_t total_tokens() const { return tokens_.size() + pending_.size(); }
  // Bytes of tokens() followed by pending(), as the tokenizer decodes them.
  const std::string& text() const { return text_; }
  // Bytes of tokens() alone.
  std::string_view evaluated_text() const {
    return std::string_view(text_).substr(0, text_.size() - pending_bytes_);
  }

  // Next-token logits after tokens(), [n_vocab]; meaningful only when has_logits().
  std::span<float> logits() { return logits_; }
  std::span<const float> logits() const { return logits_; }
  // True when logits() are the next-token logits after tokens() (pending ids aside).
  bool logits_valid() const { return logits_valid_; }
  // True when logits() belong to the last evaluated token and nothing is pending.
  bool has_logits() const { return logits_valid_ && pending_.empty(); }

  // Decides `id` (whose bytes are `bytes`) after everything held so far.
  void AddPending(int32_t id, std::string_view bytes);
  // The first n pending ids have been evaluated into state(); `logits_valid` says whether
  // logits() now hold the next-token logits after them.
  void CommitPending(size_t n, bool logits_valid);

  // Drops the pending ids (never evaluated, so the state is unchanged); logits() stay
  // those after tokens().
  void DropPending();

  // The resume points the session offers (kv/resume_point.h): its own (tokens, text,
  // pending ids), then one per visible key. Views into the session.
  std::vector<ResumeKey> ResumeKeys() const;

  const std::vector<VisibleKey>& visible_keys() const { return visible_keys_; }
  // Replaces the visible keys; valid until the session changes.
  void SetVisibleKeys(std::vector<VisibleKey> keys) { visible_keys_ = std::move(keys); }

  // Takes over a state restored from a disk snapshot: state() already holds `tokens`;
  // `text` is their decoded bytes and `logits` [n_vocab] the next-token logits after them.
  void AdoptRestored(std::vector<int32_t> tokens, std::string text, std::span<const float> logits);

  // Token count of the last disk snapshot taken of (or restored into) this session; the
  // continued-save schedule counts from here.
  int64_t last_saved_tokens() const { return last_saved_tokens_; }
  void set_last_saved_tokens(int64_t n) { last_saved_tokens_ = n; }

  // Forgets everything (after a failed forward pass, or to reuse the slot). `new_id`
  // names the sequence that will use it next.
  Status Reset(int64_t new_id);

  // Recency for LRU eviction: a larger tick was used more recently.
  uint64_t last_used() const { return last_used_; }
  void set_last_used(uint64_t tick) { last_used_ = tick; }

  // A request is running on the session (the engine's batched path): it is neither
  // matched for another prompt nor evicted until that request ends.
  bool in_use() const { return in_use_; }
  void set_in_use(bool in_use) { in_use_ = in_use; }

 private:
  int64_t id_;
  KvState state_;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> pending_;
  std::string text_;
  std::vector<uint32_t> pending_piece_bytes_;  // [pending_.size()] bytes of each pending id
  size_t pending_bytes_ = 0;                   // their sum: the tail of text_
  std::vector<float> logits_;                  // [n_vocab]
  bool logits_valid_ = false;
  std::vector<VisibleKey> visible_keys_;
  uint64_t last_used_ = 0;
  bool in_use_ = false;
  int64_t last_saved_tokens_ = 0;
};

}  // namespace flashkv
