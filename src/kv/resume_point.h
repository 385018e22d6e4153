// What every snapshot tier (kv/ram_cache.h, kv/disk_cache.h) is asked and answers when a
// request looks for the longest saved prefix it continues: the lookup (the request's
// token ids and rendered text, with length bounds) and the hit (the snapshot's own ids,
// next-token logits and extensions, now restored into the caller's KvState). One shape for
// both tiers, so the engine turns a hit into a session the same way wherever it came from.
// Must not: know tiers' storage, or the engine's sessions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kv/snapshot_codec.h"

namespace flashkv {

// What a request offers for reuse. An entry is usable when its tokens are a prefix of
// `tokens`, or its text is a byte prefix of `text` (then the snapshot's own token ids are
// authoritative and only the text after it is tokenized by the caller).
struct ResumeLookup {
  std::span<const int32_t> tokens;
  std::string_view text;
  int64_t min_tokens = 1;          // ignore shorter entries
  int64_t max_tokens = INT64_MAX;  // ignore longer ones (the state's context)
};

// A snapshot restored into the caller's state.
struct ResumeHit {
  bool by_text = false;         // matched through the text (tokens may differ from the request)
  uint64_t text_bytes = 0;      // request text bytes covered (== the entry's text size)
  std::vector<int32_t> tokens;  // [n_tokens] the snapshot's ids
  std::vector<float> logits;    // [n_vocab] next-token logits after them
  std::vector<SnapshotExtension> extensions;
  std::string text;    // the rendered text the snapshot is filed under
  double load_ms = 0;  // finding, reading and restoring it
  uint64_t bytes = 0;  // bytes moved into the state (its layer sections)
};

}  // namespace flashkv
