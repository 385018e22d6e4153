// StepPlanner: picks the rows of each batched forward step (Model::ForwardBatch) from the
// streams it holds — one decode row for every active stream that is decoding, then prefill
// chunks of the active streams still reading their prompts, oldest first, within a prefill
// token budget per step, so a long cold prompt advances beside the others' decode instead of
// stalling them (and within a larger one while nobody decodes). Streams wait in arrival order until
// one of `max_active` slots is free and are admitted between steps; removing one (finished or
// cancelled) frees its slot and changes nothing else about the other streams' rows. Pure
// bookkeeping: no model, no threads. Must not: run the model, sample, or know sessions and tiers
// (the caller maps ids to them).
//
// Threading: not thread-safe; the engine worker owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "util/status.h"

namespace flashkv {

struct StepPlannerOptions {
  int max_active = 16;       // streams in steps at once (slots of the live pool)
  int prefill_budget = 256;  // prompt tokens per step, all streams together (>= 1)
  int max_chunk = 0;         // prompt tokens of one stream per step (0: the budget)
  // Prompt tokens per step, and of one stream, while no active stream decodes (0, or less than
  // the budget: the budget). Larger chunks make a prefill cheaper per token on a GPU (each
  // weight read once per chunk), but a step holds the device longer, which only a decoding
  // stream's next token would wait behind (docs/PERFORMANCE.md "Prefill: where issue #13 ends").
  int solo_budget = 0;
  // Which prompt is served first in a step: false, the oldest; true, the next one in turn
  // (each step starts one stream later), so several long prompts share the budget fairly.
  bool round_robin = false;
};

// One stream's rows in a step.
struct PlannedChunk {
  int64_t id = 0;
  int n_tokens = 0;  // a prefill chunk's length, or 1 for a decode row
  bool prefill = false;
  bool last_prefill = false;  // the chunk ends the prompt: its last row's logits start decoding
};

class StepPlanner {
 public:
  explicit StepPlanner(StepPlannerOptions options);

  // Queues stream `id` with `prompt_tokens` (>= 1) tokens to read before it decodes. Errors
  // for an id already held or a bad count; nothing is queued then.
  Status Add(int64_t id, int64_t prompt_tokens);
  // Forgets stream `id`, queued or active (finished or cancelled); false when not held.
  bool Remove(int64_t id);

  // Admits waiting streams into free slots (arrival order), then plans the next step:
  // decode rows of the active decoding streams in admission order, then prefill chunks in
  // admission order until the budget (solo_budget when there is no decode row) is spent.
  // Empty when no stream is active.
  std::span<const PlannedChunk> Next();
  // The step Next() planned has run: prefill counts advance, finished prompts start decoding.
  void Commit();
  // Cuts stream `id`'s planned prefill chunk to `n_tokens` (1 .. its planned length) before
  // Commit, e.g. at a snapshot point; the rest is planned in later steps. False when the step
  // plans no prefill chunk for `id` or `n_tokens` is out of range.
  bool Shorten(int64_t id, int n_tokens);

  bool empty() const { return active_.empty() && waiting_.empty(); }
  size_t active() const { return active_.size(); }
  size_t waiting() const { return waiting_.size(); }
  // Prompt tokens stream `id` has still to read (-1 when not held).
  int64_t prompt_left(int64_t id) const;

 private:
  struct Stream {
    int64_t id;
    int64_t prompt_left;  // 0: decoding
  };
  const Stream* Find(int64_t id) const;

  StepPlannerOptions options_;
  std::vector<Stream> active_;  // admission order
  std::deque<Stream> waiting_;  // arrival order
  std::vector<PlannedChunk> plan_;
  std::vector<const Stream*> reading_;  // Next: the streams still reading their prompts
  bool planned_ = false;
  size_t turn_ = 0;  // round_robin: steps planned with a prompt in them
};

}  // namespace flashkv
