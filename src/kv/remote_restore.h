// The remote tier's restore path, in two halves so that the slow one can run off the
// engine's worker: FetchIntoDisk fetches the longest mirrored entry the ids continue
// (kv/remote_tier.h) and keeps it in the local disk cache (DiskCache::Import, under its
// budget) — network and file writes, no KvState; LoadKept restores it from there — the
// same bit-exact load and checks as a disk hit.
// Must not: talk to the store or write files itself.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>

#include "kv/disk_cache.h"
#include "kv/remote_tier.h"

namespace flashkv {

// An entry fetched and kept on the local disk.
struct RemoteKept {
  std::string key;
  uint32_t n_tokens = 0;
  uint64_t bytes = 0;  // fetched (chunks the disk held already are not)
  double fetch_ms = 0;
};

// kNotFound when the store has nothing usable, is unreachable or the disk would not keep
// it (never an error for the request); kCancelled once `cancel` is set.
Expected<RemoteKept> FetchIntoDisk(RemoteTier& remote, DiskCache& disk,
                                   std::span<const int32_t> tokens, int64_t min_tokens,
                                   int64_t max_tokens, const std::atomic<bool>* cancel = nullptr);

// Restores the kept entry (the longest on disk for these ids: the disk tier missed just
// before); the disk load's error otherwise. The hit's load_ms includes the fetch.
Expected<DiskHit> LoadKept(DiskCache& disk, const DiskLookup& lookup, const RemoteKept& kept,
                           KvState& state);

}  // namespace flashkv
