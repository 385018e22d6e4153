// DiskIndex (internal to kv_disk/, used by DiskCache): what the disk tier knows about its
// directory without reading it — one record per entry file (its DiskCacheEntry, token ids
// and extension signature), the prefix indexes over the loadable ones, the quarantined
// files, and the byte accounting the budget is checked against; and the eviction plan
// (docs/SERVER.md §3, kv_disk/disk_cache.h "Budget"). Must not: do I/O (the cache deletes
// what a plan names) or lock (DiskCache's mutex guards it).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "kv/prefix_index.h"
#include "kv/resume_point.h"
#include "kv_disk/disk_cache.h"
#include "snapshot/snapshot_codec.h"

namespace flashkv {

// Wall-clock milliseconds (entry times) and MiB (log lines) of the disk tier's files.
inline int64_t CacheNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
inline double CacheMib(uint64_t bytes) {
  return double(bytes) / (1024.0 * 1024.0);
}

// (tag, bytes, crc) of each extension section: two entries with equal signatures carry
// the same extension bytes (the tail and replay map included).
using ExtSignature = std::vector<std::tuple<uint32_t, uint64_t, uint32_t>>;
ExtSignature SignatureOf(const SnapshotHeader& header);
ExtSignature SignatureOf(std::span<const SnapshotExtension> extensions);

struct DiskRecord {
  DiskCacheEntry entry;
  std::vector<int32_t> tokens;
  ExtSignature extensions;
  std::vector<SnapshotChunkRef> chunks;  // version 2: the chunks its manifest names
};

// A chunk file (chunks/<name>.kvc) as the index knows it: referenced by `refs` indexed
// manifests and pinned by `pins` saves in flight (which reference it before their
// manifest is indexed). Unreferenced and unpinned, it is an orphan: deleted.
struct DiskChunk {
  std::string path;
  uint64_t bytes = 0;
  uint32_t payload_crc32c = 0;
  uint32_t refs = 0;
  uint32_t pins = 0;
};

// A file an eviction plan deletes.
struct DiskVictim {
  std::string path;
  uint64_t bytes = 0;
  std::string what;  // for the log line
};

class DiskIndex {
 public:
  explicit DiskIndex(double hit_half_life_hours) : half_life_hours_(hit_half_life_hours) {}

  // Adds (or replaces) the record of r.entry.key; loadable ones join the prefix indexes.
  // Its chunks gain a reference each (they must be known: AddChunk).
  void Add(DiskRecord r);

  // ---- chunks (format version 2) ----------------------------------------------------
  // A chunk file on disk, with no references yet (a scan, or a save that wrote it).
  void AddChunk(const std::string& hex, const std::string& path, const SnapshotChunkRef& ref);
  const DiskChunk* FindChunk(const std::string& hex) const;
  // A save in flight references the chunk (false: not known); Unpin when its manifest is
  // indexed or its write failed.
  bool PinChunk(const std::string& hex);
  void UnpinChunk(const std::string& hex);
  // Takes a (damaged) chunk out of the index: manifests that still name it fail to load.
  void DropChunk(const std::string& hex);
  // Unreferenced, unpinned chunks leave the index as victims (their bytes doomed) — none
  // while KeepUnreferencedChunks is set (a manifest this build cannot read may name them).
  std::vector<DiskVictim> TakeOrphans();
  void KeepUnreferencedChunks() { keep_unreferenced_ = true; }
  // The bytes a record's state occupies, each chunk charged to its manifests in equal
  // shares: what eviction by value weighs (a chunk's bytes count once in all).
  double ChargedBytes(const DiskRecord& r) const;
  // Manifest + every chunk it names, whole: the entry's logical size.
  uint64_t LogicalBytes(const DiskRecord& r) const;
  uint64_t chunk_bytes() const { return chunk_bytes_; }
  size_t chunk_count() const { return chunks_.size(); }
  // Removes an entry from the index (not from disk).
  void Drop(const std::string& key);
  // Forgets every entry, quarantined and unrelated file (the directory was replaced);
  // returns how many entries went.
  size_t Clear();
  DiskRecord* Find(const std::string& key);
  const DiskRecord* Find(const std::string& key) const;
  const std::map<std::string, DiskRecord>& records() const { return records_; }

  void AddQuarantined(const std::string& path, uint64_t bytes);
  void AddOtherBytes(uint64_t bytes) { other_bytes_ += bytes; }
  void RemoveOtherBytes(uint64_t bytes) { other_bytes_ -= std::min(other_bytes_, bytes); }
  // Bytes of admitted entries not yet renamed into place.
  void Reserve(uint64_t bytes) { reserved_bytes_ += bytes; }
  void Unreserve(uint64_t bytes) { reserved_bytes_ -= bytes; }
  // Every byte the budget counts: entries, unrelated files, quarantine, reservations,
  // and victims out of the index but not yet deleted.
  uint64_t used() const {
    return entry_bytes_ + chunk_bytes_ + other_bytes_ + quarantine_bytes_ + reserved_bytes_ +
           doomed_bytes_;
  }

  // Chooses what to delete so that `need` more bytes fit `budget`: quarantined files
  // first (oldest first), then entries by value, lowest first. With a new entry of value
  // `new_value` (> 0), only entries worth no more than it may go (a tie evicts the
  // older); otherwise the new entry would be the first to go (kResourceExhausted).
  // Evicting an entry frees its manifest and the chunks no other manifest references
  // (those are victims too). Victims leave the index at once (their bytes count as
  // doomed until Settle).
  Status Plan(uint64_t need, double new_value, uint64_t budget, int64_t now_ms,
              std::vector<DiskVictim>* out);
  // Takes one entry out of the index as a victim (`what` names why), its bytes doomed.
  DiskVictim Evict(const std::string& key, std::string what);
  // The victims are gone from disk (or failed to go: then they are no longer tracked).
  void Settle(const std::vector<DiskVictim>& victims);

  // The loadable entries `lookup` continues within its length bounds, in the resume
  // order (kv/resume_point.h).
  struct Candidate {
    const DiskRecord* record;
    bool by_text;
  };
  std::vector<Candidate> Candidates(const ResumeLookup& lookup) const;
  // Every entry, longest first (ties: by key).
  std::vector<DiskCacheEntry> List() const;
  // Loadable and other-identity entries.
  void Count(uint64_t* loadable, uint64_t* foreign) const;

 private:
  struct LooseFile {  // a quarantined file
    std::string path;
    uint64_t bytes;
    int64_t order;  // insertion order = age
  };

  const double half_life_hours_;
  std::map<std::string, DiskRecord> records_;
  TokenPrefixIndex tokens_;
  TextPrefixIndex texts_;
  std::vector<LooseFile> quarantine_;
  int64_t order_ = 0;
  std::map<std::string, DiskChunk> chunks_;  // by 40-hex name
  uint64_t chunk_bytes_ = 0;
  bool keep_unreferenced_ = false;
  uint64_t entry_bytes_ = 0;  // every indexed entry (any identity)
  uint64_t other_bytes_ = 0;  // unrelated files and unreadable-version entries
  uint64_t quarantine_bytes_ = 0;
  uint64_t reserved_bytes_ = 0;
  uint64_t doomed_bytes_ = 0;
};

}  // namespace flashkv
