// CompressorUpdate: the streaming compressor frontier (docs/DS4_MODEL.md §4.4), the same walk as
// src/backend/cpu/op_compressor.cpp. Channels are independent: for a single token (decode) one
// thread owns channel j (and its second-half partner d + j when windows overlap) and walks the
// chunk's tokens in order; chunks of several tokens take the window-parallel kernels below, which
// compute the same values. The state after a chunk is the same for any chunking.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_state.h"
#include "backend/cuda/device/common.cuh"

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

// Channel j's walk over the chunk's tokens (CompressorKernel; CompressorBatchKernel runs it
// for each session of a step).
__device__ __forceinline__ void CompressorWalk(const CompressorKernelArgs& a, int j) {
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

__global__ void CompressorKernel(CompressorKernelArgs a) {
  CompressorWalk(a, blockIdx.x * blockDim.x + threadIdx.x);
}

// The one-token updates of up to kCompressorSessions sessions of a step in one launch (issue
// #18: a launch per session and compressor is latency-bound; docs/PERFORMANCE.md "Batched
// decode steps: per-kernel profile and the first batched kernels"), each block
// rebuilding its session's CompressorKernelArgs: the same walk, so the same bits. What
// differs per session travels in the kernel arguments (graph-replayable, no table).
struct CompressorSessionArgs {
  float* state_kv;
  float* state_score;
  float* rows;
  int64_t pos0;
  int row;  // the session's token row in the step's projections
};
inline constexpr int kCompressorSessions = 7;  // 80 + 8 + 7 · 40 <= 384 bytes
struct CompressorBatchArgs {
  CompressorKernelArgs base;  // kv / score of row 0; n_tokens 1
  int count;
  CompressorSessionArgs e[kCompressorSessions];
};

// grid (channel blocks, sessions).
__global__ void CompressorBatchKernel(CompressorBatchArgs b) {
  if (int(blockIdx.y) >= b.count) return;
  const CompressorSessionArgs& e = b.e[blockIdx.y];
  CompressorKernelArgs a = b.base;
  const size_t width = size_t(a.overlap ? 2 : 1) * a.d;
  a.kv += size_t(e.row) * width;
  a.score += size_t(e.row) * width;
  a.state_kv = e.state_kv;
  a.state_score = e.state_score;
  a.rows = e.rows;
  a.pos0 = e.pos0;
  CompressorWalk(a, blockIdx.x * blockDim.x + threadIdx.x);
}

// Many-token chunks (prefill): the windows a chunk closes are independent given the inputs
// and the frontier the chunk starts from, so CompressorPoolKernel gives every (closed window,
// channel) its own thread, reading each slot from the chunk's projections or from the old
// frontier, and CompressorFrontierKernel then writes the frontier the walk would leave, one
// thread per (state row, column). Each pooled value is the walk's own formula over the same
// stored slot values (kv, score + ape) in the same order, so rows and state keep the walk's
// bits.
__device__ __forceinline__ int Width(const CompressorKernelArgs& a) {
  return (a.overlap ? 2 : 1) * a.d;
}

// The stored (kv, score) of slot `slot` of window `w`, column `col`, as the walk holds them
// when window w closes: the chunk's input for positions from pos0 on, else the frontier's
// open window (the window open when the chunk started).
__device__ __forceinline__ void OpenSlot(const CompressorKernelArgs& a, int64_t w, int slot,
                                         int col, float* kv, float* sc) {
  const int width = Width(a);
  const int64_t p = w * a.m + slot;
  if (p >= a.pos0) {
    const size_t in = size_t(p - a.pos0) * width + col;
    *kv = a.kv[in];
    *sc = __fadd_rn(a.score[in], Ape(a, width, col, slot));
  } else {
    const size_t row = size_t((a.overlap ? a.m : 0) + slot) * width + col;
    *kv = a.state_kv[row];
    *sc = a.state_score[row];
  }
}

// The first-half slot `slot` of window w - 1 as seen when window w closes (overlap only):
// window w - 1 inside the chunk or open at its start is OpenSlot; one closed before the chunk
// sits in the frontier's previous-window rows.
__device__ __forceinline__ void PrevSlot(const CompressorKernelArgs& a, int64_t w, int slot,
                                         int col, float* kv, float* sc) {
  if (w * a.m > a.pos0) {
    OpenSlot(a, w - 1, slot, col, kv, sc);
  } else {
    const size_t row = size_t(slot) * Width(a) + col;
    *kv = a.state_kv[row];
    *sc = a.state_score[row];
  }
}

// grid (channel blocks, windows closed by the chunk).
__global__ void CompressorPoolKernel(CompressorKernelArgs a) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= a.d) return;
  const int m = a.m;
  const int d = a.d;
  const int64_t w = a.pos0 / m + blockIdx.y;
  float max_score = -INFINITY;
  for (int r = 0; r < m; ++r) {
    float kv, s;
    if (a.overlap) {
      PrevSlot(a, w, r, j, &kv, &s);
      if (s > max_score) max_score = s;
      OpenSlot(a, w, r, d + j, &kv, &s);
      if (s > max_score) max_score = s;
    } else {
      OpenSlot(a, w, r, j, &kv, &s);
      if (s > max_score) max_score = s;
    }
  }
  float* out = a.rows + size_t(w) * d;
  if (max_score <= -INFINITY) {
    out[j] = 0.0f;
    return;
  }
  float denom = 0.0f;
  float sum = 0.0f;
  for (int r = 0; r < m; ++r) {
    if (a.overlap) {
      float kp, sp, kc, sc;
      PrevSlot(a, w, r, j, &kp, &sp);
      OpenSlot(a, w, r, d + j, &kc, &sc);
      const float wp = expf(__fsub_rn(sp, max_score));
      const float wc = expf(__fsub_rn(sc, max_score));
      denom = __fadd_rn(denom, __fadd_rn(wp, wc));
      sum = __fadd_rn(sum, __fmul_rn(wp, kp));
      sum = __fadd_rn(sum, __fmul_rn(wc, kc));
    } else {
      float kv, s;
      OpenSlot(a, w, r, j, &kv, &s);
      const float wt = expf(__fsub_rn(s, max_score));
      denom = __fadd_rn(denom, wt);
      sum = __fadd_rn(sum, __fmul_rn(wt, kv));
    }
  }
  out[j] = denom > 0.0f ? __fdiv_rn(sum, denom) : 0.0f;
}

// grid (column blocks, m slots): after the pool kernel, the frontier the walk leaves. Every
// value depends only on its own (slot, column), so the in-place update needs no ordering
// beyond reading the open slot before overwriting it.
__global__ void CompressorFrontierKernel(CompressorKernelArgs a) {
  const int width = Width(a);
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= width) return;
  const int m = a.m;
  const int slot = blockIdx.y;
  const int64_t end = a.pos0 + a.n_tokens;
  const int64_t open_w = end / m;  // the window open after the chunk
  const bool closed = open_w > a.pos0 / m;
  const size_t open_row = size_t((a.overlap ? m : 0) + slot) * width + col;
  if (closed && a.overlap) {  // previous rows: the last closed window's slots, both halves
    float kv, sc;
    OpenSlot(a, open_w - 1, slot, col, &kv, &sc);
    a.state_kv[size_t(slot) * width + col] = kv;
    a.state_score[size_t(slot) * width + col] = sc;
  }
  const int64_t p = open_w * m + slot;
  if (p >= a.pos0 && p < end) {
    const size_t in = size_t(p - a.pos0) * width + col;
    a.state_kv[open_row] = a.kv[in];
    a.state_score[open_row] = __fadd_rn(a.score[in], Ape(a, width, col, slot));
  } else if (closed) {  // reset by the close, not refilled yet
    a.state_kv[open_row] = 0.0f;
    a.state_score[open_row] = -INFINITY;
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
  if (s_->tiled_prefill && a.n_tokens >= 2) {
    const int64_t n_closed = (a.pos0 + a.n_tokens) / a.ratio - a.pos0 / a.ratio;
    const int width = (a.overlap ? 2 : 1) * a.d_c;
    // Both read the frontier as it was before the chunk; the pool must see it unchanged.
    s_->Launch(cuda::CompressorPoolKernel, dim3(cuda::CeilDiv(a.d_c, 128), unsigned(n_closed)),
               dim3(128), 0, k);
    s_->Launch(cuda::CompressorFrontierKernel, dim3(cuda::CeilDiv(width, 128), a.ratio), dim3(128),
               0, k);
    return;
  }
  s_->Launch(cuda::CompressorKernel, dim3(cuda::CeilDiv(a.d_c, 64)), dim3(64), 0, k);
}

void CudaBackend::CompressorUpdateBatch(const CompressorArgs* args, int n) {
  // One-token updates that share the first one's shape and step buffers run together, in
  // launches of kCompressorSessions; the rest take CompressorUpdate each (sessions' states
  // are disjoint, so the order between them does not matter).
  const CompressorArgs* first = nullptr;
  const CompressorArgs* alone = nullptr;  // the launch's first session
  cuda::CompressorBatchArgs b{};
  auto flush = [&] {
    if (b.count == 1) {
      CompressorUpdate(*alone);
    } else if (b.count > 1) {
      s_->Launch(cuda::CompressorBatchKernel, dim3(cuda::CeilDiv(first->d_c, 64), b.count),
                 dim3(64), 0, b);
    }
    b.count = 0;
  };
  for (int i = 0; i < n; ++i) {
    const CompressorArgs& a = args[i];
    if (a.n_tokens <= 0) continue;
    if (first == nullptr && a.n_tokens == 1) {
      first = &a;
      b.base = cuda::CompressorKernelArgs{a.kv.get(),
                                          a.score.get(),
                                          a.ape->data.get(),
                                          a.ape->type == DType::kF16,
                                          nullptr,
                                          nullptr,
                                          nullptr,
                                          0,
                                          1,
                                          a.ratio,
                                          a.d_c,
                                          a.overlap};
    }
    const int64_t width = int64_t(a.overlap ? 2 : 1) * a.d_c;
    const int64_t dkv = first != nullptr ? a.kv.get() - first->kv.get() : -1;
    const bool joins = first != nullptr && a.n_tokens == 1 && a.ape == first->ape &&
                       a.ratio == first->ratio && a.d_c == first->d_c &&
                       a.overlap == first->overlap && dkv >= 0 && dkv % width == 0 &&
                       a.score.get() - first->score.get() == dkv;
    if (!joins) {
      CompressorUpdate(a);
      continue;
    }
    if (b.count == 0) alone = &a;
    b.e[b.count++] = {a.state_kv.get(), a.state_score.get(), a.rows.get(), a.pos0,
                      int(dkv / width)};
    if (b.count == cuda::kCompressorSessions) flush();
  }
  if (first != nullptr) flush();
}

}  // namespace flashkv
