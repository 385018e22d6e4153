#include "cli/cache_tiers.h"

#include <spdlog/spdlog.h>

#include "kv_remote/remote_address.h"
#include "kv_remote/remote_restore.h"

namespace flashkv::cli {

std::vector<CacheSource> CacheTiers::Order() const {
  std::optional<RemoteCacheTier> shared;
  if (remote != nullptr && disk != nullptr) shared.emplace(*remote, *disk);
  std::vector<CacheSource> sources;
  for (const CacheTier* tier : ResumeOrder(ram.get(), disk.get(), shared ? &*shared : nullptr)) {
    sources.push_back(tier->source());
  }
  return sources;
}

bool NeedsIdentity(const CacheTierFlags& flags) {
  return flags.ram_budget_bytes > 0 || !flags.disk.dir.empty();
}

Expected<CacheTiers> OpenCacheTiers(const CacheTierFlags& flags,
                                    const std::optional<SnapshotIdentity>& identity, Backend* pin) {
  if (NeedsIdentity(flags) && !identity) {
    return FailedPrecondition("the KV cache tiers need the model's identity");
  }
  CacheTiers tiers;
  if (flags.ram_budget_bytes > 0) {
    RamCacheOptions ro;
    ro.budget_bytes = flags.ram_budget_bytes;
    ro.identity = *identity;
    ro.pin = pin;
    tiers.ram = std::make_unique<RamCache>(ro);
  }
  // Before the disk cache: its writer thread hands saves to the tier until it stops.
  if (!flags.remote.url.empty()) {
    FLASHKV_RETURN_IF_ERROR(ParseRemoteAddress(flags.remote.url).status());
    if (flags.disk.dir.empty()) {
      return InvalidArgument(
          "--kv-remote needs --kv-disk-dir: fetched entries are kept and restored there");
    }
    FLASHKV_ASSIGN_OR_RETURN(tiers.remote, OpenRemoteTier(flags.remote, *identity));
  }
  if (!flags.disk.dir.empty()) {
    if (flags.disk.space_mb == 0) return InvalidArgument("--kv-disk-space-mb must be positive");
    Expected<std::unique_ptr<DiskCache>> opened = OpenDiskCache(flags.disk, *identity);
    if (!opened.ok()) {
      spdlog::error("disk KV cache disabled: {}", opened.status().ToString());
      tiers.remote.reset();
      return tiers;
    }
    tiers.disk = std::move(*opened);
    if (tiers.remote != nullptr) {
      RemoteTier* tier = tiers.remote.get();
      tiers.disk->SetStoredHook([tier](const DiskStoredEntry& e) {
        tier->Enqueue(RemoteUpload{e.key, e.n_tokens, e.paths});
      });
      spdlog::info("kv remote: {} (mirroring saves, fetching on local misses)",
                   tier->options().store.address.ToString());
    }
  }
  return tiers;
}

}  // namespace flashkv::cli
