#include "kv_disk/disk_write_window.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "util/crc32c.h"
#include "util/file_io.h"

namespace flashkv {
namespace {

constexpr char kMagic[8] = {'F', 'L', 'K', 'V', 'W', 'W', 'I', 'N'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHead = 16;         // magic, version, count
constexpr size_t kBucketBytes = 16;  // i64 start, u64 bytes
// A day of one-minute buckets, and then some: a larger count is damage.
constexpr uint32_t kMaxBuckets = 2 * 1440;

template <typename T>
void PutLe(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // little-endian hosts only, as every flashkv format
  out.append(b, sizeof(T));
}

template <typename T>
T GetLe(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

void DiskWriteWindow::Add(int64_t now_ms, uint64_t bytes) {
  while (!buckets_.empty() && buckets_.front().last_ms <= now_ms - kWindowMs) {
    buckets_.pop_front();
  }
  if (bytes == 0) return;
  // Writes within a minute of a bucket's first share it and leave the window with its
  // last: a bucket never leaves early (the budget is never under-counted).
  if (!buckets_.empty() && now_ms < buckets_.back().first_ms + kBucketMs) {
    Bucket& b = buckets_.back();
    b.last_ms = std::max(b.last_ms, now_ms);
    b.bytes += bytes;
    return;
  }
  buckets_.push_back({now_ms, now_ms, bytes});
}

uint64_t DiskWriteWindow::InWindow(int64_t now_ms) const {
  uint64_t sum = 0;
  for (const Bucket& b : buckets_) {
    if (b.last_ms > now_ms - kWindowMs) sum += b.bytes;
  }
  return sum;
}

std::string DiskWriteWindow::Encode() const {
  std::string out(kMagic, sizeof(kMagic));
  PutLe<uint32_t>(out, kVersion);
  PutLe<uint32_t>(out, uint32_t(buckets_.size()));
  for (const Bucket& b : buckets_) {
    PutLe<int64_t>(out, b.last_ms);
    PutLe<uint64_t>(out, b.bytes);
  }
  PutLe<uint32_t>(out, Crc32c(out));
  return out;
}

Status DiskWriteWindow::Decode(std::string_view bytes, int64_t now_ms) {
  buckets_.clear();
  if (bytes.size() < kHead + 4 || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return Corrupt("not a write-window file ({} bytes)", bytes.size());
  }
  const uint32_t version = GetLe<uint32_t>(bytes.data() + 8);
  if (version != kVersion) return Unsupported("write-window version {}", version);
  const uint32_t n = GetLe<uint32_t>(bytes.data() + 12);
  if (n > kMaxBuckets || bytes.size() != kHead + size_t(n) * kBucketBytes + 4) {
    return Corrupt("write-window file of {} bytes does not hold {} buckets", bytes.size(), n);
  }
  const size_t body = bytes.size() - 4;
  if (GetLe<uint32_t>(bytes.data() + body) != Crc32c(0, bytes.data(), body)) {
    return Corrupt("write-window checksum mismatch");
  }
  int64_t prev = INT64_MIN;
  for (uint32_t i = 0; i < n; ++i) {
    const char* p = bytes.data() + kHead + size_t(i) * kBucketBytes;
    int64_t last = GetLe<int64_t>(p);
    const uint64_t b = GetLe<uint64_t>(p + 8);
    if (last < prev) {
      buckets_.clear();
      return Corrupt("write-window buckets out of order");
    }
    prev = last;
    // Written "in the future" (the clock went back since): charged now, so it still
    // counts for a whole day rather than vanishing or lingering.
    last = std::min(last, now_ms);
    if (last <= now_ms - kWindowMs) continue;
    if (!buckets_.empty() && buckets_.back().last_ms >= last) {
      buckets_.back().bytes += b;
    } else {
      buckets_.push_back({last, last, b});
    }
  }
  return Status::Ok();
}

Status DiskWriteWindow::LoadFile(const std::string& dir, int64_t now_ms, DiskWriteWindow* window) {
  window->buckets_.clear();
  const std::string path = JoinPath(dir, std::string(kWriteWindowFileName));
  Expected<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) {
    if (bytes.status().code() == StatusCode::kNotFound) return Status::Ok();
    return bytes.status().WithContext(path);
  }
  Status st = window->Decode(*bytes, now_ms);
  if (!st.ok()) return st.WithContext(path);
  return Status::Ok();
}

Status DiskWriteWindow::StoreFile(const std::string& dir, std::string_view encoded) {
  const std::string path = JoinPath(dir, std::string(kWriteWindowFileName));
  // "<name>.tmp.<pid>" (kWriteWindowTempPrefix): the start-up scan removes stale ones.
  const std::string tmp = TempPathFor(path, std::to_string(static_cast<long>(::getpid())));
  Status st = [&]() -> Status {
    FLASHKV_ASSIGN_OR_RETURN(File f, File::Create(tmp));
    FLASHKV_RETURN_IF_ERROR(f.Write(encoded.data(), encoded.size()));
    FLASHKV_RETURN_IF_ERROR(f.SyncData());
    FLASHKV_RETURN_IF_ERROR(f.Close());
    return RenameDurably(tmp, path);
  }();
  if (!st.ok()) (void)RemoveFile(tmp);
  return st;
}

}  // namespace flashkv
