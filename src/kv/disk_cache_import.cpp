// DiskCache::Impl::Import (kv/disk_cache.h): an entry fetched from another tier, kept
// locally under the same admission and durability rules as a save.
#include <unistd.h>

#include <atomic>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kv/disk_cache_impl.h"
#include "util/file_io.h"

namespace flashkv {
namespace {

std::atomic<uint64_t> g_import_seq{0};

Status WriteDurably(const std::string& tmp, const std::string& path, std::string_view bytes) {
  FLASHKV_ASSIGN_OR_RETURN(File f, File::Create(tmp, /*exclusive=*/true));
  FLASHKV_RETURN_IF_ERROR(f.Write(bytes.data(), bytes.size()));
  FLASHKV_RETURN_IF_ERROR(f.SyncData());
  FLASHKV_RETURN_IF_ERROR(f.Close());
  return RenameDurably(tmp, path);
}

}  // namespace

void DiskCache::Impl::SetStoredHook(std::function<void(const DiskStoredEntry&)> hook) {
  std::lock_guard<std::mutex> lock(hook_mu_);
  stored_hook_ = std::move(hook);
}

Status DiskCache::Impl::Import(std::string_view key, uint32_t n_tokens,
                               std::span<const DiskImportObject> objects) {
  if (!opt_.identity) return FailedPrecondition("kv cache opened without a model identity");
  if (dir_.read_only()) return FailedPrecondition("kv cache {} is read-only", opt_.dir);
  Sha1Digest digest;
  if (!ParseSha1Hex(key, &digest)) return InvalidArgument("'{}' is not an entry key", key);
  // An entry is one file named by its key (docs/KV_FORMAT.md); nothing else is written.
  const std::string name = SnapshotFileName(digest);
  if (objects.size() != 1 || objects[0].name != name) {
    return InvalidArgument("entry {} must be the one file {}", key, name);
  }
  FLASHKV_RETURN_IF_ERROR(CheckDirectory());
  const std::string_view bytes = objects[0].bytes;
  const std::string skey(key);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_keys_.count(skey)) return Status::Ok();
    std::vector<DiskVictim> victims;
    if (const DiskRecord* r = index_.Find(skey)) {
      if (r->entry.loadable) return Status::Ok();
      victims.push_back(index_.Evict(skey, "replaced"));
    }
    DiskCacheEntry probe;
    probe.n_tokens = n_tokens;
    probe.file_bytes = bytes.size();
    std::vector<DiskVictim> more;
    Status st =
        index_.Plan(bytes.size(), probe.Value(0, 1), opt_.budget_bytes, CacheNowMs(), &more);
    victims.insert(victims.end(), more.begin(), more.end());
    // Unlinks are cheap: done under the lock, as Collect does.
    SettleLocked(victims, DeleteVictims(victims));
    if (!st.ok()) {
      ++stats_.save_skipped;
      return st.WithContext(fmt::format("kv cache import of {} tokens", n_tokens));
    }
    index_.Reserve(bytes.size());
    pending_keys_.insert(skey);
  }
  const std::string path = JoinPath(opt_.dir, name);
  const std::string tmp = JoinPath(
      opt_.dir,
      fmt::format("{}{}{}.import{}", skey, kSnapshotTempMarker, ::getpid(), ++g_import_seq));
  Status st = WriteDurably(tmp, path, bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    index_.Unreserve(bytes.size());
    pending_keys_.erase(skey);
    if (!st.ok()) ++stats_.save_failures;
  }
  if (!st.ok()) {
    (void)RemoveFile(tmp);
    return st.WithContext("kv cache import");
  }
  ScanEntry(path, digest, bytes.size());
  std::lock_guard<std::mutex> lock(mu_);
  const DiskRecord* r = index_.Find(skey);
  if (r == nullptr || !r->entry.loadable) {
    return Corrupt("imported entry {} is not loadable here", skey);
  }
  return Status::Ok();
}

}  // namespace flashkv
