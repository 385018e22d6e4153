// Plain POSIX file I/O for the disk KV cache, written once: an owned descriptor with
// read/write loops that finish short transfers and retry EINTR, positioned reads and
// writes, fsync, atomic rename with a directory fsync, directory listing and creation.
// Cache files are never mmapped (the process already maps a very large GGUF; a mapping
// of a file that another process truncates faults instead of returning an error).
// Must not: know about formats or models. Every error names the path and the errno text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace flashkv {

class File {
 public:
  File() = default;
  ~File();
  File(File&& other) noexcept;
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // Regular files only, opened so that the open itself cannot block: O_NONBLOCK (a FIFO
  // put in place of a cache file would otherwise hold the opener until a writer comes),
  // then fstat must say a regular file — anything else (FIFO, device, directory, socket)
  // is kCorrupt "not a regular file", which the disk cache treats like damage. With
  // `owner`, the file must also belong to that uid (the cache passes its effective uid): a
  // file someone else owns — put there by another user, or restored as root — may have
  // been written by anyone, so it is kCorrupt "owned by uid N" like any other damage.
  static Expected<File> OpenRead(const std::string& path,
                                 std::optional<uint32_t> owner = std::nullopt);
  // Creates or truncates, mode 0600; fails if `exclusive` and the file exists.
  static Expected<File> Create(const std::string& path, bool exclusive = false);
  // Opens an existing file for positioned reads and writes (header patches).
  static Expected<File> OpenReadWrite(const std::string& path);
  // Opens an existing file for O_DIRECT writes (ChunkedFileWriter): addresses, offsets
  // and lengths must be multiples of kDirectAlign. Fails on filesystems without O_DIRECT.
  static Expected<File> OpenDirectWrite(const std::string& path);
  static constexpr size_t kDirectAlign = 4096;

  // Creates `path` if needed and takes an exclusive advisory lock (flock) on it, held
  // until the File closes; kFailedPrecondition when another process holds it.
  static Expected<File> LockExclusive(const std::string& path);

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

  Expected<uint64_t> Size() const;
  // Reads exactly n bytes at `offset`; a short file is Corrupt ("truncated").
  Status ReadAt(uint64_t offset, void* dst, size_t n) const;
  // Turns O_DIRECT on or off for this descriptor (fcntl F_SETFL): the same open file, so
  // a file unlinked meanwhile stays readable. Fails on filesystems without O_DIRECT; the
  // caller then reads through the page cache.
  Status SetDirectIo(bool on);
  // Reads up to n bytes at `offset` through an O_DIRECT descriptor (offset, dst and n
  // multiples of kDirectAlign) and returns how many it got: fewer than n only where the
  // file ends, inside the last block.
  Expected<size_t> ReadDirectAt(uint64_t offset, void* dst, size_t n) const;
  // Appends all n bytes at the current position; ENOSPC and friends become kIoError /
  // kResourceExhausted with the path.
  Status Write(const void* src, size_t n);
  Status WriteAt(uint64_t offset, const void* src, size_t n);
  Status Sync();
  // fdatasync: the data and the metadata needed to read it back (the size), not times.
  Status SyncData();
  // Starts writeback of [offset, offset + n) without waiting for it (sync_file_range
  // SYNC_FILE_RANGE_WRITE), so the disk works on one chunk while the next is prepared;
  // durability still needs Sync/SyncData. Best effort: filesystems without it are
  // ignored (a write error shows up at the sync).
  void StartWriteback(uint64_t offset, uint64_t n);
  // Tells the kernel the cached pages are no longer needed (benchmarks: cold reads).
  void DropCache();
  Status Close();

 private:
  File(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  Expected<size_t> ReadUpTo(uint64_t offset, void* dst, size_t n, bool direct) const;
  int fd_ = -1;
  std::string path_;
};

// Reads the whole (regular) file; one larger than `max_bytes` (a sparse file announcing
// 100 GiB, say) is kCorrupt before anything is allocated for it.
Expected<std::string> ReadWholeFile(const std::string& path, uint64_t max_bytes = UINT64_MAX);

// fsyncs a directory so that a rename or unlink in it is durable.
Status SyncDirectory(const std::string& dir);
// rename(2) `from` over `to` (same filesystem), then fsyncs `to`'s directory.
Status RenameDurably(const std::string& from, const std::string& to);
// The durable write of a whole file, written once for every writer of the cache directory
// (kv_disk/disk_writer.cpp, kv_disk/disk_cache_import.cpp, snapshot/snapshot_chunks.cpp):
// WriteFileSynced creates `tmp` exclusively, lets `write` fill it, fdatasyncs and closes it;
// WriteFileDurably then runs `before_rename` (e.g. moving a directory out of the way) and
// renames it over `final_path` with the directory fsynced (RenameDurably). On any error of
// WriteFileDurably the temp file is removed and `final_path` is untouched; WriteFileSynced
// leaves the removal to its caller (which may rename it under a lock of its own).
Status WriteFileSynced(const std::string& tmp, const std::function<Status(File&)>& write);
Status WriteFileDurably(const std::string& tmp, const std::string& final_path,
                        const std::function<Status(File&)>& write,
                        const std::function<void()>& before_rename = {});
// unlink(2); a missing file is OK when `missing_ok`.
Status RemoveFile(const std::string& path, bool missing_ok = true);
// mkdir -p with `mode` for the directories it creates.
Status CreateDirectories(const std::string& path, uint32_t mode = 0700);

struct DirEntry {
  std::string name;
  bool is_dir = false;
  bool is_regular = false;
  uint64_t size = 0;  // st_size of regular files
};
// Entries of `dir` except "." and ".." (lstat: links are neither dir nor regular).
Expected<std::vector<DirEntry>> ListDirectory(const std::string& dir);

// "dir/name" without doubling the slash.
std::string JoinPath(std::string_view dir, std::string_view name);

}  // namespace flashkv
