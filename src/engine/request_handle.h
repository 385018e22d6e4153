// RequestHandle: one request in flight between an HTTP thread and the engine worker — the
// request, its cancel flag and the queue of events the worker produces. The HTTP thread
// waits on Next() with a timeout so it can write keepalives and notice a vanished client
// while the worker runs. Must not: know HTTP.
//
// Threading: every method is thread-safe; one producer (the worker), one consumer.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>

#include "engine/generation.h"

namespace flashkv {

class RequestHandle {
 public:
  explicit RequestHandle(GenerationRequest request);

  const GenerationRequest& request() const { return request_; }
  std::chrono::steady_clock::time_point submitted() const { return submitted_; }

  // Asks the worker to stop this request; it notices before the next chunk or token.
  void Cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

  // Consumer: the next event, or nullopt when none arrived within `timeout`.
  std::optional<GenerationEvent> Next(std::chrono::milliseconds timeout);
  // True once the worker pushed kDone or kError.
  bool finished() const;

  // Producer (the worker).
  void Push(GenerationEvent event);
  // Called once, by the Push of the first kDone or kError, before that event becomes
  // visible to Next(): a client that has its answer then never sees the request counted
  // as still running (src/engine/scheduler.cpp keeps the active-request gauge with it).
  void SetOnFinish(std::function<void()> on_finish);

 private:
  const GenerationRequest request_;
  const std::chrono::steady_clock::time_point submitted_;
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GenerationEvent> events_;
  bool finished_ = false;
  std::function<void()> on_finish_;
};

}  // namespace flashkv
