#include "kv_disk/disk_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "util/file_io.h"

namespace flashkv {
void CaptureProgress::Finish(Expected<PendingCapture> result) {
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    status = result.status();
    if (result.ok()) pending = std::move(*result);
  }
  cv.notify_all();
}

Status CaptureProgress::WaitReady(uint64_t end) {
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    if (!status.ok()) return status;
  }
  return pending.Wait(end);
}

DiskWriter::DiskWriter(std::string dir, SnapshotWriteOptions write, bool reuse_buffer,
                       uint64_t max_pending_bytes, Host& host)
    : dir_(std::move(dir)),
      write_(write),
      reuse_buffer_(reuse_buffer),
      max_pending_bytes_(max_pending_bytes),
      host_(host) {}

DiskWriter::~DiskWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DiskWriter::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void DiskWriter::Submit(DiskWriteJob job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (job.image) queued_bytes_ += job.image->size();
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
}

std::unique_ptr<SnapshotImage> DiskWriter::WaitForRoom(uint64_t bytes) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return queue_.empty() || queued_bytes_ + bytes <= max_pending_bytes_; });
  return std::move(spare_);
}

Status DiskWriter::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return queue_.empty() && !writing_; });
  Status st = first_error_;
  first_error_ = Status::Ok();
  return st;
}

void DiskWriter::Loop() {
  while (true) {
    DiskWriteJob job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      job = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
    }
    host_.RemoveVictims(job.victims);
    Status st;
    bool capture_failed = false;
    if (job.image) {
      DiskWriteResult result = WriteEntry(job);
      st = result.status;
      // The caller and the asynchronous copies may still be writing into the image (a
      // write that failed early): it is released only once they are done with it.
      CaptureProgress& c = *job.capture;
      (void)c.WaitReady(UINT64_MAX);
      capture_failed = !c.status.ok();
      // The outcome before the page-locking below, which may take a while: the entry is
      // indexed as soon as it is in place (after a write that succeeded, the wait above
      // returned at once: the write had waited for the whole capture).
      host_.Finished(job, std::move(result));
      // A buffer kept for the next save is page-locked here, off the decoding thread, so
      // the next capture's closed rows can move asynchronously.
      bool keep = false;
      if (reuse_buffer_) {
        std::lock_guard<std::mutex> lock(mu_);
        keep = !spare_ || spare_->capacity() < job.image->capacity();
      }
      if (keep && job.backend != nullptr) {
        Status pin = job.image->Pin(*job.backend);
        if (!pin.ok())
          spdlog::debug("kv cache: snapshot buffer not page-locked: {}", pin.message());
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (job.image) {
        queued_bytes_ -= job.image->size();
        if (reuse_buffer_ && (!spare_ || spare_->capacity() < job.image->capacity())) {
          spare_ = std::move(job.image);
        }
        // A failed capture was returned by Save itself; Flush reports write errors.
        if (!st.ok() && first_error_.ok() && !capture_failed) first_error_ = st;
      }
      writing_ = false;
    }
    cv_.notify_all();
  }
}

namespace {

// The record the index keeps of an entry whose file `h` describes (the image's own header
// when it is written without chunks, else its manifest's), as a scan of that file would make it.
DiskRecord StoredRecord(const DiskWriteJob& job, const SnapshotHeader& h, uint64_t file_bytes,
                        std::vector<SnapshotChunkRef> chunks) {
  const SnapshotImage& img = *job.image;
  DiskRecord r;
  r.entry.key = job.key;
  r.entry.path = job.path;
  r.entry.n_tokens = h.n_tokens;
  r.entry.file_bytes = file_bytes;
  r.entry.reason = h.reason;
  r.entry.created_ms = h.created_ms;
  r.entry.last_used_ms = h.last_used_ms;
  r.entry.numerics = h.identity.numerics;
  r.entry.loadable = true;
  r.entry.text = std::string(img.text());
  r.entry.chunks = uint32_t(chunks.size());
  for (const SnapshotChunkRef& c : chunks) r.entry.chunk_bytes += c.file_bytes;
  r.tokens.assign(img.tokens().begin(), img.tokens().end());
  r.extensions = SignatureOf(h);
  r.chunks = std::move(chunks);
  return r;
}

}  // namespace

DiskWriteResult DiskWriter::WriteEntry(DiskWriteJob& job) {
  SnapshotImage& img = *job.image;
  const auto t0 = std::chrono::steady_clock::now();
  // "<key>.kv.tmp.<pid>.<n>" (snapshot/cache_names.h); a scan removes stale ones.
  const std::string tmp = TempPathFor(job.path, fmt::format("{}.{}", ::getpid(), ++temp_seq_));
  DiskWriteResult out;
  out.status = [&]() -> Status {
    // Saves queue: the directory may have gone since this one was admitted.
    FLASHKV_RETURN_IF_ERROR(host_.CheckDirectory());
    if (job.chunk_tokens > 0) return WriteChunked(job, tmp, &out);
    CaptureProgress& c = *job.capture;
    // One sync for the whole file: writeback of every chunk was started as it was
    // written, so the sync mostly waits for the last ones.
    FLASHKV_RETURN_IF_ERROR(WriteFileDurably(
        tmp, job.path,
        [&](File& f) {
          return StreamSnapshotImage(
              img, f, [&c](uint64_t end) { return c.WaitReady(end); }, write_);
        },
        [&] { SetAsideDirectory(job.path); }));
    out.written_bytes = img.size();
    out.stored = StoredRecord(job, img.header(), img.size(), {});
    return Status::Ok();
  }();
  if (!out.status.ok()) {
    spdlog::warn("kv cache: write failed, entry not stored: {}", out.status.ToString());
    return out;
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info(
      "kv cache stored tokens={} reason={} size={:.1f} MiB written={:.1f} MiB write={:.1f} ms "
      "({:.0f} MiB/s) file={}",
      img.header().n_tokens, SaveReasonName(img.header().reason), CacheMib(img.size()),
      CacheMib(out.written_bytes), ms, CacheMib(out.written_bytes) / std::max(ms / 1000.0, 1e-9),
      job.path);
  return out;
}

void DiskWriter::SetAsideDirectory(const std::string& path) {
  // rename replaces a link or FIFO there, but fails on a directory that appeared since.
  struct stat there;
  if (::lstat(path.c_str(), &there) == 0 && S_ISDIR(there.st_mode)) host_.SetAside(path);
}

Status DiskWriter::WriteChunked(DiskWriteJob& job, const std::string& tmp, DiskWriteResult* out) {
  SnapshotImage& img = *job.image;
  const std::string chunk_dir = ChunkDirOf(dir_);  // made by the first chunk written
  uint64_t chunk_bytes = 0;
  out->chunked = true;
  Status st = [&]() -> Status {
    ChunkSink sink;
    sink.chunk_dir = chunk_dir;
    sink.tmp_tag = fmt::format("{}.{}", ::getpid(), temp_seq_);
    sink.direct = write_.direct;
    // The chunk files stream behind the capture, layer by layer, as unchunked files do
    // (or are written whole after it: SnapshotWriteOptions::stream_chunks).
    CaptureProgress& capture = *job.capture;
    if (write_.stream_chunks) {
      sink.ready = [&capture](uint64_t end) { return capture.WaitReady(end); };
    } else {
      FLASHKV_RETURN_IF_ERROR(capture.WaitReady(UINT64_MAX));
    }
    sink.existing = [&](const Sha1Digest& name) {
      std::optional<SnapshotChunkRef> ref = host_.UseChunk(name);
      if (ref) out->pinned_chunks.push_back(name);
      return ref;
    };
    sink.written = [&](const SnapshotChunkRef& ref) {
      host_.ChunkWritten(ref);
      out->pinned_chunks.push_back(ref.name);
      chunk_bytes += ref.file_bytes;
    };
    // One call into the format: every chunk is durable (fdatasync, rename, one fsync of
    // chunks/) before the manifest that names it exists, so a crash leaves at worst
    // unreferenced chunks; the manifest comes back to be written here.
    FLASHKV_ASSIGN_OR_RETURN(ChunkedSnapshot saved,
                             WriteChunkedSnapshot(img, job.chunk_tokens, sink));
    SnapshotImage& manifest = saved.manifest;
    // As an unchunked file: chunked O_DIRECT writes, the header's chunk last.
    FLASHKV_RETURN_IF_ERROR(WriteFileDurably(
        tmp, job.path, [&](File& f) { return StreamSnapshotImage(manifest, f, {}, write_); },
        [&] { SetAsideDirectory(job.path); }));
    out->written_bytes = chunk_bytes + manifest.size();
    out->stored = StoredRecord(job, manifest.header(), manifest.size(), std::move(saved.chunks));
    return Status::Ok();
  }();
  // Failed: the chunks it wrote are on disk (orphans once their pins are released).
  if (!st.ok()) out->written_bytes = chunk_bytes;
  return st;
}

}  // namespace flashkv
