// The remote tier's restore path, in two halves so that the slow one can run off the
// engine's worker: FetchIntoDisk fetches the longest mirrored entry the ids continue
// (kv_remote/remote_tier.h) and keeps it in the local disk cache (DiskCache::Import, under its
// budget) — network and file writes, no KvState; LoadKept restores it from there — the
// same bit-exact load and checks as a disk hit.
// RemoteCacheTier puts the two halves behind the tier interface (kv/cache_tier.h, tier 4).
// Must not: talk to the store or write files itself.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "kv/cache_tier.h"
#include "kv_disk/disk_cache.h"
#include "kv_remote/remote_tier.h"

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

// Tier 4: the shared store, reached through the local disk its entries are kept in.
// blocking(): Restore waits on the network, so the engine runs FetchIntoDisk on its lookup
// thread (kv_remote/remote_fetcher.h) and then RestoreKept on the worker; Restore does both in
// line for a caller that may wait. Offers reach the store through the disk: its stored
// hook mirrors every save (cli/cache_tiers.cpp), so Offer saves there.
class RemoteCacheTier : public CacheTier {
 public:
  // Both must outlive the tier.
  RemoteCacheTier(RemoteTier& remote, DiskCache& disk) : remote_(remote), disk_(disk) {}

  RemoteTier& remote() { return remote_; }
  DiskCache& disk() { return disk_; }

  CacheSource source() const override { return CacheSource::kRemote; }
  bool blocking() const override { return true; }
  Expected<TierHit> Restore(const ResumeLookup& lookup, KvState& state) override;
  // The second half: restores what FetchIntoDisk kept (LoadKept), the entry's path as origin.
  Expected<TierHit> RestoreKept(const ResumeLookup& lookup, const RemoteKept& kept, KvState& state);
  Expected<std::string> Offer(const KvState& state, const SnapshotContent& content) override {
    return disk_.Save(state, content);
  }
  // The store's entries are every server's: one server does not delete them; the store
  // evicts by its own memory policy (docs/SERVER.md, the shared tier).
  Status Evict(std::string_view key) override;

 private:
  RemoteTier& remote_;
  DiskCache& disk_;
};

}  // namespace flashkv
