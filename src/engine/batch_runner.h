// BatchRunner: generation for many streams at once through batched forward steps. Each Step()
// asks the StepPlanner for the rows (a decode token of every decoding stream, prefill chunks
// within the budget), runs them as one Model::ForwardBatch, and gives every stream whose row
// produced logits its next token. Because ForwardBatch keeps every session's bits as if it ran
// alone, a stream's tokens and KV do not depend on the other streams, their arrival, their
// prompts or their cancellation. Must not: know HTTP, tokenization, tiers or snapshots (the
// engine maps streams to sessions); the caller owns every KvState.
//
// Like Session's pending tokens, the last token a stream gets is not evaluated into its
// state: a finished stream's KV holds its prompt and all but its last new token.
//
// Threading: not thread-safe; the engine worker owns it (and the model).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/step_planner.h"
#include "model/model.h"
#include "state/kv_state.h"
#include "util/status.h"

namespace flashkv {

struct BatchStream {
  int64_t id = 0;
  std::vector<int32_t> prompt;  // evaluated after what `state` holds, before decoding (>= 1)
  KvState* state = nullptr;     // the stream's KV, the caller's; must outlive the stream
  int max_new_tokens = 1;       // >= 1
  // The next token from the logits [n_vocab]; empty: the argmax (lowest id on ties).
  std::function<int32_t(std::span<const float>)> pick;
  // Each new token as it is chosen; false stops the stream after it. Runs inside Step():
  // must not call Submit or Cancel.
  std::function<bool(int32_t)> on_token;
};

// What one Step() ran.
struct BatchStepStats {
  int sessions = 0;        // streams with rows in the step
  int decode_rows = 0;     // one per decoding stream
  int prefill_tokens = 0;  // prompt rows, all streams
};

class BatchRunner {
 public:
  // `model` must outlive the runner.
  BatchRunner(Model& model, StepPlannerOptions options);

  // Queues a stream for the next steps. Errors (and nothing queued) for a repeated id, a
  // state already in use, no state, an empty prompt, max_new_tokens < 1, token ids outside
  // the vocabulary, or a stream that would not fit its context.
  Status Submit(BatchStream stream);
  // Drops stream `id` between steps: it gets no more tokens, its state keeps what was
  // evaluated, and no other stream's rows change. False when not held.
  bool Cancel(int64_t id);

  // Runs one step (nothing when idle). A model error fails the step and is returned; the
  // streams stay queued as they were.
  Status Step();
  bool idle() const { return streams_.empty(); }
  size_t streams() const { return streams_.size(); }
  const BatchStepStats& last_step() const { return last_; }

 private:
  struct Live {
    BatchStream s;
    size_t fed = 0;  // prompt tokens evaluated
    int produced = 0;
    int32_t next = 0;  // the token its decode row feeds
    std::vector<float> logits;
  };
  Live* Find(int64_t id);

  Model& model_;
  StepPlanner planner_;
  std::vector<Live> streams_;  // submission order
  std::vector<SessionChunk> chunks_;
  std::vector<Live*> owners_;
  BatchStepStats last_;
};

}  // namespace flashkv
