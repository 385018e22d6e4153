// CompressorUpdate: the streaming compressor frontier (docs/DS4_MODEL.md §4.4), the same walk as
// src/backend/cpu/op_compressor.cpp. Channels are independent: one thread owns channel j
// (and its second-half partner d + j when windows overlap) and walks the chunk's tokens in
// order, so the state after a chunk is the same for any chunking.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_state.h"

namespace flashkv {
namespace cuda {
namespace {

struct CompressorKernelArgs {
  const float* kv;     // [n_tokens, width]
  const float* score;  // [n_tokens, width]
  const uint8_t* ape;  // [ratio, width] F16 or F32
  bool ape_f16;
  float* state_kv;     // [c·m, width]
  float* state_score;  // [c·m, width]
  float* rows;         // [cap, d_c]
  int64_t pos0;
  int n_tokens;
  int m;
  int d;
  bool overlap;
};

__device__ __forceinline__ float Ape(const CompressorKernelArgs& a, int width, int col, int slot) {
  const size_t idx = size_t(slot) * width + col;
  return a.ape_f16 ? HalfBitsToFloat(reinterpret_cast<const uint16_t*>(a.ape)[idx])
                   : reinterpret_cast<const float*>(a.ape)[idx];
}

__global__ void CompressorKernel(CompressorKernelArgs a) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= a.d) return;
  const int m = a.m;
  const int d = a.d;
  const int width = (a.overlap ? 2 : 1) * d;
  const int open0 = a.overlap ? m : 0;
  float* skv = a.state_kv;
  float* ssc = a.state_score;
  for (int i = 0; i < a.n_tokens; ++i) {
    const int64_t pos = a.pos0 + i;
    const int slot = int(pos % m);
    const size_t row = size_t(open0 + slot) * width;
    const size_t in = size_t(i) * width;
    skv[row + j] = a.kv[in + j];
    ssc[row + j] = __fadd_rn(a.score[in + j], Ape(a, width, j, slot));
    if (a.overlap) {
      skv[row + d + j] = a.kv[in + d + j];
      ssc[row + d + j] = __fadd_rn(a.score[in + d + j], Ape(a, width, d + j, slot));
    }
    if ((pos + 1) % m != 0) continue;

    float max_score = -INFINITY;
    for (int r = 0; r < m; ++r) {
      if (a.overlap) {
        const float sp = ssc[size_t(r) * width + j];
        const float sc = ssc[size_t(m + r) * width + d + j];
        if (sp > max_score) max_score = sp;
        if (sc > max_score) max_score = sc;
      } else {
        const float s = ssc[size_t(r) * width + j];
        if (s > max_score) max_score = s;
      }
    }
    float* out = a.rows + size_t(pos / m) * d;
    if (max_score <= -INFINITY) {
      out[j] = 0.0f;
    } else {
      float denom = 0.0f;
      float sum = 0.0f;
      for (int r = 0; r < m; ++r) {
        if (a.overlap) {
          const float wp = expf(__fsub_rn(ssc[size_t(r) * width + j], max_score));
          const float wc = expf(__fsub_rn(ssc[size_t(m + r) * width + d + j], max_score));
          denom = __fadd_rn(denom, __fadd_rn(wp, wc));
          sum = __fadd_rn(sum, __fmul_rn(wp, skv[size_t(r) * width + j]));
          sum = __fadd_rn(sum, __fmul_rn(wc, skv[size_t(m + r) * width + d + j]));
        } else {
          const float w = expf(__fsub_rn(ssc[size_t(r) * width + j], max_score));
          denom = __fadd_rn(denom, w);
          sum = __fadd_rn(sum, __fmul_rn(w, skv[size_t(r) * width + j]));
        }
      }
      out[j] = denom > 0.0f ? __fdiv_rn(sum, denom) : 0.0f;
    }
    // Advance this thread's columns of the frontier.
    for (int r = 0; r < m; ++r) {
      const size_t open = size_t(open0 + r) * width;
      const size_t prev = size_t(r) * width;
      for (int h = 0; h < (a.overlap ? 2 : 1); ++h) {
        const int col = j + h * d;
        if (a.overlap) {
          skv[prev + col] = skv[open + col];
          ssc[prev + col] = ssc[open + col];
        }
        skv[open + col] = 0.0f;
        ssc[open + col] = -INFINITY;
      }
    }
  }
}

}  // namespace
}  // namespace cuda

void CudaBackend::CompressorUpdate(const CompressorArgs& a) {
  if (a.n_tokens <= 0) return;
  cuda::CompressorKernelArgs k{a.kv.get(),
                               a.score.get(),
                               a.ape->data.get(),
                               a.ape->type == DType::kF16,
                               a.state_kv.get(),
                               a.state_score.get(),
                               a.rows.get(),
                               a.pos0,
                               a.n_tokens,
                               a.ratio,
                               a.d_c,
                               a.overlap};
  s_->Launch(cuda::CompressorKernel, dim3(cuda::CeilDiv(a.d_c, 64)), dim3(64), 0, k);
}

}  // namespace flashkv
