// Attention: sink attention of every (token, head) over its visible rows (docs/DS4_MODEL.md §4.3),
// in ds4's order (each q·kv summed sequentially): raw window rows oldest first (earlier positions
// from the ring, this chunk's from kv_new), then compressed rows by ascending id; max-subtracted
// exps with the sink in the denominator; weights accumulated into the output, scaled by
// 1/denominator.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_math.h"
#include "backend/cpu/cpu_parallel.h"

namespace flashkv {

void CpuBackend::Attention(const AttentionArgs& a) {
  const int d = a.head_dim;
  const float* sinks = reinterpret_cast<const float*>(a.sinks->data.get());
  // Rows a token can see: up to n_swa raw + its compressed rows.
  const int64_t last_pos = a.pos0 + a.n_tokens - 1;
  int64_t max_comp = 0;
  if (a.ratio > 0) {
    max_comp = (last_pos + 1) / a.ratio;
    if (a.selected) max_comp = std::min<int64_t>(max_comp, a.top_k);
  }
  const size_t per_thread = size_t(a.n_swa + max_comp);
  const int threads = n_threads();
  float* score_base = reinterpret_cast<float*>(Grow(scores_, sizeof(float) * per_thread * threads));
  // Row pointers are gathered once per task into the thread's area after the scores.
  const float** row_base = reinterpret_cast<const float**>(
      Grow(attn_rows_, sizeof(const float*) * per_thread * threads));

  Parallel(size_t(a.n_tokens) * a.n_head, 1, [&](size_t i0, size_t i1, int thread) {
    float* score = score_base + size_t(thread) * per_thread;
    const float** rows = row_base + size_t(thread) * per_thread;
    for (size_t idx = i0; idx < i1; ++idx) {
      const int i = int(idx / a.n_head);
      const int h = int(idx % a.n_head);
      const int64_t pos = a.pos0 + i;
      // Gather the visible rows in order.
      int n_rows = 0;
      const int64_t first = std::max<int64_t>(0, pos - a.n_swa + 1);
      for (int64_t p = first; p <= pos; ++p) {
        rows[n_rows++] = p < a.pos0 ? a.ring.get() + size_t(p % a.n_swa) * d
                                    : a.kv_new.get() + size_t(p - a.pos0) * d;
      }
      if (a.ratio > 0) {
        const int64_t n_vis = (pos + 1) / a.ratio;
        if (a.selected) {
          const int32_t* sel = a.selected.get() + size_t(i) * a.top_k;
          for (int s = 0; s < a.top_k && sel[s] >= 0; ++s) {
            rows[n_rows++] = a.comp_rows.get() + size_t(sel[s]) * d;
          }
        } else {
          for (int64_t c = 0; c < n_vis; ++c) rows[n_rows++] = a.comp_rows.get() + size_t(c) * d;
        }
      }

      const float* qh = a.q.get() + (size_t(i) * a.n_head + h) * d;
      float max_score = sinks[h];
      cpu::DotsSequential(qh, rows, n_rows, d, score);
      for (int r = 0; r < n_rows; ++r) {
        score[r] *= a.scale;
        if (score[r] > max_score) max_score = score[r];
      }
      float* oh = a.out.get() + (size_t(i) * a.n_head + h) * d;
      std::memset(oh, 0, sizeof(float) * d);
      float denom = std::exp(sinks[h] - max_score);
      for (int r = 0; r < n_rows; ++r) {
        const float weight = std::exp(score[r] - max_score);
        denom += weight;
        cpu::Axpy(oh, rows[r], weight, d);
      }
      const float inv = 1.0f / denom;
      for (int c = 0; c < d; ++c) oh[c] *= inv;
    }
  });
}

void CpuBackend::StoreWindowRows(DevPtr<const float> kv_new, int64_t pos0, int n_tokens, int n_swa,
                                 int head_dim, DevPtr<float> ring) {
  const int start = std::max(0, n_tokens - n_swa);
  for (int i = start; i < n_tokens; ++i) {
    std::memcpy(ring.get() + size_t((pos0 + i) % n_swa) * head_dim,
                kv_new.get() + size_t(i) * head_dim, sizeof(float) * head_dim);
  }
}

}  // namespace flashkv
