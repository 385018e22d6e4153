// The remote tier's restore path: fetch the longest mirrored entry the lookup's ids
// continue (kv/remote_tier.h), keep it in the local disk cache (DiskCache::Import, under
// its budget) and restore it from there — the same bit-exact load and checks as a disk
// hit. Exists so the engine's hook is one call. Must not: talk to the store or write
// files itself.
#pragma once

#include "kv/disk_cache.h"
#include "kv/remote_tier.h"

namespace flashkv {

// kNotFound when the store has nothing usable (or is unreachable: never an error for the
// request); the disk load's error otherwise. The hit's load_ms includes the fetch.
Expected<DiskHit> LoadFromRemote(RemoteTier& remote, DiskCache& disk, const DiskLookup& lookup,
                                 KvState& state);

}  // namespace flashkv
