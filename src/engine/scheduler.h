// Scheduler: the request queue in front of the single inference worker. HTTP threads
// Submit() requests; one worker thread admits them in arrival order (fair: nobody is
// overtaken) whenever the runner has room, and steps the admitted ones together between
// admissions, so the model and every KvState are only ever touched by that thread. Must not: parse
// HTTP or know what running a request means (RequestRunner does; the Engine is the real one).
//
// Threading: Submit, Stop and queue_depth are thread-safe; Start is called once, before
// any Submit.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine_metrics.h"
#include "engine/request_handle.h"

namespace flashkv {

// What the worker calls; every method runs on the worker thread.
class RequestRunner {
 public:
  virtual ~RequestRunner() = default;
  // Whether another request can start now.
  virtual bool CanAdmit() const = 0;
  // Starts a request; it ends (kDone or kError pushed last) here or in a later Step().
  virtual void Admit(RequestHandle& request) = 0;
  // Advances every admitted request by one step.
  virtual void Step() = 0;
  // No admitted request is left.
  virtual bool idle() const = 0;
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
  std::vector<std::shared_ptr<RequestHandle>> running_;  // admitted, not finished
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace flashkv
