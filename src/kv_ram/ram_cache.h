// RamCache: the host-RAM tier (tier 2, kv/cache_tier.h) of the resume cascade, between the live
// sessions and the disk (docs/DESIGN.md "The path of a request"). It holds snapshot images
// (snapshot/snapshot_codec.h's SnapshotImage, byte for byte a `.kv` file) of sessions that left
// the live pool, of cold chat anchors and of snapshots just restored from disk, bounded by
// a byte budget (`--kv-ram-space-mb`). Their buffers are page-locked through the backend,
// so a GPU moves a state in or out with one DMA pass at PCIe speed instead of through the
// staging copies, and a hit costs no disk read at all.
//
// Lookup is the disk tier's (kv/resume_point.h): the longest entry whose token ids are a
// prefix of the request's, or whose rendered text is a byte prefix of its text. Eviction
// is least recently used first; an entry larger than the whole budget is not admitted.
// Images stay unsealed (no CRCs): the tier is process memory, trusted like the live
// state, and checksumming 340 MB would cost more than the restore itself.
// A put into a page-locked buffer (an evicted entry's, or the standby made ahead of need on
// a background thread, kv/pinned_standby.h) copies only the mutable sections before it
// returns; the closed rows land asynchronously (CaptureSnapshotLayersAsync), and a load or
// an eviction of the entry waits for them.
// Must not: touch files, decide when to save (the engine and kv/cache_policy.h do), or
// run the model.
//
// Threading: not thread-safe; the engine worker owns it.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "backend/backend.h"
#include "kv/cache_tier.h"
#include "kv/pinned_standby.h"
#include "kv/prefix_index.h"
#include "kv/resume_point.h"
#include "snapshot/snapshot_codec.h"
#include "state/kv_state.h"
#include "util/status.h"

namespace flashkv {

struct RamCacheOptions {
  uint64_t budget_bytes = 0;  // 0: nothing is admitted
  SnapshotIdentity identity;  // of every state put in and restored
  // Page-locks the image buffers through this backend (null: plain pageable memory).
  Backend* pin = nullptr;
  // Make the next put's buffer ahead of need (kv/pinned_standby.h).
  bool standby = true;
};

struct RamCacheStats {
  uint64_t budget_bytes = 0;
  uint64_t used_bytes = 0;  // image buffers held, the spare included
  uint64_t entries = 0;
  uint64_t hits = 0, misses = 0;
  uint64_t puts = 0, put_skipped = 0, evictions = 0;
  uint64_t bytes_in = 0;   // copied out of states into the tier
  uint64_t bytes_out = 0;  // restored from the tier into states
};

class RamCache : public CacheTier {
 public:
  explicit RamCache(RamCacheOptions options);
  ~RamCache() override;
  RamCache(const RamCache&) = delete;
  RamCache& operator=(const RamCache&) = delete;

  const RamCacheOptions& options() const { return options_; }

  // Takes a snapshot of `state` and `content` into the tier (see above: the bulk of it may
  // still be moving when this returns), replacing an entry with the same token ids, and
  // evicts least recently used entries until it fits. Returns the key (the SHA1
  // hex of the ids, as the disk tier names files). kResourceExhausted when the image is
  // larger than the budget (nothing is evicted for it).
  Expected<std::string> Offer(const KvState& state, const SnapshotContent& content) override;

  // Restores the longest usable entry into `state` (kv/resume_point.h) and marks it used.
  // kNotFound when none matches (`state` untouched); a failed restore clears `state`, drops
  // the entry and reports the error.
  Expected<TierHit> Restore(const ResumeLookup& lookup, KvState& state) override;
  // Drops the entry (waiting for copies still landing in it); kNotFound when none.
  Status Evict(std::string_view key) override;
  CacheSource source() const override { return CacheSource::kRam; }

  // Makes a page-locked buffer of `bytes` ahead of the first put, on a background thread
  // (a put takes it when it is at most twice the snapshot's size).
  void PrepareHostBuffer(uint64_t bytes) { standby_.Prepare(bytes); }

  // True when an entry holds exactly these ids.
  bool Contains(std::span<const int32_t> tokens) const;
  RamCacheStats stats() const;

 private:
  struct Entry {
    SnapshotImage image;
    std::string text;  // the image's text, kept for the text index's confirmations
    std::list<std::string>::iterator lru;
    PendingCapture pending;  // copies still landing in the image (waited for before use)
  };

  // Removes an entry from the indexes and hands its image back.
  SnapshotImage Take(const std::string& key);

  RamCacheOptions options_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> lru_;  // most recently used first
  TokenPrefixIndex tokens_;
  TextPrefixIndex texts_;
  // The next put's buffer, made and page-locked ahead on a background thread.
  PinnedStandby standby_;
  uint64_t entry_bytes_ = 0;  // capacity of every entry's buffer
  RamCacheStats stats_;
};

}  // namespace flashkv
