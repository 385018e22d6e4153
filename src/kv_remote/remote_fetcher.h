// RemoteFetcher: the remote tier's lookup thread. A lookup that reaches the shared store
// (kv_remote/remote_restore.h FetchIntoDisk: the store's round trips, every object's checks and
// the import into the local disk cache) can take seconds for a large entry; run on the
// engine's worker it would stall every other session's steps. The engine Start()s one per
// request that missed the local tiers, keeps stepping the others, and Take()s the result
// (the entry kept on disk, restored there by the worker, or a miss) when it is ready.
// Lookups run one at a time, in order; a cancelled one is dropped from the queue or, when
// running, stops at its next object. Must not: touch a KvState or the model (the worker
// restores).
//
// Threading: every method is thread-safe; results are taken by the thread that started.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "kv_remote/remote_restore.h"

namespace flashkv {

class RemoteFetcher {
 public:
  // `remote` and `disk` must outlive the fetcher.
  RemoteFetcher(RemoteTier& remote, DiskCache& disk);
  // Cancels what is queued or running and joins the thread.
  ~RemoteFetcher();
  RemoteFetcher(const RemoteFetcher&) = delete;
  RemoteFetcher& operator=(const RemoteFetcher&) = delete;

  // Queues a lookup for the longest entry of min_tokens..max_tokens that `tokens`
  // continue; returns its ticket.
  uint64_t Start(std::vector<int32_t> tokens, int64_t min_tokens, int64_t max_tokens);
  // Forgets the ticket: its result is never delivered.
  void Cancel(uint64_t ticket);
  // The finished lookup's result (kNotFound: a miss), or nullopt while it is queued or
  // running.
  std::optional<Expected<RemoteKept>> Take(uint64_t ticket);
  // Waits until some result is ready to take, or `timeout` passed.
  void WaitForResult(std::chrono::milliseconds timeout);
  // Lookups queued or running (the requests waiting on the shared store; /metrics).
  size_t waiting() const;

 private:
  struct Job {
    uint64_t ticket = 0;
    std::vector<int32_t> tokens;
    int64_t min_tokens = 1, max_tokens = 0;
  };
  void Loop();

  RemoteTier& remote_;
  DiskCache& disk_;
  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::map<uint64_t, Expected<RemoteKept>> done_;
  uint64_t next_ticket_ = 1;
  uint64_t running_ = 0;  // the ticket being fetched, 0: none
  std::atomic<bool> cancel_running_{false};
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace flashkv
