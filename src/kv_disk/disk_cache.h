// DiskCache: the disk tier (tier 3, kv/cache_tier.h) of the resume cascade — a directory
// of `<sha1>.kv` snapshot files bounded by a byte budget (its names: snapshot/cache_names.h).
// Owns the in-memory prefix index (token-id radix tree + rendered texts), value-based
// eviction, quarantine of damaged files, and the background writer thread. Must not: run
// the model or decide *when* to save (CachePolicy and the engine do).
//
// This class is the facade; the parts live beside it: kv_disk/disk_index.h (the index, byte
// accounting and eviction plan), kv_disk/disk_writer.h (the writer thread), kv_disk/disk_scan.h
// (reading entry files' headers), kv_disk/disk_cache_impl.h (the state they share).
//
// Start-up: takes an exclusive lock on `<dir>/.lock` (one flashkv per directory),
// removes stale temp files, reads every entry's header, tokens and text (never whole
// payloads) into the index, moves damaged entries to `<dir>/quarantine/` (or deletes them
// with quarantine off) and anything that is not a file under an entry's name (directory,
// link, FIFO) there too, and evicts down to the budget. A directory this process cannot
// write opens read-only: loads only. A directory deleted or replaced while in use is
// recreated and locked again at the next save, or the disk tier is disabled when another
// process holds it (kv_disk/cache_directory.h).
//
// Budget: every regular file in the directory counts — entries, in-flight temp files
// (reserved at admission), other models' entries, `quarantine/` and unrelated files.
// Eviction order: quarantined files first (oldest first), then entries by value
// (decayed hits + 1) × tokens ÷ bytes, lowest first (ties: least recently used first).
// Hits decay with a half-life (6 h by default). Entries being written are never evicted,
// and a new entry that would itself be the first to go is not admitted. Unrelated files
// are never deleted (if they alone fill the budget, nothing is admitted).
//
// Threading: every method is thread-safe (one internal mutex; file reads and writes run
// outside it). Load writes into the caller's KvState and Save reads it: the caller keeps
// other threads off that state for the duration of the call.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kv/cache_tier.h"
#include "kv/resume_point.h"
#include "snapshot/cache_names.h"
#include "snapshot/snapshot_chunks.h"
#include "snapshot/snapshot_codec.h"
#include "snapshot/snapshot_format.h"
#include "state/kv_state.h"
#include "util/status.h"

namespace flashkv {

struct DiskCacheOptions {
  std::string dir;                               // created (mode 0700) if missing
  uint64_t budget_bytes = uint64_t(4096) << 20;  // --kv-disk-space-mb
  bool quarantine = true;                        // false: delete damaged entries
  // The model + numerics of the states this process saves and loads. Entries of another
  // identity are listed and counted but never loaded. Unset (admin tools): Load and Save
  // fail with kFailedPrecondition.
  std::optional<SnapshotIdentity> identity;
  double hit_half_life_hours = 6.0;
  // Host copies waiting for the writer thread; Save blocks while more are queued.
  uint64_t max_pending_bytes = uint64_t(4) << 30;
  // Keep the host buffer of the last written snapshot (one snapshot's size of memory)
  // for the next save: copying into mapped pages costs a fraction of fresh memory, and
  // the copy is the part of a save that blocks decoding.
  bool reuse_host_buffer = true;
  SnapshotLoadOptions load;
  // The uid every file the cache reads must belong to (File::OpenRead); unset: the
  // process's effective uid. A file of another owner is damage: not loaded, quarantined,
  // logged and counted. Tests set another uid to check that without root.
  std::optional<uint32_t> owner_uid;
  // Tokens per content-addressed chunk of a save (format version 2, snapshot/snapshot_chunks.h):
  // a save writes only the chunks not already stored plus a manifest. 0, or a size that
  // is not a multiple of every compress ratio of the state's shape: manifests without chunks
  // (the whole state in one file; version 1 is read, never written).
  uint32_t chunk_tokens = kDefaultChunkTokens;
  // SSD stewardship. A rolling 24-hour write budget (--kv-disk-write-budget-gb-per-day;
  // 0: none): a save whose bytes would take the last 24 hours' writes (and the writes
  // queued) past it is skipped (kResourceExhausted, counted). And admission by worth: a
  // save that spares fewer than `min_tokens_per_mib` tokens of prefill (its tokens beyond
  // the longest stored entry it extends) per MiB it writes is skipped (0: off).
  uint64_t write_budget_bytes_per_day = 0;
  double min_tokens_per_mib = 0;
  // The clock of the write budget's window (tests); empty: the wall clock.
  std::function<int64_t()> clock_ms;
  // Told of every object file a save puts in place (manifest or chunk) and every one the
  // cache deletes or quarantines, on the thread that did it — the one place a mirror
  // (the remote tier) learns what the directory holds. Runs with no cache lock held.
  std::function<void(const struct DiskObjectEvent&)> on_object;
  // Chunking and O_DIRECT of the streamed write. O_DIRECT (default) keeps snapshots out
  // of the page cache, where they would push out the model's mapped pages; the price is
  // that a load soon after a save reads the disk instead of the cache.
  SnapshotWriteOptions write;
};

// An object of the cache directory written or removed (DiskCacheOptions::on_object).
struct DiskObjectEvent {
  enum class Kind { kManifest, kChunk };
  Kind kind = Kind::kManifest;
  bool removed = false;  // false: written (renamed into place, durable)
  std::string name;      // relative to the directory: "<key>.kv" or "chunks/<name>.kvc"
  std::string path;      // where it is (written) or was (removed)
  uint64_t bytes = 0;
};

// One snapshot file as the index knows it.
struct DiskCacheEntry {
  std::string key;  // 40 lowercase hex = SHA1 of the token ids
  std::string path;
  uint32_t n_tokens = 0;
  uint64_t file_bytes = 0;
  SaveReason reason = SaveReason::kUnknown;
  uint32_t hit_count = 0;
  int64_t created_ms = 0;
  int64_t last_used_ms = 0;
  bool loadable = false;  // same identity as this cache
  std::string numerics;
  std::string text;  // the rendered text of its tokens

  // (hits · 2^(−age / half_life) + 1) · n_tokens / file_bytes, age from last use.
  double Value(int64_t now_ms, double half_life_hours) const;
  // The same over `bytes` (a version-2 entry: its manifest plus its share of its chunks).
  double ValueFor(int64_t now_ms, double half_life_hours, double bytes) const;
  // Chunks its manifest names and their bytes, whole (file_bytes is the manifest's); 0 for a
  // manifest without chunks or a version-1 file.
  uint32_t chunks = 0;
  uint64_t chunk_bytes = 0;
};

using DiskLookup = ResumeLookup;

struct DiskHit : ResumeHit {
  DiskCacheEntry entry;       // as it was before this hit
  int failed_candidates = 0;  // longer candidates that failed to load (and were reported)
  uint64_t direct_bytes = 0;  // of `bytes`, read through O_DIRECT (SnapshotLoadOptions::direct)
  double prepare_ms = 0;      // of load_ms, before the first streamed read (LoadedSnapshot)
};

// A disk hit as the tier interface gives it (the entry's path as its origin); an error
// passes through.
Expected<TierHit> ToTierHit(Expected<DiskHit> hit);

struct DiskCacheStats {
  uint64_t budget_bytes = 0;
  uint64_t used_bytes = 0;       // every file, plus bytes reserved for queued writes
  uint64_t entries = 0;          // loadable entries in the index
  uint64_t foreign_entries = 0;  // other models' entries (counted, never loaded)
  uint64_t hits = 0, misses = 0, load_failures = 0;
  uint64_t saves = 0, save_failures = 0, save_skipped = 0;
  uint64_t evictions = 0, quarantined = 0;
  uint64_t pending_writes = 0;
  // Version 2: chunk files indexed and their bytes; chunks saves wrote and reused.
  uint64_t chunks = 0, chunk_bytes = 0;
  uint64_t chunks_written = 0, chunks_reused = 0;
  // Bytes this process put on disk (manifests, whole files, chunks), in all and by the
  // save reason (indexed by SaveReason's value).
  uint64_t bytes_written = 0;
  uint64_t bytes_written_by_reason[6] = {};
  // Saves skipped by the write budget / as not worth their writes (in save_skipped too),
  // and the bytes written in the budget's window (24 h, this process).
  uint64_t save_skipped_write_budget = 0, save_skipped_not_worth = 0;
  uint64_t bytes_written_24h = 0;
  // Sum over indexed entries of their whole state (manifest + every chunk it names):
  // what unchunked files of the same entries would occupy.
  uint64_t logical_bytes = 0;
};

// An entry just put in place by a save (the remote tier mirrors it): its key, token count
// and the files it is made of.
struct DiskStoredEntry {
  std::string key;
  uint32_t n_tokens = 0;
  std::vector<std::string> paths;
};

// One file of an entry fetched from elsewhere (kv_remote/remote_tier.h), already verified there.
struct DiskImportObject {
  std::string name;  // a file name in the cache directory
  std::string_view bytes;
};

class DiskCache : public CacheTier {
 public:
  static Expected<std::unique_ptr<DiskCache>> Open(const DiskCacheOptions& options);
  // Waits for queued writes (logging any failure) and releases the directory lock.
  ~DiskCache() override;
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  const DiskCacheOptions& options() const { return options_; }

  // Usable entries for `lookup`, longest (most tokens) first. No I/O.
  std::vector<DiskCacheEntry> Candidates(const DiskLookup& lookup) const;

  // Restores the longest usable entry into `state`. A candidate that fails to load is
  // reported, quarantined (damage) or skipped (another model), and the next is tried.
  // kNotFound when none loaded — `state` is then cleared if any load was attempted,
  // untouched otherwise. A hit bumps the entry's hit count and last-used time in place.
  Expected<DiskHit> Load(const DiskLookup& lookup, KvState& state);

  // Copies `state` + `content` now (the state may change as soon as this returns) while
  // the background thread already writes what is copied: temp file (payload first,
  // header last), fdatasync, rename, fsync directory.
  // Returns the key. Returns without writing (kOk) when an entry with these tokens
  // already exists and has the same extensions. kResourceExhausted when the entry does
  // not fit the budget or would be the first to be evicted.
  Expected<std::string> Save(const KvState& state, const SnapshotContent& content);

  // The tier interface (kv/cache_tier.h): Load with the entry's path as the origin, Save,
  // Remove of the whole key.
  CacheSource source() const override { return CacheSource::kDisk; }
  Expected<TierHit> Restore(const ResumeLookup& lookup, KvState& state) override;
  Expected<std::string> Offer(const KvState& state, const SnapshotContent& content) override {
    return Save(state, content);
  }
  Status Evict(std::string_view key) override { return Remove(key); }
  // True when an entry for exactly these token ids is indexed or being written.
  bool Contains(std::span<const int32_t> tokens) const;
  // Waits for every queued write; returns the first write error since the last Flush.
  Status Flush();
  // Makes a page-locked capture buffer of `bytes` ahead of the first save, on a background
  // thread, so that save does not stall decoding either (kv/pinned_standby.h). `backend`
  // (the states') must outlive the cache.
  void PrepareHostBuffer(Backend& backend, uint64_t bytes);

  // Marks an entry used (hit count + 1, last used = now) without touching its payload.
  Status Touch(std::string_view key);
  std::vector<DiskCacheEntry> List() const;  // longest first
  // The tool replay section (kSnapshotReplayTag) of every loadable entry that has one,
  // longest entry first; unreadable ones are skipped (a load would quarantine them). Read
  // at start so that tool calls made before a restart still replay.
  std::vector<std::string> ReplaySections() const;
  // Deletes an entry (a unique key prefix of at least 4 hex digits is enough).
  Status Remove(std::string_view key_prefix);
  // Evicts by the rule above until the directory holds at most `budget_bytes` (the
  // configured budget when unset), or nothing evictable is left. Returns how many files
  // were deleted.
  Expected<int> Collect(std::optional<uint64_t> budget_bytes = std::nullopt);
  DiskCacheStats stats() const;

  // Called on the writer thread after each save's files are renamed into place (not for
  // imports). Set once, before the first save.
  void SetStoredHook(std::function<void(const DiskStoredEntry&)> hook);
  // Keeps an entry fetched from another tier: its file and, for version 2, the chunks its
  // manifest names that are not here yet (chunks first, each verified; admission counts
  // only those) are written (temp, fdatasync, rename) under the budget as a save is, then
  // indexed as a scan would (damage is quarantined). kOk without writing when the entry is
  // here already; kResourceExhausted when it does not fit; kCorrupt for a damaged chunk or
  // an entry not loadable here; kInvalidArgument for a name that is neither this entry's
  // file nor a chunk file.
  Status Import(std::string_view key, uint32_t n_tokens, std::span<const DiskImportObject> objects);
  // Whether `file_name` is a chunk file ("<name>.kvc") this cache holds, of `bytes` bytes:
  // an import may then leave it out.
  bool HasChunk(std::string_view file_name, uint64_t bytes) const;

  class Impl;

 private:
  explicit DiskCache(std::unique_ptr<Impl> impl, DiskCacheOptions options);
  std::unique_ptr<Impl> impl_;
  DiskCacheOptions options_;
};

// A read-only look at a cache directory for tools (`flashkv kv ls`): every `.kv` file's
// header, text and ids, without the lock (a server may be running) and without moving
// anything. Damaged files are listed with their error.
struct CacheDirectoryView {
  std::vector<DiskCacheEntry> entries;  // longest first; `loadable` compares to `identity`
  std::vector<std::pair<std::string, Status>> damaged;  // path, why
  uint64_t total_bytes = 0;                             // every regular file, quarantine too
  uint64_t temp_files = 0;
  uint64_t quarantined_files = 0;
  uint64_t chunk_files = 0;  // chunks/<name>.kvc (version 2)
  uint64_t chunk_bytes = 0;
};
Expected<CacheDirectoryView> InspectCacheDirectory(
    const std::string& dir, const std::optional<SnapshotIdentity>& identity = std::nullopt);

}  // namespace flashkv
