// A fixed pool of worker threads for data-parallel loops (matvec rows, heads, experts).
// Passed to whoever needs it as a context object, never a global, so tests and the CUDA
// host side can size their own. Must not: know about models.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace flashkv {

class ThreadPool {
 public:
  // n_threads <= 0 means one per hardware core. The calling thread works too, so a pool
  // of N runs N-1 background threads.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end, thread_index) on disjoint ranges that cover [0, n), at least
  // `grain` items each, and returns when all are done. Not reentrant: fn must not call
  // ParallelFor on the same pool. Only one thread may call ParallelFor at a time.
  void ParallelFor(size_t n, size_t grain,
                   const std::function<void(size_t begin, size_t end, int thread)>& fn);

 private:
  void WorkerLoop(int index);

  int n_threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  // The job being run, valid while generation_ is odd-stepped by ParallelFor.
  const std::function<void(size_t, size_t, int)>* job_ = nullptr;
  size_t job_n_ = 0;
  size_t job_chunk_ = 0;
  int job_parts_ = 0;
  int pending_ = 0;
  unsigned long generation_ = 0;
  bool stop_ = false;
};

}  // namespace flashkv
