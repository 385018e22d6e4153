// IndexerTopK: the lightning indexer's choice of compressed rows (docs/DS4_MODEL.md §4.5).
// score(t, w) = Σ_h (weights[t, h] · scale) · max(0, rows[w] · q[t, h]); the top_k rows by score
// are selected, an equal score going to the lower row id (ds4: repeated argmax with strict >). A
// token that sees n_vis = (pos + 1) / ratio <= top_k rows selects all of them without scoring.
// Output ids are ascending so attention visits rows in id order.
#include <algorithm>
#include <cstdint>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_math.h"
#include "backend/cpu/cpu_parallel.h"

namespace flashkv {
namespace {

// "a ranks before b": higher score, or the same score and a lower id.
struct Entry {
  float score;
  int32_t id;
};
inline bool Better(const Entry& a, const Entry& b) {
  return a.score > b.score || (a.score == b.score && a.id < b.id);
}

}  // namespace

void CpuBackend::IndexerTopK(const IndexerArgs& a) {
  const int k = a.top_k;
  for (int i = 0; i < a.n_tokens; ++i) {
    int32_t* sel = a.selected.get() + size_t(i) * k;
    const int n_vis = int((a.pos0 + i + 1) / a.ratio);
    if (n_vis <= k) {
      for (int s = 0; s < k; ++s) sel[s] = s < n_vis ? s : -1;
      continue;
    }
    float* scores = reinterpret_cast<float*>(Grow(scores_, sizeof(float) * n_vis));
    const float* q = a.q.get() + size_t(i) * a.n_heads * a.dim;
    const float* w = a.weights.get() + size_t(i) * a.n_heads;
    // Head query pointers, for the sequential dots of one row against every head.
    const float** heads =
        reinterpret_cast<const float**>(Grow(idx_heads_, sizeof(const float*) * a.n_heads));
    for (int h = 0; h < a.n_heads; ++h) heads[h] = q + size_t(h) * a.dim;
    float* dots_base =
        reinterpret_cast<float*>(Grow(idx_dots_, sizeof(float) * a.n_heads * n_threads()));
    Parallel(size_t(n_vis), 32, [&](size_t c0, size_t c1, int thread) {
      float* dots = dots_base + size_t(a.n_heads) * thread;
      for (size_t c = c0; c < c1; ++c) {
        // dot(row, q_h) summed in row order (ds4's dot_f32(kv, q)).
        cpu::DotsSequential(a.rows.get() + c * a.dim, heads, a.n_heads, a.dim, dots);
        float s = 0.0f;
        for (int h = 0; h < a.n_heads; ++h) {
          const float dot = dots[h] < 0.0f ? 0.0f : dots[h];
          s += dot * (w[h] * a.weight_scale);
        }
        scores[c] = s;
      }
    });
    // Keep the k best in a heap whose top is the worst kept entry.
    Entry* heap = reinterpret_cast<Entry*>(Grow(topk_, sizeof(Entry) * k));
    auto worse_on_top = [](const Entry& x, const Entry& y) { return Better(x, y); };
    int size = 0;
    for (int c = 0; c < n_vis; ++c) {
      const Entry e{scores[c], c};
      if (size < k) {
        heap[size++] = e;
        std::push_heap(heap, heap + size, worse_on_top);
      } else if (Better(e, heap[0])) {
        std::pop_heap(heap, heap + size, worse_on_top);
        heap[size - 1] = e;
        std::push_heap(heap, heap + size, worse_on_top);
      }
    }
    for (int s = 0; s < k; ++s) sel[s] = heap[s].id;
    std::sort(sel, sel + k);
  }
}

}  // namespace flashkv
