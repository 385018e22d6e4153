#include "engine/step_planner.h"

#include <algorithm>

namespace flashkv {

StepPlanner::StepPlanner(StepPlannerOptions options) : options_(options) {
  options_.max_active = std::max(options_.max_active, 1);
  options_.prefill_budget = std::max(options_.prefill_budget, 1);
}

const StepPlanner::Stream* StepPlanner::Find(int64_t id) const {
  for (const Stream& s : active_) {
    if (s.id == id) return &s;
  }
  for (const Stream& s : waiting_) {
    if (s.id == id) return &s;
  }
  return nullptr;
}

Status StepPlanner::Add(int64_t id, int64_t prompt_tokens) {
  if (prompt_tokens < 1) {
    return InvalidArgument("stream {} needs at least one prompt token, got {}", id, prompt_tokens);
  }
  if (Find(id) != nullptr) return InvalidArgument("stream {} is already scheduled", id);
  waiting_.push_back(Stream{id, prompt_tokens});
  return Status::Ok();
}

bool StepPlanner::Remove(int64_t id) {
  // A planned step that has not been committed keeps its rows only for the streams still
  // held, so a stream cancelled between Next and Commit is not advanced.
  std::erase_if(plan_, [&](const PlannedChunk& c) { return c.id == id; });
  const size_t before = active_.size() + waiting_.size();
  std::erase_if(active_, [&](const Stream& s) { return s.id == id; });
  std::erase_if(waiting_, [&](const Stream& s) { return s.id == id; });
  return active_.size() + waiting_.size() != before;
}

std::span<const PlannedChunk> StepPlanner::Next() {
  while (!waiting_.empty() && active_.size() < size_t(options_.max_active)) {
    active_.push_back(waiting_.front());
    waiting_.pop_front();
  }
  plan_.clear();
  for (const Stream& s : active_) {
    if (s.prompt_left == 0) plan_.push_back(PlannedChunk{s.id, 1, false, false});
  }
  int64_t budget = options_.prefill_budget;
  for (const Stream& s : active_) {
    if (budget == 0) break;
    if (s.prompt_left == 0) continue;
    const int64_t n = std::min(budget, s.prompt_left);
    plan_.push_back(PlannedChunk{s.id, int(n), true, n == s.prompt_left});
    budget -= n;
  }
  planned_ = true;
  return plan_;
}

void StepPlanner::Commit() {
  if (!planned_) return;
  for (const PlannedChunk& c : plan_) {
    if (!c.prefill) continue;
    for (Stream& s : active_) {
      if (s.id == c.id) s.prompt_left -= c.n_tokens;
    }
  }
  plan_.clear();
  planned_ = false;
}

int64_t StepPlanner::prompt_left(int64_t id) const {
  const Stream* s = Find(id);
  return s == nullptr ? -1 : s->prompt_left;
}

}  // namespace flashkv
