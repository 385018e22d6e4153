#include "kv_disk/cache_directory.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <spdlog/spdlog.h>

#include "snapshot/cache_names.h"

namespace flashkv {
namespace {

// What sits at `path` when it is not a regular file, for the log.
const char* KindOf(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return "vanished file";
  if (S_ISDIR(st.st_mode)) return "directory";
  if (S_ISLNK(st.st_mode)) return "symbolic link";
  if (S_ISFIFO(st.st_mode)) return "FIFO";
  if (S_ISSOCK(st.st_mode)) return "socket";
  if (S_ISREG(st.st_mode)) return "file";
  return "device file";
}

}  // namespace

Status CacheDirectory::Open() {
  FLASHKV_RETURN_IF_ERROR(CreateDirectories(dir_, 0700));
  // A directory this process cannot write still serves loads: no lock (nothing here
  // writes), no saves, moves or evictions.
  if (::access(dir_.c_str(), W_OK) != 0 && (errno == EROFS || errno == EACCES)) {
    read_only_ = true;
    spdlog::warn("kv cache: {} is read-only ({}): entries load from it, nothing is saved there",
                 dir_, std::strerror(errno));
  } else {
    FLASHKV_RETURN_IF_ERROR(TakeLock());
  }
  return Remember();
}

Status CacheDirectory::TakeLock() {
  FLASHKV_ASSIGN_OR_RETURN(File lock, File::LockExclusive(JoinPath(dir_, kLockFileName)));
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock.fd(), 0) != 0) return IoError("truncating {}", lock.path());
  FLASHKV_RETURN_IF_ERROR(lock.WriteAt(0, pid.data(), pid.size()));
  lock_ = std::move(lock);
  return Status::Ok();
}

Status CacheDirectory::Remember() {
  struct stat st;
  if (::stat(dir_.c_str(), &st) != 0) return IoError("stat {}: {}", dir_, std::strerror(errno));
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  return Status::Ok();
}

Expected<CacheDirectory::State> CacheDirectory::Check() {
  std::lock_guard<std::mutex> lock(mu_);
  if (disabled_) return disabled_why_;
  struct stat st;
  const bool gone = ::stat(dir_.c_str(), &st) != 0;
  if (!gone && S_ISDIR(st.st_mode) && st.st_dev == dev_ && st.st_ino == ino_) return State::kSame;
  const char* what = gone ? "deleted" : "replaced";
  Status s = CreateDirectories(dir_, 0700);
  if (s.ok() && !read_only_) s = TakeLock();
  if (s.ok()) s = Remember();
  if (!s.ok()) {
    disabled_why_ = FailedPrecondition(
        "kv cache {} was {} while in use and cannot be taken back ({}); the disk tier is disabled",
        dir_, what, s.message());
    disabled_ = true;
    spdlog::error("{}", disabled_why_.message());
    return disabled_why_;
  }
  spdlog::warn("kv cache: {} was {} while in use: recreated and locked again", dir_, what);
  return State::kRecreated;
}

Status CacheDirectory::disabled_why() const {
  std::lock_guard<std::mutex> lock(mu_);
  return disabled_why_;
}

void CacheDirectory::SetAside(const std::string& path) const {
  const char* kind = KindOf(path);
  if (read_only_) {
    spdlog::warn("kv cache: ignoring {}: a {} where an entry file belongs", path, kind);
    return;
  }
  const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  const std::string dst =
      JoinPath(quarantine_, path.substr(path.find_last_of('/') + 1) + "." + std::to_string(ms));
  Status st = CreateDirectories(quarantine_, 0700);
  if (st.ok()) st = RenameDurably(path, dst);
  if (st.ok()) {
    spdlog::warn("kv cache: moved {} (a {} where an entry file belongs) to {}", path, kind, dst);
  } else {
    spdlog::warn("kv cache: {} is a {} where an entry file belongs and cannot be moved: {}", path,
                 kind, st.message());
  }
}

}  // namespace flashkv
