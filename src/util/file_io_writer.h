// ChunkedFileWriter: writes chunks of a caller-owned buffer at their file offsets from
// one I/O thread, so the caller prepares the next chunk (checksums it, waits for it to be
// filled) while the disk writes this one. Where the filesystem allows it the chunks go
// through a second, O_DIRECT descriptor: the disk reads the caller's memory itself, with
// no copy into the page cache, and gigabytes written once do not push the model's mapped
// pages out of memory. Bytes that O_DIRECT cannot take (an unaligned address, offset or
// tail) and every byte on filesystems without it (tmpfs) go through `file` as ordinary
// writes, whose writeback is started at once. Must not: sync (the caller does, once, on
// `file`) or know about formats.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#include "util/file_io.h"
#include "util/status.h"

namespace flashkv {

class ChunkedFileWriter {
 public:
  // `file` is open for writing and outlives the writer. `depth`: chunks queued before
  // Write blocks. `try_direct`: reopen file.path() with O_DIRECT (false: ordinary writes).
  explicit ChunkedFileWriter(File& file, int depth = 2, bool try_direct = true);
  // Waits for the queued writes (their errors are lost: call Finish to see them).
  ~ChunkedFileWriter();
  ChunkedFileWriter(const ChunkedFileWriter&) = delete;
  ChunkedFileWriter& operator=(const ChunkedFileWriter&) = delete;

  // Queues n bytes at `src` for `offset`; `src` stays valid and unchanged until Finish.
  // Blocks while `depth` chunks are queued. Returns the first error of an earlier chunk.
  Status Write(uint64_t offset, const void* src, size_t n);
  // Waits until every queued chunk is written; the first error, if any.
  Status Finish();
  // Whether chunks go through O_DIRECT (false after a direct write failed: the rest are
  // ordinary writes).
  bool direct() const;

 private:
  struct Chunk {
    uint64_t offset;
    const uint8_t* src;
    size_t n;
  };
  void Loop();
  Status WriteOne(const Chunk& c);

  File& file_;
  File direct_file_;  // open when O_DIRECT is usable
  const size_t depth_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Chunk> queue_;
  bool busy_ = false;  // the I/O thread holds a chunk
  bool stop_ = false;
  Status error_;
  std::thread io_;
};

}  // namespace flashkv
