// flashkv_bench_cuda --batch-micro: the batched decode step (Model::ForwardBatch over R sessions,
// one token row each, issue #18) taken apart. R sessions are prefilled once to staggered
// positions (frontier + 8·i, distinct prompts) and their KV states saved; then for each batch
// size R the first R states are restored and decoded together: aggregate tokens/s with graphs
// on, a profiled pass (graphs off) with kernels per step and per-kernel µs per step, and the
// greedy tokens of session 0, which must be the same in every batch (the batch-invariance
// contract at Flash's shape).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_backend.h"
#include "model/model.h"
#include "util/status.h"

namespace flashkv {

struct BatchMicroOptions {
  std::vector<int> batches = {1, 4, 16, 64};
  int frontier = 512;
  int chunk = 2048;
  int warmup_steps = 4;
  int decode_steps = 16;
  int profile_steps = 2;
  // The rows' logits in page-locked memory (as the engine keeps them) or, false, pageable
  // (the engine before PinLogits: staged copies).
  bool pinned_logits = true;
};

// Prints the tables and stores the figures under out["batch_micro"].
Status RunBatchMicro(CudaBackend& be, Model& model, const BatchMicroOptions& o,
                     nlohmann::json& out);

}  // namespace flashkv
