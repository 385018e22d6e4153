#include "util/file_io_writer.h"

#include <algorithm>

namespace flashkv {

ChunkedFileWriter::ChunkedFileWriter(File& file, int depth, bool try_direct)
    : file_(file), depth_(size_t(std::max(depth, 1))) {
  if (try_direct) {
    auto d = File::OpenDirectWrite(file.path());
    if (d.ok()) direct_file_ = std::move(*d);
  }
  io_ = std::thread([this] { Loop(); });
}

ChunkedFileWriter::~ChunkedFileWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  io_.join();
}

bool ChunkedFileWriter::direct() const {
  std::lock_guard<std::mutex> lock(mu_);
  return direct_file_.is_open();
}

Status ChunkedFileWriter::Write(uint64_t offset, const void* src, size_t n) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return queue_.size() < depth_ || !error_.ok(); });
  if (!error_.ok()) return error_;
  queue_.push_back(Chunk{offset, static_cast<const uint8_t*>(src), n});
  cv_.notify_all();
  return Status::Ok();
}

Status ChunkedFileWriter::Finish() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return (queue_.empty() && !busy_) || !error_.ok(); });
  return error_;
}

void ChunkedFileWriter::Loop() {
  while (true) {
    Chunk c;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopped and drained
      c = queue_.front();
      queue_.pop_front();
      busy_ = true;
    }
    Status st = WriteOne(c);
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
      if (!st.ok() && error_.ok()) error_ = st;
      if (!error_.ok()) queue_.clear();  // nothing after an error is worth writing
    }
    cv_.notify_all();
  }
}

Status ChunkedFileWriter::WriteOne(const Chunk& c) {
  constexpr size_t kAlign = File::kDirectAlign;
  size_t direct_bytes = 0;
  // Only the I/O thread changes direct_file_ after construction, so it reads it unlocked;
  // direct() locks to see it from other threads.
  if (direct_file_.is_open() && c.offset % kAlign == 0 &&
      reinterpret_cast<uintptr_t>(c.src) % kAlign == 0) {
    direct_bytes = c.n / kAlign * kAlign;
  }
  if (direct_bytes > 0) {
    Status st = direct_file_.WriteAt(c.offset, c.src, direct_bytes);
    if (!st.ok()) {
      // Some filesystems accept O_DIRECT at open and refuse the write: from here on,
      // ordinary writes (which report their own error if the disk is the problem).
      std::lock_guard<std::mutex> lock(mu_);
      (void)direct_file_.Close();
      direct_bytes = 0;
    }
  }
  if (direct_bytes < c.n) {
    FLASHKV_RETURN_IF_ERROR(
        file_.WriteAt(c.offset + direct_bytes, c.src + direct_bytes, c.n - direct_bytes));
    file_.StartWriteback(c.offset + direct_bytes, c.n - direct_bytes);
  }
  return Status::Ok();
}

}  // namespace flashkv
