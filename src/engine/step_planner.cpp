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
  std::vector<const Stream*>& reading = reading_;
  reading.clear();
  for (const Stream& s : active_) {
    if (s.prompt_left > 0) reading.push_back(&s);
  }
  const size_t first = options_.round_robin && !reading.empty() ? turn_++ % reading.size() : 0;
  int64_t budget = options_.prefill_budget;
  int64_t cap = options_.max_chunk > 0 ? options_.max_chunk : budget;
  if (plan_.empty() && options_.solo_budget > budget) {  // no decode row: nobody waits
    budget = options_.solo_budget;
    cap = std::max<int64_t>(cap, budget);
  }
  for (size_t k = 0; k < reading.size() && budget > 0; ++k) {
    const Stream& s = *reading[(first + k) % reading.size()];
    const int64_t n = std::min({budget, cap, s.prompt_left});
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

bool StepPlanner::Shorten(int64_t id, int n_tokens) {
  for (PlannedChunk& c : plan_) {
    if (c.id != id || !c.prefill) continue;
    if (n_tokens < 1 || n_tokens > c.n_tokens) return false;
    if (n_tokens < c.n_tokens) c.last_prefill = false;
    c.n_tokens = n_tokens;
    return true;
  }
  return false;
}

int64_t StepPlanner::prompt_left(int64_t id) const {
  const Stream* s = Find(id);
  return s == nullptr ? -1 : s->prompt_left;
}

}  // namespace flashkv
