// flashkv_bench_cuda --decode-micro: the decode step of the Flash shape taken apart. At each
// context frontier the prompt is prefilled once, the KV state saved, and then for the unfused
// kernels, the fused ones (CudaBackendOptions::fused) with the tile kernels launched plainly,
// and the fused ones with overlapped launches (CudaBackendOptions::pdl) in turn the state is
// restored and decoded: tokens/s with graphs on, the greedy tokens and logits (which must be
// bit-identical between the three), and a profiled pass (graphs off) giving kernels per token and
// per layer and, per kernel, launches, µs and achieved GB/s of the weight bytes it reads, next to a
// device-to-device copy timed in the same run. With verify_rows, the time of a speculative
// verify step of each row count, its rows' logits compared with the one-token steps'.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_backend.h"
#include "model/model.h"
#include "util/status.h"

namespace flashkv {

struct DecodeMicroOptions {
  std::vector<int> frontiers;
  int chunk = 2048;
  int warmup_steps = 8;
  int decode_steps = 32;
  int profile_steps = 4;
  double bytes_per_token = 0;  // what one decoded token reads (the HBM bound's numerator)
  // Speculative decoding's verify step (engine/speculative.h) at each frontier, in the
  // default mode: a KvCheckpoint capture, one forward of r rows (the greedy continuation,
  // every row's logits) and the restore, for each r here (e.g. 1,2,3,4 = drafts of 0–3).
  std::vector<int> verify_rows;
};

// "MatVecKernel<Q8_0, true, 1>" from a kernel's mangled name (shared with batch_micro.cpp).
std::string ShortName(const std::string& mangled);

// Every section of the state as copies to `host` (read them to save, write them to restore).
std::vector<HostCopy> Sections(KvState& st, std::vector<std::vector<float>>& host);

// Prints the tables and stores the figures under out["decode_micro"].
Status RunDecodeMicro(CudaBackend& be, Model& model, const DecodeMicroOptions& o,
                      nlohmann::json& out);

}  // namespace flashkv
