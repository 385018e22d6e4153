// KvCheckpoint: what appending at most `max_tokens` tokens to a KvState can rewrite, copied
// aside on the state's backend, so that the state can be put back exactly where it was. The
// rollback of speculative decoding (docs/DS4_MODEL.md §6, engine/speculative.h): a verify
// step appends a draft of k tokens (+ the last sampled one) in one forward, and when a
// drafted token is rejected the state goes back to the checkpoint and the kept tokens are
// appended again — what ds4 does by default (snapshot before the verifier, replay on a
// partial accept), since DS4's compressor frontiers hold per-token rows of open windows that
// a closed window folds away.
//
// What is copied, per layer: the window ring's slots of positions n … n + max_tokens − 1
// (the only slots those tokens write) and every frontier (compressor and indexer kv and
// score). Compressed and indexer rows are not: rows of windows closed before the checkpoint
// are never rewritten, and rows past them are read only below the token count, which the
// restore puts back. Copies run in the backend's stream order (Backend::Copy), behind the
// forward passes queued before. Must not: run the model or decide what to accept.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "state/kv_state.h"
#include "util/status.h"

namespace flashkv {

class KvCheckpoint {
 public:
  // Buffers for states of `shape` and forwards of at most max_tokens (1 … n_swa) tokens.
  static Expected<KvCheckpoint> Create(Backend& backend, const KvShape& shape, int max_tokens);

  int max_tokens() const { return max_tokens_; }
  bool captured() const { return n_tokens_ >= 0; }
  int64_t n_tokens() const { return n_tokens_; }  // the captured state's count (−1: none)

  // Copies aside what the next max_tokens tokens appended to `state` can rewrite.
  Status Capture(const KvState& state);
  // Puts `state` back to the captured moment (the window slots and frontiers copied back, the
  // token count set). FailedPrecondition unless it is a state of this shape at most
  // max_tokens past the capture, or nothing was captured.
  Status Restore(KvState& state) const;

  // Device bytes the buffers take (one per session that speculates).
  static uint64_t BytesFor(const KvShape& shape, int max_tokens);

 private:
  struct LayerCopy {
    DevPtr<float> ring;  // [max_tokens, head_dim]: the slots of positions n … n + max_tokens − 1
    DevPtr<float> frontiers[4];  // kFrontierSections' copies (kv_checkpoint.cpp)
  };
  KvCheckpoint() = default;
  // The ring's slot ranges [first slot, slots) of positions n … n + max_tokens − 1, in order.
  std::vector<std::pair<int, int>> RingRanges(int64_t n) const;
  // Copies between `state` and the checkpoint: to_state false = capture.
  void CopyAll(const KvState& state, bool to_state) const;

  Backend* backend_ = nullptr;
  KvShape shape_;
  int max_tokens_ = 0;
  int64_t n_tokens_ = -1;
  std::vector<DeviceBuffer> buffers_;
  std::vector<LayerCopy> layers_;
};

}  // namespace flashkv
