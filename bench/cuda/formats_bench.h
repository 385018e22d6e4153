// flashkv_bench_cuda --formats: the one-token (decode) matvec of every GGUF block type the
// CUDA backend runs, at Flash's width (4096 inputs) over a matrix well past the L2 cache, and
// one token's routed experts (MoeExperts, top-6 of 16 experts of Flash's shape):
// kernel time per call from the launch profile (the activation quantizer excluded), the
// weight bytes streamed per second and their fraction of the H200's 4.8 TB/s HBM bound, with
// q8 activations (the default) and fp32 ones (act-quant off). Random block bytes (every byte
// pattern is a valid block of these types); the values are not looked at.
#pragma once

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_backend.h"
#include "util/status.h"

namespace flashkv {

struct FormatsBenchOptions {
  int rows = 262144;  // output rows of the [4096, rows] matrix (Q8_0: 1.1 GB, IQ1_S: 210 MB)
  int reps = 20;      // timed calls per type and activation mode
};

// Prints a table and stores the figures under out["formats"].
Status RunFormatsBench(CudaBackend& be, const FormatsBenchOptions& o, nlohmann::json& out);

}  // namespace flashkv
