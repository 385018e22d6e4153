// DiskCache's internals (kv_disk/disk_cache.h), shared by disk_cache.cpp (opening, scanning,
// quarantine, eviction, maintenance, the facade) and disk_cache_io.cpp (the request path:
// Load and Save): the directory, the index (kv_disk/disk_index.h) and the writer thread
// (kv_disk/disk_writer.h) under one mutex. Must not: be included outside kv_disk/.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kv/pinned_standby.h"
#include "kv_disk/cache_directory.h"
#include "kv_disk/disk_cache.h"
#include "kv_disk/disk_index.h"
#include "kv_disk/disk_write_window.h"
#include "kv_disk/disk_writer.h"

namespace flashkv {

// The cache is its writer's host (kv_disk/disk_writer.h): the writer thread asks it and
// hands it each job's result.
class DiskCache::Impl final : private DiskWriter::Host {
 public:
  explicit Impl(DiskCacheOptions o);
  Status Open();

  // A save checks the directory first: deleted or replaced, the index of the old one is
  // dropped and the new one scanned (CacheDirectory relocks it or gives it up).
  Status CheckDirectory() override;

  // ---- scan ------------------------------------------------------------------------
  Status Scan();
  void ScanEntry(const std::string& path, const Sha1Digest& key, uint64_t size);
  void QuarantineLocked(const std::string& path, uint64_t size, const Status& why);

  void ScanChunks();
  // Start-up mark-and-sweep: after every manifest is indexed, chunks none names go.
  void SweepChunks();
  // Moves a damaged chunk to quarantine/ (its manifests then fail to load, one by one).
  void QuarantineChunkLocked(const std::string& hex, const Status& why);
  // Verifies the chunks of a version-2 entry whose load failed as damage, and quarantines
  // those that are bad (reads them: called without mu_).
  void CheckChunksOf(const DiskCacheEntry& entry);

  // ---- objects (the one place they are reported: DiskCacheOptions::on_object) --------
  void NoteWritten(const std::string& path, uint64_t bytes) const;
  void NoteRemoved(const std::string& path, uint64_t bytes) const;

  // ---- eviction --------------------------------------------------------------------
  // Deletes planned victims; unlink is cheap, so callers may hold mu_. Returns how many
  // went.
  // Chunk victims are handed to the writer thread (the one that writes chunks).
  int DeleteVictims(const std::vector<DiskVictim>& victims);
  // Unlinks victims, chunk victims only when `chunks` (the writer thread, without mu_)
  // and only those not written again since they were doomed. Returns the entries and
  // quarantined files deleted.
  int Unlink(const std::vector<DiskVictim>& victims, bool chunks);
  void SettleLocked(const std::vector<DiskVictim>& victims, int deleted);
  // What the writer thread asks of the cache, and the results it hands back
  // (DiskWriter::Host; CheckDirectory above is its directory check).
  void RemoveVictims(const std::vector<DiskVictim>& victims) override;
  void SetAside(const std::string& path) override;
  std::optional<SnapshotChunkRef> UseChunk(const Sha1Digest& name) override;
  void ChunkWritten(const SnapshotChunkRef& ref) override;
  void Finished(const DiskWriteJob& job, DiskWriteResult result) override;

  // ---- lookup and load ---------------------------------------------------------------
  Expected<DiskHit> Load(const DiskLookup& lookup_in, KvState& state);
  void HandleLoadFailure(const DiskCacheEntry& entry, const Status& st);

  // ---- save ------------------------------------------------------------------------
  Expected<std::string> Save(const KvState& state, const SnapshotContent& content);
  PinnedStandby& Standby(Backend& backend);
  void PrepareHostBuffer(Backend& backend, uint64_t bytes);
  Status Flush();

  // The write budget's clock and window (mu_ held): bytes written in the last 24 h.
  int64_t BudgetNowMs() const;
  uint64_t WrittenInWindowLocked(int64_t now_ms);
  // Charges `bytes` written now to the window (mu_ held); returns what PersistWindow
  // stores, then, without mu_ (the window file survives restarts: disk_write_window.h).
  struct WindowImage {
    std::string bytes;
    uint64_t generation = 0;
  };
  WindowImage ChargeWritesLocked(uint64_t bytes);
  void PersistWindow(const WindowImage& image);
  // Reads the window file at Open (a damaged one is logged and ignored).
  void LoadWindow();
  // Why a save of `n_tokens` writing `bytes` is not admitted by the SSD rules, or Ok.
  Status CheckWriteRulesLocked(std::span<const int32_t> tokens, uint64_t bytes);

  // ---- maintenance -----------------------------------------------------------------
  Status Touch(std::string_view key);
  std::vector<DiskCacheEntry> List() const;
  Status Remove(std::string_view prefix);
  Expected<int> Collect(std::optional<uint64_t> budget);
  DiskCacheStats stats() const;
  void SetStoredHook(std::function<void(const DiskStoredEntry&)> hook);
  Status Import(std::string_view key, uint32_t n_tokens, std::span<const DiskImportObject> objects);
  bool HasChunk(std::string_view file_name, uint64_t bytes) const;
  bool Contains(std::span<const int32_t> tokens) const;
  std::vector<DiskCacheEntry> Candidates(const DiskLookup& lookup) const;

 private:
  const DiskCacheOptions opt_;
  CacheDirectory dir_;
  mutable std::mutex mu_;  // guards index_, pending_keys_, stats_
  DiskIndex index_;
  std::set<std::string> pending_keys_;  // admitted, not yet written (or failed)
  DiskWriteWindow window_;              // bytes written, last 24 h
  uint64_t window_generation_ = 0;      // of window_'s last change
  uint64_t window_file_bytes_ = 0;      // the window file, in the index's bytes
  uint64_t queued_write_bytes_ = 0;     // admitted, not finished
  DiskCacheStats stats_;
  std::mutex hook_mu_;
  std::function<void(const DiskStoredEntry&)> stored_hook_;
  std::mutex window_file_mu_;   // one window file write at a time
  uint64_t window_stored_ = 0;  // generation last stored (window_file_mu_)
  bool window_store_logged_ = false;
  std::mutex standby_mu_;
  std::unique_ptr<PinnedStandby> standby_;  // made with the first state's backend
  // Last: its thread calls back into everything above, so it stops first.
  DiskWriter writer_;
};

}  // namespace flashkv
