#include "util/thread_pool.h"

#include <algorithm>

namespace flashkv {

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::ParallelFor(size_t n, size_t grain,
                             const std::function<void(size_t, size_t, int)>& fn) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  size_t max_parts = (n + grain - 1) / grain;
  int parts = static_cast<int>(std::min<size_t>(max_parts, static_cast<size_t>(n_threads_)));
  if (parts <= 1) {
    fn(0, n, 0);
    return;
  }
  size_t chunk = (n + parts - 1) / parts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    job_parts_ = parts;
    pending_ = parts - 1;
    ++generation_;
  }
  start_cv_.notify_all();
  fn(0, std::min(chunk, n), 0);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::WorkerLoop(int index) {
  unsigned long seen = 0;
  for (;;) {
    const std::function<void(size_t, size_t, int)>* job;
    size_t begin, end;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= job_parts_) continue;
      job = job_;
      begin = std::min(job_n_, job_chunk_ * static_cast<size_t>(index));
      end = std::min(job_n_, begin + job_chunk_);
    }
    if (begin < end) (*job)(begin, end, index);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

}  // namespace flashkv
