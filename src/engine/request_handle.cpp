#include "engine/request_handle.h"

namespace flashkv {

RequestHandle::RequestHandle(GenerationRequest request)
    : request_(std::move(request)), submitted_(std::chrono::steady_clock::now()) {}

std::optional<GenerationEvent> RequestHandle::Next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return !events_.empty(); })) return std::nullopt;
  GenerationEvent ev = std::move(events_.front());
  events_.pop_front();
  return ev;
}

bool RequestHandle::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

void RequestHandle::SetOnFinish(std::function<void()> on_finish) {
  std::lock_guard<std::mutex> lock(mu_);
  on_finish_ = std::move(on_finish);
}

void RequestHandle::Push(GenerationEvent event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (event.kind == GenerationEvent::Kind::kDone || event.kind == GenerationEvent::Kind::kError) {
      if (!finished_ && on_finish_) on_finish_();
      finished_ = true;
    }
    events_.push_back(std::move(event));
  }
  cv_.notify_one();
}

}  // namespace flashkv
