// Scheduler: the request queue in front of the single inference worker. HTTP threads
// Submit() requests; one worker thread runs them one at a time in arrival order (fair:
// nobody is overtaken), so the model and every KvState are only ever touched by that
// thread and concurrent clients can never see each other's state. Must not: parse HTTP or
// know what running a request means (RequestRunner does; the Engine is the real one).
//
// Threading: Submit, Stop and queue_depth are thread-safe; Start is called once, before
// any Submit.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "engine/engine_metrics.h"
#include "engine/request_handle.h"

namespace flashkv {

// What the worker calls; every method runs on the worker thread.
class RequestRunner {
 public:
  virtual ~RequestRunner() = default;
  // Runs one request to its end, pushing events; must push kDone or kError last.
  virtual void Run(RequestHandle& request) = 0;
  // After the last request, before the worker exits (the shutdown save goes here).
  virtual void OnShutdown() {}
};

class Scheduler {
 public:
  // `runner` and `metrics` must outlive the scheduler.
  Scheduler(RequestRunner& runner, EngineMetrics& metrics);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  void Start();

  // Queues a request; false (and nothing queued) once Stop has begun.
  bool Submit(std::shared_ptr<RequestHandle> request);

  // Stops accepting requests. drain: the queue and the running request finish normally;
  // otherwise they are cancelled. Returns after the worker ran OnShutdown and exited.
  // Idempotent.
  void Stop(bool drain);

  size_t queue_depth() const;

 private:
  void WorkerLoop();

  RequestRunner& runner_;
  EngineMetrics& metrics_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<RequestHandle>> queue_;
  std::shared_ptr<RequestHandle> running_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace flashkv
