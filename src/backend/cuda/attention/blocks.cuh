// The blocks of the one-token attention kernels (op_attention.cu: AttnPartialKernel,
// AttnMergeKernel), as device functions so the kernels of one session's chunk and those of a
// step's sessions together (attention_batch.cu) run the very same arithmetic per block. See
// op_attention.cu for the chunking and the float order. Internal to backend/cuda/.
#pragma once

#include "backend/cuda/attention/rows.cuh"
#include "backend/cuda/device/common.cuh"

namespace flashkv::cuda {

constexpr int kHeadGroup = 16;

// One block of AttnPartialKernel: chunk `chunk` of token a.t0 + bt for head group `group`;
// kHeadGroup·32 threads, one warp per head of the group, lane = row of the chunk.
__device__ __forceinline__ void AttnPartialBlock(const AttnArgs& a, int chunk, int group, int bt) {
  extern __shared__ float smem[];
  const int d = a.head_dim;
  const int stride = d + 1;
  float* qs = smem;                      // [kHeadGroup, d]
  float* rs = qs + kHeadGroup * d;       // [kChunkRows, d + 1]
  float* ws = rs + kChunkRows * stride;  // [kHeadGroup, kChunkRows]
  const int t = a.t0 + bt;
  const int h0 = group * kHeadGroup;
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

// Factors per merge block in shared memory: n_chunks rounded up to 4, because the unrolled
// fold loads them four at a time (compute-sanitizer saw a 12-byte read past one chunk).
__host__ __device__ inline int MergeSlots(int n_chunks) {
  return (n_chunks + 3) / 4 * 4;
}

// One block of AttnMergeKernel: merge the chunks of (token a.t0 + bt, head h) in chunk order.
// The per-chunk factors exp(m_c − m) are formed once in shared memory.
__device__ __forceinline__ void AttnMergeBlock(const AttnArgs& a, int h, int bt) {
  extern __shared__ float factor[];  // [slots] factors, then [slots] weighted sums
  float* term = factor + MergeSlots(a.n_chunks);
  __shared__ float scratch[32];
  __shared__ float sh_inv;
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

// Threads of an AttnPartialBlock, and its dynamic shared memory for head_dim d.
inline constexpr int kAttnPartialThreads = kHeadGroup * 32;
__host__ __device__ inline unsigned AttnPartialSmem(int d) {
  return unsigned(sizeof(float)) *
         unsigned(kHeadGroup * d + kChunkRows * (d + 1) + kHeadGroup * kChunkRows);
}

// Chunks of kChunkRows rows of the most rows any token of `a` can see (the CPU sizes its
// scratch the same way).
inline int AttnChunksFor(const AttentionArgs& a) {
  const int64_t last_pos = a.pos0 + a.n_tokens - 1;
  int64_t max_comp = 0;
  if (a.ratio > 0) {
    max_comp = (last_pos + 1) / a.ratio;
    if (a.selected) max_comp = max_comp < a.top_k ? max_comp : a.top_k;
  }
  const int64_t raw = a.n_swa < last_pos + 1 ? a.n_swa : last_pos + 1;
  return int((raw + max_comp + kChunkRows - 1) / kChunkRows);
}

}  // namespace flashkv::cuda
