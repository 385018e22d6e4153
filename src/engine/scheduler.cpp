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
      for (auto& r : running_) r->Cancel();
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
    bool admitted = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty() || !running_.empty(); });
      if (queue_.empty() && running_.empty()) break;  // stopping, and everything has run
      // Arrivals join between steps while there is room; the rest wait their turn.
      if (!queue_.empty() && runner_.CanAdmit()) {
        next = std::move(queue_.front());
        queue_.pop_front();
        admitted = !next->cancelled();
        if (admitted) running_.push_back(next);  // Stop cancels it from here on
      }
    }
    if (next) {
      metrics_.AddQueueDepth(-1);
      if (!admitted) {
        GenerationEvent ev;
        ev.kind = GenerationEvent::Kind::kError;
        ev.error = Cancelled("request cancelled before it started");
        next->Push(std::move(ev));
        metrics_.RecordOutcome(EngineMetrics::Outcome::kCancelled);
        continue;
      }
      // The gauge drops with the request's final event, not when the step that produced it
      // returns: the client may ask /health the moment its answer arrives
      // (tests/clients/robustness.test.mjs).
      metrics_.AddActive(1);
      next->SetOnFinish([this] { metrics_.AddActive(-1); });
      runner_.Admit(*next);
    } else {
      runner_.Step();
    }
    std::lock_guard<std::mutex> lock(mu_);
    const bool idle = runner_.idle();
    std::erase_if(running_, [&](const std::shared_ptr<RequestHandle>& r) {
      if (!r->finished() && idle) {
        // A runner that forgot its last event would leave the HTTP thread waiting forever.
        spdlog::error("scheduler: request ended without a final event");
        GenerationEvent ev;
        ev.kind = GenerationEvent::Kind::kError;
        ev.error = Internal("request ended without a result");
        r->Push(std::move(ev));
      }
      return r->finished();
    });
  }
  runner_.OnShutdown();
}

}  // namespace flashkv
