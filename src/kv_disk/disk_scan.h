// Reading a cache directory's entry files without their payloads (internal to kv_disk/, used
// by DiskCache's start-up scan and by InspectCacheDirectory): a file's header, text and
// ids, checked against the key its name says, turned into the index's record.
// Must not: lock, move or delete files (DiskCache decides what happens to damage).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kv_disk/disk_index.h"
#include "snapshot/cache_names.h"
#include "snapshot/snapshot_chunks.h"
#include "snapshot/snapshot_codec.h"
#include "util/sha1.h"

namespace flashkv {

// The scanned header of the entry file at `path` whose name says `key`: a file whose token
// ids do not hash to its name is damaged (renamed or rewritten outside the cache), and so
// is one not owned by `owner` when given (File::OpenRead).
Expected<ScannedSnapshot> ScanEntryFile(const std::string& path, const Sha1Digest& key,
                                        std::optional<uint32_t> owner = std::nullopt);

// The index record of a scanned file of `size` bytes; loadable when its identity is
// `identity`.
DiskRecord RecordOf(ScannedSnapshot scan, const Sha1Digest& key, const std::string& path,
                    uint64_t size, const std::optional<SnapshotIdentity>& identity);

}  // namespace flashkv
