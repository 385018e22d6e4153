// The names inside a KV cache directory (docs/KV_FORMAT.md), the one place they are made
// and parsed: entry files "<40 hex>.kv", chunk files "chunks/<40 hex>.kvc", the
// quarantine folder, the lock, the write-budget window, and the temp names a durable write
// goes through ("<final name>.tmp.<tag>", removed by the start-up scan when stale). Every
// reader and writer of the directory (disk cache, writer, import, scan, `flashkv kv`)
// takes them from here. Must not: touch the file system.
#pragma once

#include <string>
#include <string_view>

#include "util/sha1.h"

namespace flashkv {

inline constexpr std::string_view kSnapshotSuffix = ".kv";
inline constexpr const char* kQuarantineDirName = "quarantine";
inline constexpr const char* kLockFileName = ".lock";
// Chunks (format version 2) live in this subdirectory, as "<40 hex>.kvc".
inline constexpr const char* kChunkDirName = "chunks";
inline constexpr std::string_view kChunkSuffix = ".kvc";
// The rolling write-budget window (kv_disk/disk_write_window.h).
inline constexpr std::string_view kWriteWindowFileName = ".write-window";

// A temp name is the final name, this marker, then a tag unique to the writer; the markers
// below are what the scan looks for.
inline constexpr std::string_view kTempMarker = ".tmp.";
inline constexpr std::string_view kSnapshotTempMarker = ".kv.tmp.";
inline constexpr std::string_view kChunkTempMarker = ".kvc.tmp.";
inline constexpr std::string_view kWriteWindowTempPrefix = ".write-window.tmp.";

// "<40 hex>.kv"; and the key of an entry file name, or false for any other name.
std::string SnapshotFileName(const Sha1Digest& key);
bool ParseSnapshotFileName(std::string_view name, Sha1Digest* key);
// "<40 hex>.kvc"; and the name of a chunk file name (lowercase hex only), or false.
std::string ChunkFileName(const Sha1Digest& name);
bool ParseChunkFileName(std::string_view file_name, Sha1Digest* name);
// The chunk directory of a cache directory.
std::string ChunkDirOf(const std::string& cache_dir);
// The temp file a durable write of `final_path` goes through: "<final_path>.tmp.<tag>".
std::string TempPathFor(std::string_view final_path, std::string_view tag);

}  // namespace flashkv
