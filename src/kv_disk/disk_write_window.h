// The disk tier's write budget window (--kv-disk-write-budget-gb-per-day): the bytes
// written in the last 24 hours, in one-minute buckets, kept in a small file of the cache
// directory so that a restart does not hand the SSD a fresh day's budget. Writes within a
// minute share a bucket, which leaves the window a day after its last write.
//
// File `.write-window` (docs/KV_FORMAT.md "SSD stewardship"): magic "FLKVWWIN", u32
// version 1, u32 bucket count n, n × (i64 the bucket's last write, ms since the epoch;
// u64 bytes) in time order, u32 CRC-32C of everything before it. Written through a temp file,
// fdatasync and a durable rename; a damaged, short or unknown file is ignored with a log line (the
// window then starts empty, as it did before this file existed).
//
// Must not: decide admission (DiskCache does) or lock anything (the cache's mutex guards
// an instance; Store is safe to call without it).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include "snapshot/cache_names.h"
#include "util/status.h"

namespace flashkv {

class DiskWriteWindow {
 public:
  static constexpr int64_t kWindowMs = int64_t(24) * 3600 * 1000;
  static constexpr int64_t kBucketMs = int64_t(60) * 1000;

  // Adds `bytes` written at now_ms; buckets that left the window are dropped.
  void Add(int64_t now_ms, uint64_t bytes);
  // Bytes written in the last 24 h (a bucket counts until its last write has left).
  uint64_t InWindow(int64_t now_ms) const;
  size_t buckets() const { return buckets_.size(); }

  // The file's bytes for the window as it is.
  std::string Encode() const;
  // Replaces the window by the file's (buckets older than 24 h before now_ms dropped,
  // buckets in the future — a clock set back — moved to now_ms). kCorrupt / kUnsupported
  // when the bytes are not a window file; the window is then left empty.
  Status Decode(std::string_view bytes, int64_t now_ms);

  // Reads `dir`'s window file into `window` (a missing file: empty, Ok; a damaged one:
  // empty and the reason, for the caller to log).
  static Status LoadFile(const std::string& dir, int64_t now_ms, DiskWriteWindow* window);
  // Writes `encoded` as `dir`'s window file durably (temp, fdatasync, rename, dir fsync).
  static Status StoreFile(const std::string& dir, std::string_view encoded);

 private:
  struct Bucket {
    int64_t first_ms = 0;
    int64_t last_ms = 0;
    uint64_t bytes = 0;
  };
  std::deque<Bucket> buckets_;  // in time order
};

}  // namespace flashkv
