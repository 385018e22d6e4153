// PinnedStandby: one page-locked snapshot buffer made ahead of need on a background thread.
// A capture into fresh memory spends most of its time faulting pages in and page-locking
// them (Backend::PinHost); the tiers take this buffer instead, so a save or a RAM put
// moves the state at DMA speed and can run asynchronously (CaptureSnapshotLayersAsync
// needs a page-locked destination). The next buffer is prepared after each take.
// Must not: decide sizes (the caller asks) or hold more than one buffer.
//
// Threading: Prepare and Take from any thread; the buffer is made on the standby's own.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "backend/backend.h"
#include "snapshot/snapshot_codec.h"

namespace flashkv {

class PinnedStandby {
 public:
  // `backend` page-locks the buffers (null: plain buffers, still faulted in ahead).
  explicit PinnedStandby(Backend* backend);
  // Waits for a buffer being made, then frees what is held.
  ~PinnedStandby();
  PinnedStandby(const PinnedStandby&) = delete;
  PinnedStandby& operator=(const PinnedStandby&) = delete;

  // Starts making a buffer of `bytes` unless one of at least that size is ready or being
  // made. Returns at once; does nothing while disabled.
  void Prepare(uint64_t bytes);
  // The ready buffer when it holds at least `bytes`, else null. `wait`: when such a buffer
  // is being made, wait for it (for tests and start-up; a hot path never waits).
  std::unique_ptr<SnapshotImage> Take(uint64_t bytes, bool wait = false);
  void set_enabled(bool on) { enabled_ = on; }

 private:
  void Loop();

  Backend* backend_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t want_ = 0;    // bytes asked for and not yet made (0: nothing to do)
  uint64_t making_ = 0;  // bytes of the buffer being made
  std::unique_ptr<SnapshotImage> ready_;
  bool stop_ = false;
  bool enabled_ = true;
  std::thread thread_;  // started by the first Prepare
};

}  // namespace flashkv
