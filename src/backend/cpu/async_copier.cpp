#include "backend/cpu/async_copier.h"

#include <cstring>

namespace flashkv {

AsyncCopier::~AsyncCopier() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t AsyncCopier::Submit(const HostCopy* copies, size_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t ticket = ++submitted_;
  queue_.emplace_back(ticket, std::vector<HostCopy>(copies, copies + n));
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  cv_.notify_all();
  return ticket;
}

void AsyncCopier::Wait(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_ >= ticket || ticket > submitted_; });
}

void AsyncCopier::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and drained
    auto [ticket, copies] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    for (const HostCopy& c : copies) std::memcpy(c.host, c.device.get(), c.bytes);
    lock.lock();
    done_ = ticket;
    cv_.notify_all();
  }
}

}  // namespace flashkv
