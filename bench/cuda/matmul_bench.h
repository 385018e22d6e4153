// flashkv_bench_cuda --matmul: the Q8_0 MatMul kernels alone at DeepSeek V4 Flash's
// projection shapes (random weights on the GPU, random activations), every tensor-core
// tile variant against the dp4a kernels in one process: kernel time per call (from the
// launch profile, the activation quantizer excluded), int8 TOPS and the fraction of the
// H200's dense int8 peak, whether the outputs are bit-identical to the dp4a kernels', a
// token-count sweep for the kernel threshold, and one Flash layer's routed experts
// (MoeExperts) per kernel, dp4a vs tensor cores.
#pragma once

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_backend.h"
#include "util/status.h"

namespace flashkv {

struct MatMulBenchOptions {
  int tokens = 2048;  // prefill chunk
  int reps = 10;      // timed calls per kernel and shape
};

// Prints a table and stores the figures under out["matmul"].
Status RunMatMulBench(CudaBackend& be, const MatMulBenchOptions& o, nlohmann::json& out);

}  // namespace flashkv
