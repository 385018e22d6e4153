#include "kv_disk/disk_scan.h"

#include <algorithm>

#include "kv_disk/disk_cache.h"
#include "kv_disk/disk_writer.h"
#include "util/file_io.h"

namespace flashkv {

Expected<ScannedSnapshot> ScanEntryFile(const std::string& path, const Sha1Digest& key,
                                        std::optional<uint32_t> owner) {
  auto file = File::OpenRead(path, owner);
  if (!file.ok()) return file.status();
  Expected<ScannedSnapshot> scan = ScanSnapshotFile(*file);
  if (scan.ok() && TokensKey(scan->tokens) != key) {
    return Corrupt("file name does not match the SHA1 of its token ids");
  }
  return scan;
}

DiskRecord RecordOf(ScannedSnapshot scan, const Sha1Digest& key, const std::string& path,
                    uint64_t size, const std::optional<SnapshotIdentity>& identity) {
  DiskRecord r;
  r.entry.key = Sha1Hex(key);
  r.entry.path = path;
  r.entry.n_tokens = scan.header.n_tokens;
  r.entry.file_bytes = size;
  r.entry.reason = scan.header.reason;
  r.entry.hit_count = scan.header.hit_count;
  r.entry.created_ms = scan.header.created_ms;
  r.entry.last_used_ms = scan.header.last_used_ms;
  r.entry.numerics = scan.header.identity.numerics;
  r.entry.loadable = identity && scan.header.identity == *identity;
  r.entry.text = std::move(scan.text);
  r.tokens = std::move(scan.tokens);
  r.extensions = SignatureOf(scan.header);
  r.entry.chunks = uint32_t(scan.chunks.size());
  for (const SnapshotChunkRef& c : scan.chunks) r.entry.chunk_bytes += c.file_bytes;
  r.chunks = std::move(scan.chunks);
  return r;
}

Expected<CacheDirectoryView> InspectCacheDirectory(
    const std::string& dir, const std::optional<SnapshotIdentity>& identity) {
  CacheDirectoryView view;
  FLASHKV_ASSIGN_OR_RETURN(std::vector<DirEntry> files, ListDirectory(dir));
  for (const DirEntry& f : files) {
    const std::string path = JoinPath(dir, f.name);
    view.total_bytes += f.size;
    if (f.is_dir && f.name == kQuarantineDirName) {
      auto q = ListDirectory(path);
      if (!q.ok()) return q.status();
      for (const DirEntry& qf : *q) {
        view.total_bytes += qf.size;
        ++view.quarantined_files;
      }
      continue;
    }
    if (f.is_dir && f.name == kChunkDirName) {
      auto c = ListDirectory(path);
      if (!c.ok()) return c.status();
      for (const DirEntry& cf : *c) {
        view.total_bytes += cf.size;
        Sha1Digest name;
        if (cf.name.find(kChunkTempMarker) != std::string::npos) {
          ++view.temp_files;
        } else if (ParseChunkFileName(cf.name, &name)) {
          if (!cf.is_regular) {
            // A FIFO, link or directory under a chunk's name: never opened, but shown.
            view.damaged.emplace_back(JoinPath(path, cf.name),
                                      Corrupt("{} is not a regular file", cf.name));
            continue;
          }
          ++view.chunk_files;
          view.chunk_bytes += cf.size;
        }
      }
      continue;
    }
    if (f.name.find(kSnapshotTempMarker) != std::string::npos) ++view.temp_files;
    Sha1Digest key;
    if (!ParseSnapshotFileName(f.name, &key)) continue;
    if (!f.is_regular) {
      view.damaged.emplace_back(path, Corrupt("{} is not a regular file", f.name));
      continue;
    }
    Expected<ScannedSnapshot> scan = ScanEntryFile(path, key);
    if (!scan.ok()) {
      view.damaged.emplace_back(path, scan.status());
      continue;
    }
    view.entries.push_back(RecordOf(std::move(*scan), key, path, f.size, identity).entry);
  }
  std::sort(view.entries.begin(), view.entries.end(),
            [](const DiskCacheEntry& a, const DiskCacheEntry& b) {
              return a.n_tokens != b.n_tokens ? a.n_tokens > b.n_tokens : a.key < b.key;
            });
  return view;
}

}  // namespace flashkv
