#include "kv_remote/remote_restore.h"

#include <chrono>

#include <spdlog/spdlog.h>

namespace flashkv {

Expected<RemoteKept> FetchIntoDisk(RemoteTier& remote, DiskCache& disk,
                                   std::span<const int32_t> tokens, int64_t min_tokens,
                                   int64_t max_tokens, const std::atomic<bool>* cancel) {
  const auto t0 = std::chrono::steady_clock::now();
  // Only ids name remote entries (a text match needs the local index's texts).
  // Chunks the disk holds already (another entry's) are not fetched again.
  Expected<RemoteFetched> fetched = remote.Fetch(
      tokens, min_tokens, max_tokens,
      [&disk](std::string_view name, uint64_t bytes) { return disk.HasChunk(name, bytes); }, cancel,
      disk.options().budget_bytes);
  if (!fetched.ok()) return fetched.status();
  std::vector<DiskImportObject> objects;
  for (const RemoteObject& o : fetched->objects) objects.push_back({o.name, o.bytes});
  Status kept = disk.Import(fetched->key, fetched->n_tokens, objects);
  if (!kept.ok()) {
    spdlog::warn("kv remote: entry {} not kept locally: {}", fetched->key, kept.ToString());
    return NotFound("remote entry not kept: {}", kept.message());
  }
  RemoteKept out;
  out.key = fetched->key;
  out.n_tokens = fetched->n_tokens;
  out.bytes = fetched->bytes;
  out.fetch_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

Expected<DiskHit> LoadKept(DiskCache& disk, const DiskLookup& lookup, const RemoteKept& kept,
                           KvState& state) {
  const auto t0 = std::chrono::steady_clock::now();
  DiskLookup exact = lookup;
  exact.min_tokens = kept.n_tokens;
  exact.text = {};
  Expected<DiskHit> hit = disk.Load(exact, state);
  if (hit.ok()) {
    hit->load_ms =
        kept.fetch_ms +
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  return hit;
}

Expected<TierHit> RemoteCacheTier::Restore(const ResumeLookup& lookup, KvState& state) {
  FLASHKV_ASSIGN_OR_RETURN(
      const RemoteKept kept,
      FetchIntoDisk(remote_, disk_, lookup.tokens, lookup.min_tokens, lookup.max_tokens));
  return RestoreKept(lookup, kept, state);
}

Expected<TierHit> RemoteCacheTier::RestoreKept(const ResumeLookup& lookup, const RemoteKept& kept,
                                               KvState& state) {
  return ToTierHit(LoadKept(disk_, lookup, kept, state));
}

Status RemoteCacheTier::Evict(std::string_view key) {
  return FailedPrecondition(
      "shared store entry {}: the store's entries are every server's; it evicts by its own "
      "memory policy",
      key);
}

}  // namespace flashkv
