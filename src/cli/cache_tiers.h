// `flashkv serve`'s snapshot tiers (tiers 2-4, kv/cache_tier.h) opened from its flags: the
// one function that decides which tiers a server runs with, so the rules RunServe used to
// hold inline are reachable by a test (tests/cli/cache_tiers_test.cpp). Must not: decide
// the RAM budget (cmd_serve.cpp sizes "auto" from the host) or the order the engine asks
// the tiers in (kv/cache_tier.h ResumeOrder).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "cli/kv_cache_flags.h"
#include "cli/kv_remote_flags.h"
#include "kv/cache_tier.h"
#include "kv_disk/disk_cache.h"
#include "kv_ram/ram_cache.h"
#include "kv_remote/remote_tier.h"
#include "snapshot/snapshot_format.h"
#include "util/status.h"

namespace flashkv::cli {

struct CacheTierFlags {
  uint64_t ram_budget_bytes = 0;  // 0: no RAM tier
  KvDiskFlags disk;               // dir empty: no disk tier
  KvRemoteFlags remote;           // url empty: no shared store
};

// The tiers opened. Members are destroyed bottom-up: the disk cache's writer thread hands
// saves to the remote tier until it stops, so the remote tier goes after it.
struct CacheTiers {
  std::unique_ptr<RamCache> ram;
  std::unique_ptr<RemoteTier> remote;  // only with `disk`: its entries are kept there
  std::unique_ptr<DiskCache> disk;

  // The sources the engine asks, in ResumeOrder.
  std::vector<CacheSource> Order() const;
};

// Whether the flags open a tier that keys its entries by the model (ram or disk): only
// then is the model fingerprinted (CacheIdentity).
bool NeedsIdentity(const CacheTierFlags& flags);

// Opens the tiers the flags ask for. kInvalidArgument for a malformed shared store
// address, a shared store without --kv-disk-dir, or --kv-disk-space-mb 0. A disk cache
// that cannot open (another server holds the directory, no permission) is logged and left
// out, the shared store with it (it has nowhere to keep its entries): the server still
// runs from memory, as ds4 does. `identity` is required when NeedsIdentity; `pin`
// page-locks the RAM tier's buffers (null: pageable).
Expected<CacheTiers> OpenCacheTiers(const CacheTierFlags& flags,
                                    const std::optional<SnapshotIdentity>& identity, Backend* pin);

}  // namespace flashkv::cli
