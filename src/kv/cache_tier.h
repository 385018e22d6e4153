// CacheTier: the one interface of the snapshot tiers of the resume step (docs/DESIGN.md
// "The path of a request"): a tier restores the longest usable entry for a lookup into a
// state and says what it covers, takes a snapshot offered to it, and drops an entry. The
// engine's resume step (engine/engine.cpp ResumeFor) asks the tiers of ResumeOrder in one
// loop. The shape follows vLLM's offloading manager and SGLang's HiCache storage: tiers
// behind one lookup/load/store contract, ordered cheapest first.
//
// Tier numbering, the same in every comment, log and doc:
//   1 live sessions on the backend (engine/session_pool.h; not a CacheTier: no snapshot)
//   2 host-RAM snapshots (kv_ram/ram_cache.h)
//   3 disk snapshots (kv_disk/disk_cache.h)
//   4 the shared store (kv_remote/remote_restore.h RemoteCacheTier over kv_remote/remote_tier.h)
//   5 none: cold prefill from the first token
//
// Lookup and load are one call (Restore): the disk tier tries its candidates longest first and a
// damaged one falls through to the next (DiskCache::Load), which a separate "what would
// you load" question could not promise. Must not: decide when to save (kv/cache_policy.h
// and the engine do) or run the model.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kv/resume_point.h"
#include "snapshot/snapshot_codec.h"
#include "state/kv_state.h"
#include "util/status.h"

namespace flashkv {

// Where the reused part of a prompt came from, by tier (the numbering above).
enum class CacheSource { kNone, kLive, kRam, kDisk, kRemote };
// "none" | "live" | "ram" | "disk" | "remote"
const char* CacheSourceName(CacheSource source);
// The tier number above: 1 live .. 4 remote, 5 for kNone (cold prefill).
int CacheTierNumber(CacheSource source);

// An entry a tier restored: what it covers (tokens, text, tail: kv/resume_point.h) and
// where it came from.
struct TierHit : ResumeHit {
  std::string origin;  // the entry's file (disk, remote); empty for RAM
};

class CacheTier {
 public:
  virtual ~CacheTier() = default;

  virtual CacheSource source() const = 0;
  // True when Restore waits on the network: the engine runs the tier's fetch on its lookup
  // thread instead of the worker (kv_remote/remote_fetcher.h) and restores the kept entry after.
  virtual bool blocking() const { return false; }
  // Restores the longest usable entry for `lookup` into `state`. kNotFound: a miss
  // (`state` untouched or cleared); any other error: the tier's entries could not serve
  // (damage, I/O) and the caller goes on to the next tier.
  virtual Expected<TierHit> Restore(const ResumeLookup& lookup, KvState& state) = 0;
  // Offers a snapshot of `state` + `content`; returns its key (SHA-1 hex of the ids).
  // kResourceExhausted when the tier would not keep it.
  virtual Expected<std::string> Offer(const KvState& state, const SnapshotContent& content) = 0;
  // Drops the entry filed under `key`; kNotFound when the tier holds none.
  virtual Status Evict(std::string_view key) = 0;
};

// The resume order, cheapest first, of the tiers that exist (null: none): RAM, disk, then
// the shared store. The one place the order is decided.
std::vector<CacheTier*> ResumeOrder(CacheTier* ram, CacheTier* disk, CacheTier* remote);

}  // namespace flashkv
