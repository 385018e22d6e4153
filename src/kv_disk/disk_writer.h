// DiskWriter (internal to kv_disk/, used by DiskCache): the background thread that puts
// snapshots on disk. A job is an image still being captured by the caller plus the
// eviction victims its admission chose: the victims are deleted, then the image is
// streamed into a temp file behind the capture (each chunk as soon as it is final),
// fdatasync'ed and renamed into place. The buffer of the last written image is kept for
// the next capture (copying into mapped pages is the cheap part of a save). Must not:
// decide what to save or evict, or touch the index (it reports through its Host).
//
// Threading: Submit, WaitForRoom, Flush are thread-safe. The Host's callbacks run on the
// writer thread with no lock of the writer held, so they may take the cache's lock (and
// the cache may call Submit under it).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kv_disk/disk_index.h"
#include "snapshot/cache_names.h"
#include "snapshot/snapshot_codec.h"

namespace flashkv {

// How far the caller's copy of a queued image has got: the writer streams behind it.
struct CaptureProgress {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;       // the caller no longer touches the image
  Status status;           // the capture's error, once done
  PendingCapture pending;  // once done: the copies still landing in the image

  // Marks the caller's part done with `result` (of CaptureSnapshotLayersAsync).
  void Finish(Expected<PendingCapture> result);
  // Bytes [0, end) of the image are final (blocks until then).
  Status WaitReady(uint64_t end);
};

struct DiskWriteJob {
  std::unique_ptr<SnapshotImage> image;  // null: a job that only deletes its victims
  std::string key;                       // 40 hex
  std::string path;                      // the entry's final file
  std::vector<DiskVictim> victims;
  std::shared_ptr<CaptureProgress> capture;  // set with image
  Backend* backend = nullptr;                // the state's: page-locks a kept buffer
  // > 0: written as chunks + a version-2 manifest (the image is the whole state).
  uint32_t chunk_tokens = 0;
  uint64_t reserved = 0;       // bytes its admission reserved against the budget
  uint64_t written_bytes = 0;  // set by the writer: bytes it put on disk

  // A job without an image: deletes the victims off the caller's thread.
  static DiskWriteJob DeleteOnly(std::vector<DiskVictim> victims) {
    DiskWriteJob job;
    job.victims = std::move(victims);
    return job;
  }
};

class DiskWriter {
 public:
  struct Host {
    // Deletes the victims and settles their accounting.
    std::function<void(const std::vector<DiskVictim>&)> remove;
    // Before each write: the directory may have gone since the job was admitted.
    std::function<Status()> check_directory;
    // Moves what is not a file out of the way of a rename (kv_disk/cache_directory.h).
    std::function<void(const std::string& path)> set_aside;
    // The entry is in place: index it.
    std::function<void(DiskRecord)> stored;
    // Version 2: the stored chunk of that name, pinned for this job (nullopt: none).
    std::function<std::optional<SnapshotChunkRef>(const Sha1Digest&)> use_chunk;
    // A chunk file is in place (renamed): index it, pinned for this job.
    std::function<void(const SnapshotChunkRef&)> chunk_written;
    // The job no longer needs the chunks it pinned (its manifest is indexed, or failed).
    std::function<void(const std::vector<Sha1Digest>&)> release_chunks;
    // The job is done (`status` of its write); runs before Flush can return.
    std::function<void(const DiskWriteJob&, const Status&)> finished;
  };

  DiskWriter(std::string dir, SnapshotWriteOptions write, bool reuse_buffer,
             uint64_t max_pending_bytes, Host host);
  // Writes what is queued, then stops the thread.
  ~DiskWriter();
  DiskWriter(const DiskWriter&) = delete;
  DiskWriter& operator=(const DiskWriter&) = delete;

  void Start();
  // Queues a job (an image job must then have its capture Finish()ed by the caller).
  void Submit(DiskWriteJob job);
  // Blocks until an image of `bytes` may be queued (the queue holds at most
  // max_pending_bytes, or one image); returns the kept buffer of the last write, if any.
  std::unique_ptr<SnapshotImage> WaitForRoom(uint64_t bytes);
  // Waits for every queued job; returns the first write error since the last Flush.
  Status Flush();

 private:
  void Loop();
  Status WriteEntry(DiskWriteJob& job);
  // Version 2: chunks (those not stored yet), then the manifest naming them.
  Status WriteChunked(DiskWriteJob& job, const std::string& tmp);

  const std::string dir_;
  const SnapshotWriteOptions write_;
  const bool reuse_buffer_;
  const uint64_t max_pending_bytes_;
  const Host host_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<DiskWriteJob> queue_;
  uint64_t queued_bytes_ = 0;
  bool writing_ = false;
  bool stop_ = false;
  Status first_error_;
  uint64_t temp_seq_ = 0;
  std::unique_ptr<SnapshotImage> spare_;  // the last written image's buffer, for reuse
  std::thread thread_;
};

}  // namespace flashkv
