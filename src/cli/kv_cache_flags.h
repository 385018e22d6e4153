// The disk KV cache flags shared by `flashkv run` and `flashkv serve` (ds4-server's
// names: --kv-disk-dir, --kv-disk-space-mb, the CachePolicy knobs) and opening the cache
// they describe for one model. Exists so the two commands read them identically.
// Must not: decide when to save or load (CachePolicy and the engine do).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/model_flags.h"
#include "kv/cache_policy.h"
#include "kv_disk/disk_cache.h"
#include "model/model_options.h"
#include "util/status.h"

namespace flashkv::cli {

struct KvDiskFlags {
  std::string dir;  // empty: no disk tier
  uint64_t space_mb = 4096;
  std::string quarantine = "on";                // "on" | "off"
  std::string direct = "on";                    // "on" | "off": O_DIRECT snapshot writes
  uint32_t chunk_tokens = kDefaultChunkTokens;  // 0: manifests hold the whole state
  double write_budget_gb_per_day = 0;           // 0: no write budget
  double min_tokens_per_mib = 0;                // 0: every save that fits is worth it
  CachePolicyOptions policy;
};

// --kv-disk-dir (described by `dir_help`), --kv-disk-space-mb, --kv-quarantine and the
// --kv-cache-* policy flags.
void AddKvDiskFlags(CLI::App* cmd, KvDiskFlags* flags, const std::string& dir_help);

// The cache in flags.dir, keyed to this model's fingerprint and numerics (CacheIdentity)
// so another model's snapshots are never loaded into this one.
Expected<std::unique_ptr<DiskCache>> OpenDiskCache(const KvDiskFlags& flags,
                                                   const ModelSetup& setup);
// The same with the identity already computed (serve shares it with the RAM tier).
Expected<std::unique_ptr<DiskCache>> OpenDiskCache(const KvDiskFlags& flags,
                                                   const SnapshotIdentity& identity);

}  // namespace flashkv::cli
