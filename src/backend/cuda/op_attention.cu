// Attention: sink attention of every (token, head) over its visible rows (docs/DS4_MODEL.md §4.3) —
// the raw window oldest first, then the compressed rows (selected ids ascending, or all visible) —
// split into fixed chunks of kChunkRows rows of that sequence. A block scores one chunk for
// kHeadGroup heads (the query heads share the single KV head, so the rows are loaded once), keeping
// the chunk max, exp-sum and weighted row sum; a second kernel merges a token's chunks in order
// with the sink. The chunking is a function of the token's own row sequence, so the float order
// never depends on the batch; decoding gets one block per (chunk, head group) instead of one per
// head. The merge rescales by exp(m_c − m), so values differ from the CPU's single pass by rounding
// only.
#include <algorithm>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_state.h"

namespace flashkv {
namespace cuda {
namespace {

constexpr int kChunkRows = 32;
constexpr int kHeadGroup = 16;

struct AttnArgs {
  const float* q;           // [n_tokens, n_head, head_dim]
  const float* kv_new;      // [n_tokens, head_dim]
  const float* ring;        // [n_swa, head_dim]
  const float* comp;        // [*, head_dim]
  const int32_t* selected;  // [n_tokens, top_k] or null
  const float* sinks;       // [n_head]
  float* partial;           // [batch, n_chunks, n_head, head_dim + 2]
  float* out;               // [n_tokens, n_head, head_dim]
  int64_t pos0;             // position of token 0 of the op
  int t0;                   // first token of this batch
  int n_chunks;             // chunks per token in the partial layout
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

__device__ __forceinline__ RowSeq Rows(const AttnArgs& a, int t) {
  RowSeq s;
  s.pos = a.pos0 + t;
  s.first = s.pos - a.n_swa + 1 > 0 ? s.pos - a.n_swa + 1 : 0;
  s.n_raw = int(s.pos - s.first + 1);
  s.n_comp = 0;
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

// grid (n_chunks, head groups, batch tokens); block kHeadGroup·32 threads... one warp per
// head of the group, lane = row of the chunk.
__global__ void AttnPartialKernel(AttnArgs a) {
  extern __shared__ float smem[];
  const int d = a.head_dim;
  const int stride = d + 1;
  float* qs = smem;                      // [kHeadGroup, d]
  float* rs = qs + kHeadGroup * d;       // [kChunkRows, d + 1]
  float* ws = rs + kChunkRows * stride;  // [kHeadGroup, kChunkRows]
  const int bt = blockIdx.z;
  const int t = a.t0 + bt;
  const int chunk = blockIdx.x;
  const int h0 = blockIdx.y * kHeadGroup;
  const int n_heads_here = min(kHeadGroup, a.n_head - h0);
  const RowSeq seq = Rows(a, t);
  const int n_rows = seq.n_raw + seq.n_comp;
  const int r0 = chunk * kChunkRows;
  const size_t part_stride = size_t(d) + 2;
  float* part = a.partial + (size_t(bt) * a.n_chunks + chunk) * a.n_head * part_stride;
  if (r0 >= n_rows) {  // empty chunk: m = -inf, sum 0; the merge skips it
    for (int h = threadIdx.x; h < n_heads_here; h += blockDim.x) {
      part[size_t(h0 + h) * part_stride] = -INFINITY;
      part[size_t(h0 + h) * part_stride + 1] = 0.0f;
    }
    return;
  }
  const int n_here = min(kChunkRows, n_rows - r0);
  __shared__ const float* row_ptr[kChunkRows];
  if (threadIdx.x < n_here) row_ptr[threadIdx.x] = RowPtr(a, seq, t, r0 + threadIdx.x);
  for (int i = threadIdx.x; i < n_heads_here * d; i += blockDim.x) {
    qs[i] = a.q[(size_t(t) * a.n_head + h0) * d + i];
  }
  __syncthreads();
#pragma unroll 4
  for (int i = threadIdx.x; i < n_here * d; i += blockDim.x) {
    const int r = i / d, c = i % d;
    rs[r * stride + c] = row_ptr[r][c];
  }
  __syncthreads();
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  if (warp < n_heads_here) {
    float score = -INFINITY;
    if (lane < n_here) {
      const float* qh = qs + warp * d;
      const float* row = rs + lane * stride;
      float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f, p3 = 0.0f;  // four chains, summed in order
      int c = 0;
      for (; c + 4 <= d; c += 4) {
        p0 = __fmaf_rn(qh[c], row[c], p0);
        p1 = __fmaf_rn(qh[c + 1], row[c + 1], p1);
        p2 = __fmaf_rn(qh[c + 2], row[c + 2], p2);
        p3 = __fmaf_rn(qh[c + 3], row[c + 3], p3);
      }
      for (; c < d; ++c) p0 = __fmaf_rn(qh[c], row[c], p0);
      const float dot = __fadd_rn(__fadd_rn(p0, p1), __fadd_rn(p2, p3));
      score = __fmul_rn(dot, a.scale);
    }
    const float m = WarpMax(score);
    const float w = lane < n_here ? expf(__fsub_rn(score, m)) : 0.0f;
    const float sum = WarpSum(w);
    ws[warp * kChunkRows + lane] = w;
    if (lane == 0) {
      part[size_t(h0 + warp) * part_stride] = m;
      part[size_t(h0 + warp) * part_stride + 1] = sum;
    }
  }
  __syncthreads();
  for (int o = threadIdx.x; o < n_heads_here * d; o += blockDim.x) {
    const int h = o / d, c = o % d;
    const float* wh = ws + h * kChunkRows;
    float acc = 0.0f;
    for (int r = 0; r < n_here; ++r) acc = __fmaf_rn(wh[r], rs[r * stride + c], acc);
    part[size_t(h0 + h) * part_stride + 2 + c] = acc;
  }
}

// grid (n_head, batch tokens): merge the chunks of one (token, head) in chunk order. The
// per-chunk factors exp(m_c − m) are formed once in shared memory.
__global__ void AttnMergeKernel(AttnArgs a) {
  extern __shared__ float factor[];  // [n_chunks] factors, then [n_chunks] weighted sums
  float* term = factor + a.n_chunks;
  __shared__ float scratch[32];
  __shared__ float sh_inv;
  const int h = blockIdx.x;
  const int bt = blockIdx.y;
  const int t = a.t0 + bt;
  const int d = a.head_dim;
  const size_t part_stride = size_t(d) + 2;
  const float* part =
      a.partial + size_t(bt) * a.n_chunks * a.n_head * part_stride + size_t(h) * part_stride;
  const size_t chunk_stride = size_t(a.n_head) * part_stride;
  const float sink = a.sinks[h];
  float m = sink;
  for (int c = threadIdx.x; c < a.n_chunks; c += blockDim.x) m = fmaxf(m, part[c * chunk_stride]);
  m = BlockMax(m, scratch);
  for (int c = threadIdx.x; c < a.n_chunks; c += blockDim.x) {
    const float sc = part[c * chunk_stride + 1];
    const float f = sc > 0.0f ? expf(__fsub_rn(part[c * chunk_stride], m)) : 0.0f;
    factor[c] = f;
    term[c] = __fmul_rn(sc, f);
  }
  __syncthreads();
  if (threadIdx.x == 0) {  // the denominator in chunk order
    float denom = expf(__fsub_rn(sink, m));
    for (int c = 0; c < a.n_chunks; ++c) {
      if (factor[c] != 0.0f) denom = __fadd_rn(denom, term[c]);
    }
    sh_inv = __fdiv_rn(1.0f, denom);
  }
  __syncthreads();
  const float inv = sh_inv;
  float* o = a.out + (size_t(t) * a.n_head + h) * d;
  for (int col = threadIdx.x; col < d; col += blockDim.x) {
    float acc = 0.0f;
#pragma unroll 4
    for (int c = 0; c < a.n_chunks; ++c) {
      const float f = factor[c];
      if (f != 0.0f) acc = __fmaf_rn(part[c * chunk_stride + 2 + col], f, acc);
    }
    o[col] = __fmul_rn(acc, inv);
  }
}

}  // namespace
}  // namespace cuda

void CudaBackend::Attention(const AttentionArgs& a) {
  if (a.n_tokens <= 0) return;
  // Most rows any token of the op can see (the CPU sizes its scratch the same way).
  const int64_t last_pos = a.pos0 + a.n_tokens - 1;
  int64_t max_comp = 0;
  if (a.ratio > 0) {
    max_comp = (last_pos + 1) / a.ratio;
    if (a.selected) max_comp = std::min<int64_t>(max_comp, a.top_k);
  }
  const int64_t max_rows = std::min<int64_t>(a.n_swa, last_pos + 1) + max_comp;
  const int n_chunks = int((max_rows + cuda::kChunkRows - 1) / cuda::kChunkRows);
  const size_t per_token = size_t(n_chunks) * a.n_head * (size_t(a.head_dim) + 2);
  const int batch =
      int(std::max<size_t>(1, std::min<size_t>(a.n_tokens, (size_t(64) << 20) / per_token)));
  auto* partial = static_cast<float*>(
      s_->Scratch(CudaScratch::kAttnPartial, sizeof(float) * per_token * batch));
  if (partial == nullptr) return;
  const int threads = cuda::kHeadGroup * 32;
  const unsigned smem = unsigned(sizeof(float)) *
                        (cuda::kHeadGroup * a.head_dim + cuda::kChunkRows * (a.head_dim + 1) +
                         cuda::kHeadGroup * cuda::kChunkRows);
  if (smem > 48 * 1024) {
    static bool raised = false;  // the attribute is per function, once per process
    if (!raised) {
      cudaFuncSetAttribute(cuda::AttnPartialKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           200 * 1024);
      raised = true;
    }
  }
  const int groups = (a.n_head + cuda::kHeadGroup - 1) / cuda::kHeadGroup;
  for (int t0 = 0; t0 < a.n_tokens; t0 += batch) {
    const int n = std::min(batch, a.n_tokens - t0);
    cuda::AttnArgs k{a.q.get(),        a.kv_new.get(),
                     a.ring.get(),     a.comp_rows.get(),
                     a.selected.get(), reinterpret_cast<const float*>(a.sinks->data.get()),
                     partial,          a.out.get(),
                     a.pos0,           t0,
                     n_chunks,         a.n_head,
                     a.head_dim,       a.n_swa,
                     a.ratio,          a.top_k,
                     a.scale};
    s_->Launch(cuda::AttnPartialKernel, dim3(n_chunks, groups, n), dim3(threads), smem, k);
    s_->Launch(cuda::AttnMergeKernel, dim3(a.n_head, n), dim3(128),
               unsigned(2 * sizeof(float) * n_chunks), k);
  }
}

}  // namespace flashkv
