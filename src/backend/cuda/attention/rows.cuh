// What both attention paths (attention/attention.cu: one-token chunks, attention/tiled.cu: prefill
// tiles) share: the argument struct, a token's visible row sequence — the raw window oldest
// first, then the compressed rows (selected ids ascending, or all visible) — and the fixed
// 32-row chunks of that sequence whose partial softmax states are merged in chunk order.
// The chunks depend only on the token's own sequence, so both paths form the same terms in
// the same order.
// Must not: hold kernels.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_state.h"

namespace flashkv::cuda {

inline constexpr int kChunkRows = 32;

struct AttnArgs {
  const float* q;           // [n_tokens, n_head, head_dim]
  const float* kv_new;      // [n_tokens, head_dim]
  const float* ring;        // [n_swa, head_dim]
  const float* comp;        // [*, head_dim]
  const int32_t* selected;  // [n_tokens, top_k] or null
  const float* sinks;       // [n_head]
  float* partial;           // one-token path: [batch, n_chunks, n_head, head_dim + 2]
  float* weights;           // tiled: [batch, n_chunks, kChunkRows, head_stride] exp(s - m_c)
  float* stats;             // tiled: [batch, n_chunks, head_stride, 2] (m_c, Σ_c)
  float* out;               // [n_tokens, n_head, head_dim]
  int64_t pos0;             // position of token 0 of the op
  int t0;                   // first token of this batch
  int n_chunks;             // chunks per token in the partial / weights layout
  int head_stride;          // tiled: heads per row of weights and stats (whole head tiles)
  int n_head;
  int head_dim;
  int n_swa;
  int ratio;
  int top_k;
  float scale;
};

// The visible row sequence of token t: n_raw window rows then n_comp compressed rows.
struct RowSeq {
  int64_t pos;
  int64_t first;  // first raw position
  int n_raw;
  int n_comp;
};

// The window part of token t's row sequence (n_comp 0): what Rows and the one-token block
// (attention/blocks.cuh), which finds the compressed count its own way, share.
__device__ __forceinline__ RowSeq WindowRows(const AttnArgs& a, int t) {
  RowSeq s;
  s.pos = a.pos0 + t;
  s.first = s.pos - a.n_swa + 1 > 0 ? s.pos - a.n_swa + 1 : 0;
  s.n_raw = int(s.pos - s.first + 1);
  s.n_comp = 0;
  return s;
}

__device__ __forceinline__ RowSeq Rows(const AttnArgs& a, int t) {
  RowSeq s = WindowRows(a, t);
  if (a.ratio > 0) {
    if (a.selected != nullptr) {
      // Selections are ascending ids then -1 padding: binary search for the first -1.
      const int32_t* sel = a.selected + size_t(t) * a.top_k;
      int lo = 0, hi = a.top_k;
      while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (sel[mid] >= 0) {
          lo = mid + 1;
        } else {
          hi = mid;
        }
      }
      s.n_comp = lo;
    } else {
      s.n_comp = int((s.pos + 1) / a.ratio);
    }
  }
  return s;
}

__device__ __forceinline__ const float* RowPtr(const AttnArgs& a, const RowSeq& s, int t, int r) {
  if (r < s.n_raw) {
    const int64_t p = s.first + r;
    return p < a.pos0 ? a.ring + size_t(p % a.n_swa) * a.head_dim
                      : a.kv_new + size_t(p - a.pos0) * a.head_dim;
  }
  const int j = r - s.n_raw;
  const int id = a.selected != nullptr ? a.selected[size_t(t) * a.top_k + j] : j;
  return a.comp + size_t(id) * a.head_dim;
}

// Prefill chunks of at least this many tokens take the tiled kernels (when they are on and
// head_dim is a multiple of 32).
inline constexpr int kAttnTiledMinTokens = 32;

// The tiled attention (attention/tiled.cu) for `a`'s shape: scores, chunk states and the
// ordered merge with the sink for n_tokens tokens, in batches that fit its scratch.
void LaunchAttentionTiled(CudaBackend::State& s, const AttentionArgs& a, int n_chunks);

}  // namespace flashkv::cuda
