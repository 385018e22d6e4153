// CacheDirectory: the disk cache's directory as a place on the filesystem — created 0700
// if missing, locked (one flashkv per directory; the lock file holds the pid) unless this
// process cannot write it (then it is read-only: entries load, nothing is written), and
// watched: a directory deleted or replaced while in use is recreated and locked again, or,
// when another process holds the new one, given up for good with a clear log. Also moves
// what is not an entry file out of an entry's name. Must not: know entries, snapshots or
// the index (DiskCache does).
//
// Threading: Check and SetAside are thread-safe; Open runs first, alone.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <mutex>
#include <string>

#include "util/file_io.h"
#include "util/status.h"

namespace flashkv {

class CacheDirectory {
 public:
  // `quarantine`: the subdirectory SetAside moves things into.
  CacheDirectory(std::string dir, std::string quarantine)
      : dir_(std::move(dir)), quarantine_(std::move(quarantine)) {}
  CacheDirectory(const CacheDirectory&) = delete;
  CacheDirectory& operator=(const CacheDirectory&) = delete;

  // Creates, detects read-only, locks (FailedPrecondition when another process holds it).
  Status Open();

  bool read_only() const { return read_only_; }

  enum class State { kSame, kRecreated };
  // Whether the directory is still the one locked. kRecreated: it was deleted or replaced
  // and is locked again (whatever was indexed from the old one is gone). An error: it
  // could not be taken back and the cache must stop using it (every later call says so).
  Expected<State> Check();
  bool disabled() const { return disabled_; }
  // Why it was given up (meaningful once disabled()).
  Status disabled_why() const;

  // Moves a directory, link, FIFO or other non-file found at `path` (an entry's name) into
  // the quarantine directory, logged once: a directory there would fail every save of that
  // key, and a link must not be followed. Read-only: only logged.
  void SetAside(const std::string& path) const;

 private:
  Status TakeLock();
  Status Remember();

  const std::string dir_;
  const std::string quarantine_;
  bool read_only_ = false;
  mutable std::mutex mu_;
  File lock_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  std::atomic<bool> disabled_{false};
  Status disabled_why_;  // written under mu_ before disabled_
};

}  // namespace flashkv
