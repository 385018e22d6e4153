// DiskCache::Impl::Import (kv_disk/disk_cache.h): an entry fetched from another tier, kept
// locally under the same admission and durability rules as a save. A version-2 entry is
// its manifest plus the chunks it names: the chunks go in first (verified, durable,
// indexed and pinned), so the manifest is indexed as a scan would index it, its chunks
// already known, and no sweep or eviction can take them in between.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kv_disk/disk_cache_impl.h"
#include "snapshot/snapshot_chunks.h"
#include "util/file_io.h"

namespace flashkv {
namespace {

std::atomic<uint64_t> g_import_seq{0};

// The fetched bytes, whole (util/file_io.h WriteFileSynced, WriteFileDurably).
std::function<Status(File&)> WriteAll(std::string_view bytes) {
  return [bytes](File& f) { return f.Write(bytes.data(), bytes.size()); };
}

// A fetched chunk, checked: its stored name (hex), header and bytes.
struct ImportChunk {
  std::string hex;
  SnapshotChunkRef ref;
  std::string_view bytes;
  bool write = false;   // not in chunks/ yet: written by this import
  bool pinned = false;  // pinned by this import (released when it ends)
};

}  // namespace

void DiskCache::Impl::SetStoredHook(std::function<void(const DiskStoredEntry&)> hook) {
  std::lock_guard<std::mutex> lock(hook_mu_);
  stored_hook_ = std::move(hook);
}

bool DiskCache::Impl::HasChunk(std::string_view file_name, uint64_t bytes) const {
  Sha1Digest name;
  if (!ParseChunkFileName(file_name, &name)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  const DiskChunk* c = index_.FindChunk(Sha1Hex(name));
  return c != nullptr && c->bytes == bytes;
}

Status DiskCache::Impl::Import(std::string_view key, uint32_t n_tokens,
                               std::span<const DiskImportObject> objects) {
  if (!opt_.identity) return FailedPrecondition("kv cache opened without a model identity");
  if (dir_.read_only()) return FailedPrecondition("kv cache {} is read-only", opt_.dir);
  Sha1Digest digest;
  if (!ParseSha1Hex(key, &digest)) return InvalidArgument("'{}' is not an entry key", key);
  // An entry is its file named by the key plus, for version 2, the chunk files its
  // manifest names (docs/KV_FORMAT.md); nothing else is written.
  const std::string name = SnapshotFileName(digest);
  std::string_view manifest;
  bool have_manifest = false;
  std::map<std::string, ImportChunk> chunks;  // by hex: a chunk listed twice is one
  for (const DiskImportObject& o : objects) {
    Sha1Digest chunk_name;
    if (o.name == name && !have_manifest) {
      manifest = o.bytes;
      have_manifest = true;
    } else if (ParseChunkFileName(o.name, &chunk_name)) {
      Expected<ChunkHeader> h = VerifyChunkBytes(o.bytes, o.name);
      if (!h.ok()) return h.status().WithContext(fmt::format("imported chunk {}", o.name));
      ImportChunk c;
      c.hex = Sha1Hex(chunk_name);
      c.ref = SnapshotChunkRef{chunk_name, o.bytes.size(), h->payload_crc32c};
      c.bytes = o.bytes;
      chunks.emplace(c.hex, c);
    } else {
      return InvalidArgument("entry {} has no file {} (its file is {}, its chunks <name>{})", key,
                             o.name, name, kChunkSuffix);
    }
  }
  if (!have_manifest) return InvalidArgument("entry {} must include its file {}", key, name);
  FLASHKV_RETURN_IF_ERROR(CheckDirectory());
  const std::string skey(key);
  const std::string chunk_dir = ChunkDirOf(opt_.dir);
  // Pins go, and chunks nothing references then (this import's, when it failed) with them.
  auto release = [&] {
    std::vector<DiskVictim> orphans;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [hex, c] : chunks) {
        if (c.pinned) index_.UnpinChunk(hex);
        c.pinned = false;
      }
      orphans = index_.TakeOrphans();
      SettleLocked(orphans, DeleteVictims(orphans));
    }
  };
  uint64_t need = manifest.size();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_keys_.count(skey)) return Status::Ok();
    std::vector<DiskVictim> victims;
    if (const DiskRecord* r = index_.Find(skey)) {
      if (r->entry.loadable) return Status::Ok();
      victims.push_back(index_.Evict(skey, "replaced"));
    }
    // Chunks already here are pinned first, so making room cannot take them; only the
    // missing ones count against the budget.
    for (auto& [hex, c] : chunks) {
      c.pinned = index_.PinChunk(hex);
      c.write = !c.pinned;
      if (c.write) need += c.bytes.size();
    }
    DiskCacheEntry probe;
    probe.n_tokens = n_tokens;
    probe.file_bytes = need;
    std::vector<DiskVictim> more;
    Status st = index_.Plan(need, probe.Value(0, 1), opt_.budget_bytes, CacheNowMs(), &more);
    victims.insert(victims.end(), more.begin(), more.end());
    // Unlinks are cheap: done under the lock, as Collect does.
    SettleLocked(victims, DeleteVictims(victims));
    if (!st.ok()) {
      ++stats_.save_skipped;
      for (auto& [hex, c] : chunks) {
        if (c.pinned) index_.UnpinChunk(hex);
        c.pinned = false;
      }
      return st.WithContext(fmt::format("kv cache import of {} tokens", n_tokens));
    }
    index_.Reserve(need);
    pending_keys_.insert(skey);
  }
  const uint64_t seq = ++g_import_seq;
  Status st = Status::Ok();
  bool wrote_chunk = false;
  for (auto& [hex, c] : chunks) {
    if (!c.write) continue;
    if (!wrote_chunk) st = CreateDirectories(chunk_dir, 0700);
    if (!st.ok()) break;
    const std::string path = JoinPath(chunk_dir, ChunkFileName(c.ref.name));
    // The temp name the start-up scan removes as a torn chunk write.
    const std::string tmp = TempPathFor(path, fmt::format("import{}.{}", ::getpid(), seq));
    st = WriteFileSynced(tmp, WriteAll(c.bytes));
    if (st.ok()) {
      // Renamed and indexed under mu_: the writer thread's unlink of a doomed chunk of the
      // same name checks the index under it too (Unlink), so it cannot remove this file.
      std::lock_guard<std::mutex> lock(mu_);
      if (::rename(tmp.c_str(), path.c_str()) != 0) {
        st = IoError("rename {} -> {}: {}", tmp, path, std::strerror(errno));
      } else {
        index_.AddChunk(hex, path, c.ref);
        c.pinned = index_.PinChunk(hex);
        ++stats_.chunks_written;
      }
    }
    if (!st.ok()) {
      (void)RemoveFile(tmp);
      break;
    }
    wrote_chunk = true;
    NoteWritten(path, c.bytes.size());
  }
  // Every chunk durable in its directory before the manifest that names it exists.
  if (st.ok() && wrote_chunk) st = SyncDirectory(chunk_dir);
  const std::string path = JoinPath(opt_.dir, name);
  const std::string tmp = TempPathFor(path, fmt::format("{}.import{}", ::getpid(), seq));
  if (st.ok()) st = WriteFileDurably(tmp, path, WriteAll(manifest));
  WindowImage window;
  {
    std::lock_guard<std::mutex> lock(mu_);
    index_.Unreserve(need);
    pending_keys_.erase(skey);
    if (!st.ok()) ++stats_.save_failures;
    // What reached the SSD counts against the write budget like a save's bytes (the
    // chunks written even when the manifest then failed).
    uint64_t written = st.ok() ? manifest.size() : 0;
    for (const auto& [hex, c] : chunks) written += c.write && c.pinned ? c.bytes.size() : 0;
    if (written > 0) window = ChargeWritesLocked(written);
  }
  PersistWindow(window);
  if (!st.ok()) {
    release();
    return st.WithContext("kv cache import");
  }
  NoteWritten(path, manifest.size());
  ScanEntry(path, digest, manifest.size());
  release();
  std::lock_guard<std::mutex> lock(mu_);
  const DiskRecord* r = index_.Find(skey);
  if (r == nullptr || !r->entry.loadable) {
    return Corrupt("imported entry {} is not loadable here", skey);
  }
  return Status::Ok();
}

}  // namespace flashkv
