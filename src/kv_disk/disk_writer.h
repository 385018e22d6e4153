// DiskWriter (internal to kv_disk/, used by DiskCache): the background thread that puts
// snapshots on disk. A job is an image still being captured by the caller plus the
// eviction victims its admission chose: the victims are deleted, then the image is
// streamed into a temp file behind the capture (each chunk as soon as it is final),
// fdatasync'ed and renamed into place. The buffer of the last written image is kept for
// the next capture (copying into mapped pages is the cheap part of a save). Must not:
// decide what to save or evict, or touch the index: a job's outcome is one DiskWriteResult
// handed to its Host once (Host::Finished); the Host is asked only what a job cannot wait
// for its end to know (victims gone, the directory still there, which chunks are stored).
//
// Threading: Submit, WaitForRoom, Flush are thread-safe. The Host's methods run on the
// writer thread with no lock of the writer held, so they may take the cache's lock (and
// the cache may call Submit under it).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
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
  uint64_t reserved = 0;  // bytes its admission reserved against the budget

  // A job without an image: deletes the victims off the caller's thread.
  static DiskWriteJob DeleteOnly(std::vector<DiskVictim> victims) {
    DiskWriteJob job;
    job.victims = std::move(victims);
    return job;
  }
};

// What one image job came to.
struct DiskWriteResult {
  Status status;               // of the write
  uint64_t written_bytes = 0;  // bytes it put on disk (its chunks also when the entry failed)
  // The entry in place (its manifest's record for version 2): index it. Empty on error.
  std::optional<DiskRecord> stored;
  // Version 2, once its chunks were asked for (the directory check passed): the chunks
  // pinned for the job (stored ones it uses, ones it wrote), to release once `stored` is
  // indexed (its references then hold them) or the job failed.
  bool chunked = false;
  std::vector<Sha1Digest> pinned_chunks;
};

class DiskWriter {
 public:
  // The cache's side of the writer.
  class Host {
   public:
    virtual ~Host() = default;
    // Before a job: deletes its victims and settles their accounting.
    virtual void RemoveVictims(const std::vector<DiskVictim>& victims) = 0;
    // Before each write: the directory may have gone since the job was admitted.
    virtual Status CheckDirectory() = 0;
    // Moves what is not a file out of the way of a rename (kv_disk/cache_directory.h).
    virtual void SetAside(const std::string& path) = 0;
    // Version 2, while the chunks are written (the index must know them from the moment
    // they exist): the stored chunk of that name, pinned for this job (nullopt: none);
    // and a chunk file just renamed into place, to index pinned for this job.
    virtual std::optional<SnapshotChunkRef> UseChunk(const Sha1Digest& name) = 0;
    virtual void ChunkWritten(const SnapshotChunkRef& ref) = 0;
    // An image job is done; runs before Flush can return.
    virtual void Finished(const DiskWriteJob& job, DiskWriteResult result) = 0;
  };

  // `host` outlives the writer.
  DiskWriter(std::string dir, SnapshotWriteOptions write, bool reuse_buffer,
             uint64_t max_pending_bytes, Host& host);
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
  DiskWriteResult WriteEntry(DiskWriteJob& job);
  // Version 2: chunks (those not stored yet), then the manifest naming them.
  Status WriteChunked(DiskWriteJob& job, const std::string& tmp, DiskWriteResult* out);
  // Before a rename over `path`: a directory there is moved aside (Host::SetAside).
  void SetAsideDirectory(const std::string& path);

  const std::string dir_;
  const SnapshotWriteOptions write_;
  const bool reuse_buffer_;
  const uint64_t max_pending_bytes_;
  Host& host_;
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
