#include "engine/batch_runner.h"

#include <algorithm>
#include <utility>

namespace flashkv {

BatchRunner::BatchRunner(Model& model, StepPlannerOptions options)
    : model_(model), planner_(options) {}

BatchRunner::Live* BatchRunner::Find(int64_t id) {
  for (Live& l : streams_) {
    if (l.s.id == id) return &l;
  }
  return nullptr;
}

Status BatchRunner::Submit(BatchStream stream) {
  const int64_t id = stream.id;
  if (stream.state == nullptr) return InvalidArgument("stream {} has no KV state", id);
  if (stream.prompt.empty()) return InvalidArgument("stream {} has an empty prompt", id);
  if (stream.max_new_tokens < 1) {
    return InvalidArgument("stream {} asks for {} new tokens (at least 1)", id,
                           stream.max_new_tokens);
  }
  for (const Live& l : streams_) {
    if (l.s.id == id) return InvalidArgument("stream {} is already running", id);
    if (l.s.state == stream.state) {
      return InvalidArgument("stream {} shares its KV state with stream {}", id, l.s.id);
    }
  }
  const int n_vocab = model_.config().n_vocab;
  for (size_t i = 0; i < stream.prompt.size(); ++i) {
    if (stream.prompt[i] < 0 || stream.prompt[i] >= n_vocab) {
      return InvalidArgument("stream {}: token id {} at index {} is outside the vocabulary (0..{})",
                             id, stream.prompt[i], i, n_vocab - 1);
    }
  }
  // The prompt and every new token but the last are evaluated.
  const int64_t need =
      stream.state->n_tokens() + int64_t(stream.prompt.size()) + int64_t(stream.max_new_tokens) - 1;
  if (need > stream.state->ctx_size()) {
    return ResourceExhausted("stream {} needs {} positions; its context holds {}", id, need,
                             stream.state->ctx_size());
  }
  FLASHKV_RETURN_IF_ERROR(planner_.Add(id, int64_t(stream.prompt.size())));
  Live l;
  l.s = std::move(stream);
  l.logits.resize(size_t(n_vocab));
  streams_.push_back(std::move(l));
  return Status::Ok();
}

bool BatchRunner::Cancel(int64_t id) {
  const bool held = planner_.Remove(id);
  std::erase_if(streams_, [&](const Live& l) { return l.s.id == id; });
  return held;
}

Status BatchRunner::Step() {
  last_ = BatchStepStats{};
  const std::span<const PlannedChunk> plan = planner_.Next();
  if (plan.empty()) return Status::Ok();
  chunks_.clear();
  owners_.clear();
  for (const PlannedChunk& p : plan) {
    Live* l = Find(p.id);
    SessionChunk c;
    c.state = l->s.state;
    c.logits = l->logits.data();
    if (p.prefill) {
      c.tokens = std::span<const int32_t>(l->s.prompt.data() + l->fed, size_t(p.n_tokens));
      c.logits_for = p.last_prefill ? LogitsFor::kLast : LogitsFor::kNone;
      last_.prefill_tokens += p.n_tokens;
    } else {
      c.tokens = std::span<const int32_t>(&l->next, 1);
      c.logits_for = LogitsFor::kLast;
      ++last_.decode_rows;
    }
    chunks_.push_back(c);
    owners_.push_back(l);
  }
  last_.sessions = int(plan.size());
  FLASHKV_RETURN_IF_ERROR(model_.ForwardBatch(chunks_));

  std::vector<int64_t> finished;
  for (size_t i = 0; i < chunks_.size(); ++i) {
    Live& l = *owners_[i];
    if (plan[i].prefill) l.fed += size_t(plan[i].n_tokens);
    if (chunks_[i].logits_for == LogitsFor::kNone) continue;
    const std::span<const float> logits(l.logits);
    l.next = l.s.pick ? l.s.pick(logits)
                      : int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    ++l.produced;
    const bool more = l.s.on_token ? l.s.on_token(l.next) : true;
    if (!more || l.produced == l.s.max_new_tokens) finished.push_back(l.s.id);
  }
  planner_.Commit();
  for (int64_t id : finished) Cancel(id);
  return Status::Ok();
}

}  // namespace flashkv
