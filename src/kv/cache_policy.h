// CachePolicy: when the engine should write disk snapshots and where the saved prefix
// ends (docs/SERVER.md §3.1) — plain functions over token counts and ids, no I/O. Must not: touch
// files or states (DiskCache does) or run the model.
//
// The four save reasons:
// - cold: after the first prefill of a prompt that reused nothing, for prompts of
//   [min_tokens, cold_max_tokens] tokens. The boundary is the chat anchor — just before
//   the last user-turn marker that precedes the first assistant marker, i.e. system +
//   tools + earlier turns, the part independent agent sessions share — when that is at
//   least min_tokens; otherwise the prompt minus boundary_trim_tokens (BPE may merge
//   the last few tokens differently once more text follows), aligned down to
//   boundary_align_tokens (the prefill chunk grid, so compressor rows close exactly as
//   in a cold run), or the whole prompt when that falls below min_tokens.
// - continued: whenever a growing session reaches an absolute multiple of the continued
//   step (the interval rounded up to the alignment) beyond the last save.
// - evict: before a live session of >= min_tokens is replaced by an unrelated request.
// - shutdown: on clean exit, for a live session of >= min_tokens.
//
// Threading: immutable after construction; every method is const and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "util/status.h"

namespace flashkv {

struct CachePolicyOptions {
  int64_t min_tokens = 512;                   // never save or load shorter snapshots
  int64_t cold_max_tokens = 30000;            // 0 disables cold saves
  int64_t continued_interval_tokens = 10240;  // 0 disables continued saves
  int64_t boundary_trim_tokens = 32;
  int64_t boundary_align_tokens = 2048;  // 0: no alignment
};

// The chat-template marker ids the cold anchor looks for (-1: not in the vocabulary).
struct ChatMarkerIds {
  int32_t user = -1;       // <｜User｜>
  int32_t assistant = -1;  // <｜Assistant｜>
};

class CachePolicy {
 public:
  // kInvalidArgument for negative values or 0 < cold_max_tokens < min_tokens.
  static Expected<CachePolicy> Create(const CachePolicyOptions& options);
  CachePolicy() = default;  // the defaults above

  const CachePolicyOptions& options() const { return options_; }

  // Where a cold snapshot of `prompt` should end (1..prompt.size()), or nullopt when the
  // prompt gets no cold save (too short, too long, cold saves off).
  std::optional<int64_t> ColdBoundary(std::span<const int32_t> prompt,
                                      const ChatMarkerIds& markers) const;
  // The continued step: the interval rounded up to the alignment (10000 → 10240); 0 off.
  int64_t ContinuedStep() const;
  // True when a session of `n_tokens`, last saved at `last_saved_tokens`, sits on a
  // continued frontier that should be saved now.
  bool IsContinuedFrontier(int64_t n_tokens, int64_t last_saved_tokens) const;
  // Positions in (begin, end] where prefill must pause so a snapshot can be taken: the
  // cold boundary (if given and inside) and every continued frontier beyond
  // `last_saved_tokens`, ascending.
  std::vector<int64_t> SavePoints(int64_t begin, int64_t end, std::optional<int64_t> cold_boundary,
                                  int64_t last_saved_tokens) const;
  // Evict and shutdown saves: the live session is long enough.
  bool ShouldSaveSession(int64_t n_tokens) const { return n_tokens >= options_.min_tokens; }
  // Disk entries shorter than this are never loaded.
  int64_t min_load_tokens() const { return options_.min_tokens; }

 private:
  explicit CachePolicy(const CachePolicyOptions& o) : options_(o) {}
  CachePolicyOptions options_;
};

}  // namespace flashkv
