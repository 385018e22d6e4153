#include "kv/remote_restore.h"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

namespace flashkv {

Expected<DiskHit> LoadFromRemote(RemoteTier& remote, DiskCache& disk, const DiskLookup& lookup,
                                 KvState& state) {
  const auto t0 = std::chrono::steady_clock::now();
  // Only ids name remote entries (a text match needs the local index's texts).
  // Chunks the disk holds already (another entry's) are not fetched again.
  Expected<RemoteFetched> fetched = remote.Fetch(
      lookup.tokens, lookup.min_tokens, std::min<int64_t>(lookup.max_tokens, state.ctx_size()),
      [&disk](std::string_view name, uint64_t bytes) { return disk.HasChunk(name, bytes); });
  if (!fetched.ok()) return fetched.status();
  std::vector<DiskImportObject> objects;
  for (const RemoteObject& o : fetched->objects) objects.push_back({o.name, o.bytes});
  Status kept = disk.Import(fetched->key, fetched->n_tokens, objects);
  if (!kept.ok()) {
    spdlog::warn("kv remote: entry {} not kept locally: {}", fetched->key, kept.ToString());
    return NotFound("remote entry not kept: {}", kept.message());
  }
  // The entry is now the longest on disk for these ids (the disk tier missed just before).
  DiskLookup exact = lookup;
  exact.min_tokens = fetched->n_tokens;
  exact.text = {};
  Expected<DiskHit> hit = disk.Load(exact, state);
  if (hit.ok()) {
    hit->load_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  return hit;
}

}  // namespace flashkv
