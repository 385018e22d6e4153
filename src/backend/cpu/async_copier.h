// AsyncCopier: the CPU backend's Backend::ReadManyAsync — one background thread that
// memcpy's the queued transfers in submission order while the caller's thread goes on
// running ops (a snapshot's closed rows while decoding continues). Tickets complete in
// order, so waiting for one is waiting for the counter to pass it. Must not: touch
// anything but the ranges it was given.
//
// Threading: Submit from the backend's thread; Wait from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/backend.h"

namespace flashkv {

class AsyncCopier {
 public:
  AsyncCopier() = default;
  // Finishes the queued copies, then stops the thread.
  ~AsyncCopier();
  AsyncCopier(const AsyncCopier&) = delete;
  AsyncCopier& operator=(const AsyncCopier&) = delete;

  // Queues device → host copies (device ranges are host memory here); returns their ticket.
  uint64_t Submit(const HostCopy* copies, size_t n);
  // Blocks until every copy up to `ticket` is done.
  void Wait(uint64_t ticket);

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<uint64_t, std::vector<HostCopy>>> queue_;
  uint64_t submitted_ = 1;  // ticket 1 is "nothing", done from the start
  uint64_t done_ = 1;
  bool stop_ = false;
  std::thread thread_;  // started with the first Submit
};

}  // namespace flashkv
