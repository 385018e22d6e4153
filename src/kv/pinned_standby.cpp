#include "kv/pinned_standby.h"

#include <spdlog/spdlog.h>

namespace flashkv {

PinnedStandby::PinnedStandby(Backend* backend) : backend_(backend) {}

PinnedStandby::~PinnedStandby() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PinnedStandby::Prepare(uint64_t bytes) {
  if (!enabled_ || bytes == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if ((ready_ && ready_->capacity() >= bytes) || making_ >= bytes || want_ >= bytes) return;
  want_ = bytes;
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  cv_.notify_all();
}

std::unique_ptr<SnapshotImage> PinnedStandby::Take(uint64_t bytes, bool wait) {
  std::unique_lock<std::mutex> lock(mu_);
  if (wait) {
    cv_.wait(lock, [&] {
      return (ready_ && ready_->capacity() >= bytes) || (making_ < bytes && want_ < bytes);
    });
  }
  if (!ready_ || ready_->capacity() < bytes) return nullptr;
  return std::move(ready_);
}

void PinnedStandby::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || want_ > 0; });
    if (stop_) return;
    making_ = want_;
    want_ = 0;
    const uint64_t bytes = making_;
    lock.unlock();
    std::unique_ptr<SnapshotImage> made;
    Expected<SnapshotImage> img = SnapshotImage::Reserve(bytes);
    if (img.ok()) {
      if (backend_ != nullptr) {
        Status st = img->Pin(*backend_);
        if (!st.ok()) spdlog::debug("kv: standby buffer not page-locked: {}", st.message());
      }
      made = std::make_unique<SnapshotImage>(std::move(*img));
    } else {
      spdlog::debug("kv: standby buffer of {} bytes: {}", bytes, img.status().message());
    }
    lock.lock();
    making_ = 0;
    // Keep the larger of what is ready and what was made (the smaller is freed unlocked).
    if (made && (!ready_ || ready_->capacity() < made->capacity())) std::swap(ready_, made);
    cv_.notify_all();
    if (made) {
      lock.unlock();
      made.reset();
      lock.lock();
    }
  }
}

}  // namespace flashkv
