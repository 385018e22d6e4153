#include "engine/scheduler.h"

#include <spdlog/spdlog.h>

namespace flashkv {

Scheduler::Scheduler(RequestRunner& runner, EngineMetrics& metrics)
    : runner_(runner), metrics_(metrics) {}

Scheduler::~Scheduler() {
  Stop(/*drain=*/false);
}

void Scheduler::Start() {
  worker_ = std::thread([this] { WorkerLoop(); });
}

bool Scheduler::Submit(std::shared_ptr<RequestHandle> request) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || !worker_.joinable()) return false;
    queue_.push_back(std::move(request));
  }
  metrics_.AddQueueDepth(1);
  cv_.notify_one();
  return true;
}

void Scheduler::Stop(bool drain) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (!drain) {
      for (auto& r : queue_) r->Cancel();
      if (running_) running_->Cancel();
    }
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

size_t Scheduler::queue_depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void Scheduler::WorkerLoop() {
  for (;;) {
    std::shared_ptr<RequestHandle> next;
    {
      std::unique_lock<std::mutex> lock(mu_);
      running_.reset();
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) break;  // stopping, and everything queued has run
      next = std::move(queue_.front());
      queue_.pop_front();
      running_ = next;
    }
    metrics_.AddQueueDepth(-1);
    if (next->cancelled()) {
      GenerationEvent ev;
      ev.kind = GenerationEvent::Kind::kError;
      ev.error = Cancelled("request cancelled before it started");
      next->Push(std::move(ev));
      metrics_.RecordOutcome(EngineMetrics::Outcome::kCancelled);
      continue;
    }
    // The gauge drops with the final event, not after Run returns: the client may ask
    // /health the moment its answer arrives (tests/clients/robustness.test.mjs).
    metrics_.AddActive(1);
    next->SetOnFinish([this] { metrics_.AddActive(-1); });
    runner_.Run(*next);
    if (!next->finished()) {
      // A runner that forgot its last event would leave the HTTP thread waiting forever.
      spdlog::error("scheduler: request ended without a final event");
      GenerationEvent ev;
      ev.kind = GenerationEvent::Kind::kError;
      ev.error = Internal("request ended without a result");
      next->Push(std::move(ev));
    }
  }
  runner_.OnShutdown();
}

}  // namespace flashkv
