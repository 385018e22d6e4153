#include "util/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace flashkv {
namespace {

// Chunk of one read()/write() call: large enough for full disk bandwidth, below the
// kernel's 2 GiB single-transfer cap.
constexpr size_t kMaxTransfer = size_t(64) << 20;

Status ErrnoStatus(int err, std::string_view what, const std::string& path) {
  const std::string msg = fmt::format("{} {}: {}", what, path, std::strerror(err));
  if (err == ENOSPC || err == EDQUOT || err == EFBIG)
    return Status(StatusCode::kResourceExhausted, msg);
  if (err == ENOENT) return Status(StatusCode::kNotFound, msg);
  return Status(StatusCode::kIoError, msg);
}

std::string ParentDir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

File::~File() {
  if (fd_ >= 0) ::close(fd_);
}

File::File(File&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

Expected<File> File::OpenRead(const std::string& path, std::optional<uint32_t> owner) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus(errno, "opening", path);
  File f(fd, path);
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, "stat", path);
  if (!S_ISREG(st.st_mode)) return Corrupt("{} is not a regular file", path);
  // Checked on the open descriptor, so a file swapped after the check is not the one read.
  if (owner && st.st_uid != *owner) {
    return Corrupt("{} is owned by uid {}, not by this process's uid {}", path, st.st_uid, *owner);
  }
  // Regular files ignore O_NONBLOCK; cleared anyway so that reads mean what they say.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return f;
}

Expected<File> File::Create(const std::string& path, bool exclusive) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC);
  const int fd = ::open(path.c_str(), flags, 0600);
  if (fd < 0) return ErrnoStatus(errno, "creating", path);
  return File(fd, path);
}

Expected<File> File::OpenReadWrite(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "opening", path);
  return File(fd, path);
}

Expected<File> File::OpenDirectWrite(const std::string& path) {
#if defined(O_DIRECT)
  const int fd = ::open(path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "opening for direct writes", path);
  return File(fd, path);
#else
  return Unsupported("{}: no O_DIRECT on this platform", path);
#endif
}

Expected<File> File::LockExclusive(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(errno, "opening lock file", path);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return FailedPrecondition("{} is locked by another process", path);
    }
    return ErrnoStatus(err, "locking", path);
  }
  return File(fd, path);
}

Expected<uint64_t> File::Size() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return ErrnoStatus(errno, "stat", path_);
  return uint64_t(st.st_size);
}

// The read loop of ReadAt and ReadDirectAt: up to n bytes at `offset`, stopping at the
// end of the file (r == 0) or, for O_DIRECT (`direct`), at the first short read — the
// end of the file inside a block, after which the next offset would not be aligned.
Expected<size_t> File::ReadUpTo(uint64_t offset, void* dst, size_t n, bool direct) const {
  auto* p = static_cast<uint8_t*>(dst);
  size_t done = 0;
  while (done < n) {
    const size_t want = std::min(n - done, kMaxTransfer);
    const ssize_t r = ::pread(fd_, p + done, want, off_t(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, direct ? "reading (O_DIRECT)" : "reading", path_);
    }
    done += size_t(r);
    if (r == 0 || (direct && size_t(r) < want)) break;
  }
  return done;
}

Status File::ReadAt(uint64_t offset, void* dst, size_t n) const {
  FLASHKV_ASSIGN_OR_RETURN(size_t done, ReadUpTo(offset, dst, n, false));
  if (done < n) {
    return Corrupt("{}: truncated: wanted {} bytes at offset {}, the file ends at {}", path_, n,
                   offset, offset + done);
  }
  return Status::Ok();
}

Status File::SetDirectIo(bool on) {
#if defined(O_DIRECT)
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags < 0) return ErrnoStatus(errno, "fcntl F_GETFL", path_);
  if (::fcntl(fd_, F_SETFL, on ? (flags | O_DIRECT) : (flags & ~O_DIRECT)) != 0) {
    return ErrnoStatus(errno, on ? "turning on O_DIRECT for" : "turning off O_DIRECT for", path_);
  }
  return Status::Ok();
#else
  (void)on;
  return Unsupported("{}: no O_DIRECT on this platform", path_);
#endif
}

Expected<size_t> File::ReadDirectAt(uint64_t offset, void* dst, size_t n) const {
  return ReadUpTo(offset, dst, n, true);
}

Status File::Write(const void* src, size_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(fd_, p + done, std::min(n - done, kMaxTransfer));
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "writing", path_);
    }
    done += size_t(w);
  }
  return Status::Ok();
}

Status File::WriteAt(uint64_t offset, const void* src, size_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  size_t done = 0;
  while (done < n) {
    const ssize_t w =
        ::pwrite(fd_, p + done, std::min(n - done, kMaxTransfer), off_t(offset + done));
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "writing", path_);
    }
    done += size_t(w);
  }
  return Status::Ok();
}

Status File::Sync() {
  if (::fsync(fd_) != 0) return ErrnoStatus(errno, "fsync", path_);
  return Status::Ok();
}

Status File::SyncData() {
  if (::fdatasync(fd_) != 0) return ErrnoStatus(errno, "fdatasync", path_);
  return Status::Ok();
}

void File::StartWriteback(uint64_t offset, uint64_t n) {
#if defined(__linux__)
  (void)::sync_file_range(fd_, off_t(offset), off_t(n), SYNC_FILE_RANGE_WRITE);
#else
  (void)offset;
  (void)n;
#endif
}

void File::DropCache() {
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED);
}

Status File::Close() {
  if (fd_ < 0) return Status::Ok();
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) return ErrnoStatus(errno, "closing", path_);
  return Status::Ok();
}

Expected<std::string> ReadWholeFile(const std::string& path, uint64_t max_bytes) {
  FLASHKV_ASSIGN_OR_RETURN(File f, File::OpenRead(path));
  FLASHKV_ASSIGN_OR_RETURN(uint64_t size, f.Size());
  if (size > max_bytes || size > std::string().max_size()) {
    return Corrupt("{} is {} bytes, more than the {} expected", path, size, max_bytes);
  }
  std::string out(size, '\0');
  FLASHKV_RETURN_IF_ERROR(f.ReadAt(0, out.data(), out.size()));
  return out;
}

Status SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "opening directory", dir);
  const int r = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (r != 0) return ErrnoStatus(err, "fsync directory", dir);
  return Status::Ok();
}

Status RenameDurably(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return ErrnoStatus(errno, fmt::format("renaming {} to", from), to);
  }
  return SyncDirectory(ParentDir(to));
}

Status WriteFileSynced(const std::string& tmp, const std::function<Status(File&)>& write) {
  FLASHKV_ASSIGN_OR_RETURN(File f, File::Create(tmp, /*exclusive=*/true));
  FLASHKV_RETURN_IF_ERROR(write(f));
  FLASHKV_RETURN_IF_ERROR(f.SyncData());
  return f.Close();
}

Status WriteFileDurably(const std::string& tmp, const std::string& final_path,
                        const std::function<Status(File&)>& write,
                        const std::function<void()>& before_rename) {
  Status st = WriteFileSynced(tmp, write);
  if (st.ok()) {
    if (before_rename) before_rename();
    st = RenameDurably(tmp, final_path);
  }
  if (!st.ok()) (void)RemoveFile(tmp);
  return st;
}

Status RemoveFile(const std::string& path, bool missing_ok) {
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT && missing_ok) return Status::Ok();
    return ErrnoStatus(errno, "removing", path);
  }
  return Status::Ok();
}

Status CreateDirectories(const std::string& path, uint32_t mode) {
  if (path.empty()) return InvalidArgument("empty directory path");
  std::string cur;
  size_t pos = 0;
  while (pos <= path.size()) {
    const size_t next = path.find('/', pos);
    cur = path.substr(0, next == std::string::npos ? path.size() : next);
    pos = next == std::string::npos ? path.size() + 1 : next + 1;
    if (cur.empty()) continue;
    if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) {
      return ErrnoStatus(errno, "creating directory", cur);
    }
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, "stat", path);
  if (!S_ISDIR(st.st_mode)) return InvalidArgument("{} exists and is not a directory", path);
  return Status::Ok();
}

Expected<std::vector<DirEntry>> ListDirectory(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return ErrnoStatus(errno, "listing", dir);
  std::vector<DirEntry> out;
  while (struct dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    DirEntry de;
    de.name = std::string(name);
    struct stat st;
    if (::lstat(JoinPath(dir, name).c_str(), &st) == 0) {
      de.is_dir = S_ISDIR(st.st_mode);
      de.is_regular = S_ISREG(st.st_mode);
      de.size = de.is_regular ? uint64_t(st.st_size) : 0;
    }
    out.push_back(std::move(de));
  }
  ::closedir(d);
  return out;
}

std::string JoinPath(std::string_view dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  std::string s(dir);
  if (s.back() != '/') s += '/';
  s += name;
  return s;
}

}  // namespace flashkv
