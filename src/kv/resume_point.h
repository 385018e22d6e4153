// A resume point: where a request may continue from a KV state it did not compute itself
// — a live session (engine/session_pool.h), a RAM snapshot (kv_ram/ram_cache.h) or a disk
// snapshot (kv_disk/disk_cache.h). Every tier answers with the same key, the same rule and
// the same order, defined here once:
//
//   key    the ids evaluated into the state, the rendered text the point is filed under,
//          and the tail: ids that text covers beyond the evaluated ones (a live session's
//          pending ids, a visible key's appended EOS; docs/KV_FORMAT.md "tail").
//   rule   a request continues a key when the key's ids are a prefix of its ids (an id
//          match: it goes on with its own remaining ids), or when the key's text is a byte
//          prefix of its text (a text match: it goes on with the tail, then its remaining
//          text tokenized).
//   order  more evaluated ids first; at equal length an id match before a text match,
//          then the longer text.
//
// The live pool applies MatchResumeKey to each session's keys; the snapshot tiers get the
// same candidates from their prefix indexes (kv/prefix_index.h MatchPrefixes) and order
// them with ResumeBefore. Must not: know tiers' storage, the engine's sessions, or
// tokenize (callers pass the encoder).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "snapshot/snapshot_codec.h"

namespace flashkv {

struct ResumeKey {
  std::span<const int32_t> tokens;  // evaluated ids
  std::string_view text;            // rendered bytes the point is filed under
  std::span<const int32_t> tail;    // ids `text` covers beyond `tokens`
};

// What a request offers for reuse.
struct ResumeLookup {
  std::span<const int32_t> tokens;
  std::string_view text;
  int64_t min_tokens = 1;          // ignore shorter entries
  int64_t max_tokens = INT64_MAX;  // ignore longer ones (the state's context)
};

enum class ResumeMatch { kNone, kTokens, kText };

// How `lookup` continues `key` by the rule above (the length bounds are not checked
// here); an id match wins where both hold. `has_logits`: the point holds the next-token
// logits after key.tokens — without them a match must leave at least one id to evaluate.
ResumeMatch MatchResumeKey(const ResumeKey& key, const ResumeLookup& lookup, bool has_logits);

// The candidate order above: true when a point of `a_tokens` evaluated ids matched
// `a_by_text` (with `a_text_bytes` of text) is tried before b.
bool ResumeBefore(int64_t a_tokens, bool a_by_text, uint64_t a_text_bytes, int64_t b_tokens,
                  bool b_by_text, uint64_t b_text_bytes);

// The ids a request evaluates after key.tokens once matched: its own remaining ids (id
// match), or key.tail then `encode` of its text after key.text (text match).
std::vector<int32_t> ResumeContinuation(
    const ResumeKey& key, ResumeMatch match, const ResumeLookup& lookup,
    const std::function<std::vector<int32_t>(std::string_view)>& encode);

// A snapshot restored into the caller's state.
struct ResumeHit {
  bool by_text = false;         // matched through the text (tokens may differ from the request)
  uint64_t text_bytes = 0;      // request text bytes covered (== the entry's text size)
  std::vector<int32_t> tokens;  // [n_tokens] the snapshot's ids
  std::vector<float> logits;    // [n_vocab] next-token logits after them
  std::vector<int32_t> tail;    // ids its text covers beyond `tokens`
  std::string replay;           // its tool replay section (opaque, may be empty)
  std::vector<SnapshotExtension> extensions;  // the writer's own extensions
  std::string text;                           // the rendered text the snapshot is filed under
  double load_ms = 0;                         // finding, reading and restoring it
  uint64_t bytes = 0;                         // bytes moved into the state (its layer sections)

  ResumeKey key() const { return ResumeKey{tokens, text, tail}; }
  ResumeMatch match() const { return by_text ? ResumeMatch::kText : ResumeMatch::kTokens; }
};

}  // namespace flashkv
