// flashkv_bench_cuda --fast-spread N: the fast float path's distance from the exact one at
// Flash's width, beside the spread the issue bounds it by (docs/CUDA.md "Numerics: exact and
// fast"). One N-token random prompt through the same random:flash model three ways — CUDA
// exact (the reference), CUDA fast (FloatPath::kFast, and with one TF32 term), and the CPU
// backend (exact numerics, the same generated weights) — every position's logits kept:
// teacher-forced top-1 agreement with the reference and the mean KL(reference ‖ run).
#pragma once

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_backend.h"
#include "model/model.h"
#include "model/random_model.h"
#include "util/status.h"

namespace flashkv {

struct FastSpreadOptions {
  int prompt_tokens = 512;
  int cpu_threads = 0;  // <= 0: one per core
};

// `model` is the CUDA model of `spec` (official/q8); the CPU twin is generated here. Prints the
// table and stores it under out["fast_spread"].
Status RunFastSpread(CudaBackend& be, Model& model, const RandomModelSpec& spec,
                     const FastSpreadOptions& o, nlohmann::json& out);

}  // namespace flashkv
