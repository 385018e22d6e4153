#include "kv_remote/remote_fetcher.h"

namespace flashkv {

RemoteFetcher::RemoteFetcher(RemoteTier& remote, DiskCache& disk) : remote_(remote), disk_(disk) {
  thread_ = std::thread([this] { Loop(); });
}

RemoteFetcher::~RemoteFetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    queue_.clear();
    cancel_running_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t RemoteFetcher::Start(std::vector<int32_t> tokens, int64_t min_tokens, int64_t max_tokens) {
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ticket = next_ticket_++;
    queue_.push_back(Job{ticket, std::move(tokens), min_tokens, max_tokens});
  }
  cv_.notify_all();
  return ticket;
}

void RemoteFetcher::Cancel(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(queue_, [&](const Job& j) { return j.ticket == ticket; });
  done_.erase(ticket);
  if (running_ == ticket) cancel_running_ = true;
}

std::optional<Expected<RemoteKept>> RemoteFetcher::Take(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = done_.find(ticket);
  if (it == done_.end()) return std::nullopt;
  Expected<RemoteKept> r = std::move(it->second);
  done_.erase(it);
  return r;
}

void RemoteFetcher::WaitForResult(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !done_.empty() || stop_; });
}

size_t RemoteFetcher::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size() + (running_ != 0 ? 1 : 0);
}

void RemoteFetcher::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    running_ = job.ticket;
    cancel_running_ = false;
    lock.unlock();
    Expected<RemoteKept> r =
        FetchIntoDisk(remote_, disk_, job.tokens, job.min_tokens, job.max_tokens, &cancel_running_);
    lock.lock();
    running_ = 0;
    // A cancelled ticket's result is dropped (what it kept on disk stays: a later lookup
    // finds it there).
    if (!cancel_running_) done_.emplace(job.ticket, std::move(r));
    cv_.notify_all();
  }
}

}  // namespace flashkv
