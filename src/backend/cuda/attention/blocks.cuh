// The blocks of the one-token attention kernels (attention/attention.cu: AttnPartialKernel,
// AttnMergeKernel), as device functions so the kernels of one session's chunk and those of a
// step's sessions together (attention/batch.cu) run the very same arithmetic per block. See
// attention/attention.cu for the chunking and the float order. Internal to backend/cuda/.
//
// Why the block is shaped as it is (issue #29; Nsight Compute on the H100, docs/PERFORMANCE.md
// "Decode: one-token attention"): with 16 heads a block, a decode token of Flash's shape got
// 16–80 blocks on 132 SMs, and each spent most of its time waiting — on a chain of 9
// dependent loads (the binary search for the selection's length), on row loads issued four
// at a time, and on two shared-memory loads per multiply-add. Now: 8 heads a block (twice the
// blocks), the selection's length and the chunk's ids found in one pass of loads, every row
// and query copied with all its 16-byte pieces in flight at once, and each score reading a
// row's four values with one 16-byte load shared by two heads. Each term is formed as before
// (four chains over the columns, summed in pairs; the chunk's max, exp-sum and weighted sum in
// row order), so the bits are those of the tiled prefill kernels (attention/tiled.cu).
#pragma once

#include "backend/cuda/attention/rows.cuh"
#include "backend/cuda/device/common.cuh"
#include "backend/cuda/device/imma_ptx.cuh"

namespace flashkv::cuda {

constexpr int kHeadGroup = 8;
// Threads of an AttnPartialBlock: each warp scores the chunk for two heads (lane = row).
inline constexpr int kAttnPartialThreads = 128;
static_assert(kAttnPartialThreads / 32 * 2 == kHeadGroup && kChunkRows == 32);
// Row stride in shared memory: d + 4 floats, so the 16-byte loads of one column quad from 32
// rows fall in distinct banks within each quarter warp.
inline constexpr int kAttnRowPad = 4;

// The length of token t's selection (its ids ascending, then -1 padding: the first -1, as
// Rows' binary search finds it) in one pass of loads by the whole block, and the ids of rows
// [first, first + kChunkRows) of the compressed part kept in ids[]. Called by every thread.
__device__ __forceinline__ int SelectedCount(const AttnArgs& a, int t, int first, int* ids,
                                             int* shared_min) {
  const int32_t* sel = a.selected + size_t(t) * a.top_k;
  if (threadIdx.x == 0) *shared_min = a.top_k;
  __syncthreads();
  int local = a.top_k;
  for (int i = threadIdx.x; i < a.top_k; i += blockDim.x) {
    const int32_t id = __ldg(sel + i);
    if (id < 0 && i < local) local = i;
    if (i >= first && i < first + kChunkRows) ids[i - first] = id;
  }
  if (local < a.top_k) atomicMin(shared_min, local);
  __syncthreads();
  return *shared_min;
}

// Whether rows and queries can be copied in 16-byte pieces.
__device__ __forceinline__ bool AttnAligned(const AttnArgs& a) {
  const uintptr_t any = reinterpret_cast<uintptr_t>(a.q) | reinterpret_cast<uintptr_t>(a.kv_new) |
                        reinterpret_cast<uintptr_t>(a.ring) | reinterpret_cast<uintptr_t>(a.comp);
  return a.head_dim % 4 == 0 && any % 16 == 0;
}

// One block of AttnPartialKernel: chunk `chunk` of token a.t0 + bt for head group `group`;
// kAttnPartialThreads threads. Writes each head's (m_c, Σ_c, weighted row sum) to a.partial.
__device__ __forceinline__ void AttnPartialBlock(const AttnArgs& a, int chunk, int group, int bt) {
  extern __shared__ __align__(16) float smem[];
  __shared__ const float* row_ptr[kChunkRows];
  __shared__ int chunk_ids[kChunkRows];
  __shared__ int sel_count;
  const int d = a.head_dim;
  const int stride = d + kAttnRowPad;
  float* qs = smem;                      // [kHeadGroup, d]
  float* rs = qs + kHeadGroup * d;       // [kChunkRows, d + kAttnRowPad]
  float* ws = rs + kChunkRows * stride;  // [kHeadGroup, kChunkRows]
  const int t = a.t0 + bt;
  const int h0 = group * kHeadGroup;
  const int n_heads_here = min(kHeadGroup, a.n_head - h0);
  const bool vec = AttnAligned(a);
  const float* qsrc = a.q + (size_t(t) * a.n_head + h0) * d;
  // The queries first: their copy overlaps the selection pass below.
  if (vec) {
    for (int i = threadIdx.x; i < n_heads_here * d / 4; i += blockDim.x) {
      CpAsync16(SmemAddr(qs + 4 * i), qsrc + 4 * i);
    }
    CpAsyncCommit();
  } else {
    for (int i = threadIdx.x; i < n_heads_here * d; i += blockDim.x) qs[i] = qsrc[i];
  }

  RowSeq seq = WindowRows(a, t);
  const int r0 = chunk * kChunkRows;
  if (a.ratio > 0) {
    seq.n_comp = a.selected != nullptr ? SelectedCount(a, t, r0 - seq.n_raw, chunk_ids, &sel_count)
                                       : int((seq.pos + 1) / a.ratio);
  }
  const int n_rows = seq.n_raw + seq.n_comp;
  const size_t part_stride = size_t(d) + 2;
  float* part = a.partial + (size_t(bt) * a.n_chunks + chunk) * a.n_head * part_stride;
  if (r0 >= n_rows) {  // empty chunk: m = -inf, sum 0; the merge skips it
    if (vec) CpAsyncWait<0>();
    for (int h = threadIdx.x; h < n_heads_here; h += blockDim.x) {
      part[size_t(h0 + h) * part_stride] = -INFINITY;
      part[size_t(h0 + h) * part_stride + 1] = 0.0f;
    }
    return;
  }
  const int n_here = min(kChunkRows, n_rows - r0);
  if (threadIdx.x < n_here) {
    const int r = r0 + threadIdx.x;
    const float* p;
    if (r < seq.n_raw) {
      p = RowPtr(a, seq, t, r);
    } else {
      const int j = r - seq.n_raw;
      const int id = a.selected != nullptr ? chunk_ids[threadIdx.x] : j;
      p = a.comp + size_t(id) * d;
    }
    row_ptr[threadIdx.x] = p;
  }
  __syncthreads();
  if (vec) {
    const int quads = d / 4;
    for (int i = threadIdx.x; i < n_here * quads; i += blockDim.x) {
      const int r = i / quads, c = i - r * quads;
      CpAsync16(SmemAddr(rs + r * stride + 4 * c), row_ptr[r] + 4 * c);
    }
    CpAsyncCommit();
    CpAsyncWait<0>();
  } else {
    for (int i = threadIdx.x; i < n_here * d; i += blockDim.x) {
      const int r = i / d, c = i % d;
      rs[r * stride + c] = row_ptr[r][c];
    }
  }
  __syncthreads();

  // Scores: warp w takes heads 2w and 2w + 1 of the group, lane = row; four chains over the
  // columns (c ≡ 0, 1, 2, 3 mod 4), summed as (p0 + p1) + (p2 + p3).
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  float score[2] = {-INFINITY, -INFINITY};
  if (lane < n_here) {
    const float* row = rs + lane * stride;
    const float* qa = qs + (2 * warp) * d;
    const float* qb = qa + d;
    float pa[4] = {0.0f, 0.0f, 0.0f, 0.0f}, pb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int c = 0;
    if (vec) {
#pragma unroll 4
      for (; c + 4 <= d; c += 4) {
        const float4 rv = *reinterpret_cast<const float4*>(row + c);
        const float4 av = *reinterpret_cast<const float4*>(qa + c);
        const float4 bv = *reinterpret_cast<const float4*>(qb + c);
        pa[0] = __fmaf_rn(av.x, rv.x, pa[0]);
        pa[1] = __fmaf_rn(av.y, rv.y, pa[1]);
        pa[2] = __fmaf_rn(av.z, rv.z, pa[2]);
        pa[3] = __fmaf_rn(av.w, rv.w, pa[3]);
        pb[0] = __fmaf_rn(bv.x, rv.x, pb[0]);
        pb[1] = __fmaf_rn(bv.y, rv.y, pb[1]);
        pb[2] = __fmaf_rn(bv.z, rv.z, pb[2]);
        pb[3] = __fmaf_rn(bv.w, rv.w, pb[3]);
      }
    } else {
      for (; c + 4 <= d; c += 4) {
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          pa[k] = __fmaf_rn(qa[c + k], row[c + k], pa[k]);
          pb[k] = __fmaf_rn(qb[c + k], row[c + k], pb[k]);
        }
      }
    }
    for (; c < d; ++c) {
      pa[0] = __fmaf_rn(qa[c], row[c], pa[0]);
      pb[0] = __fmaf_rn(qb[c], row[c], pb[0]);
    }
    score[0] = __fmul_rn(__fadd_rn(__fadd_rn(pa[0], pa[1]), __fadd_rn(pa[2], pa[3])), a.scale);
    score[1] = __fmul_rn(__fadd_rn(__fadd_rn(pb[0], pb[1]), __fadd_rn(pb[2], pb[3])), a.scale);
  }
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int h = 2 * warp + k;
    const float m = WarpMax(score[k]);
    const float w = lane < n_here ? expf(__fsub_rn(score[k], m)) : 0.0f;
    const float sum = WarpSum(w);
    ws[h * kChunkRows + lane] = w;
    if (lane == 0 && h < n_heads_here) {
      part[size_t(h0 + h) * part_stride] = m;
      part[size_t(h0 + h) * part_stride + 1] = sum;
    }
  }
  __syncthreads();

  // Weighted row sums in row order: a thread takes four adjacent columns of every head.
  if (vec) {
    for (int c = 4 * threadIdx.x; c < d; c += 4 * blockDim.x) {
      float acc[kHeadGroup][4];
#pragma unroll
      for (int h = 0; h < kHeadGroup; ++h) acc[h][0] = acc[h][1] = acc[h][2] = acc[h][3] = 0.0f;
      for (int r = 0; r < n_here; ++r) {
        const float4 rv = *reinterpret_cast<const float4*>(rs + r * stride + c);
#pragma unroll
        for (int h = 0; h < kHeadGroup; ++h) {
          const float w = ws[h * kChunkRows + r];
          acc[h][0] = __fmaf_rn(w, rv.x, acc[h][0]);
          acc[h][1] = __fmaf_rn(w, rv.y, acc[h][1]);
          acc[h][2] = __fmaf_rn(w, rv.z, acc[h][2]);
          acc[h][3] = __fmaf_rn(w, rv.w, acc[h][3]);
        }
      }
#pragma unroll
      for (int h = 0; h < kHeadGroup; ++h) {
        if (h < n_heads_here) {
          float* o = part + size_t(h0 + h) * part_stride + 2 + c;
          o[0] = acc[h][0];
          o[1] = acc[h][1];
          o[2] = acc[h][2];
          o[3] = acc[h][3];
        }
      }
    }
  } else {
    for (int o = threadIdx.x; o < n_heads_here * d; o += blockDim.x) {
      const int h = o / d, c = o % d;
      const float* wh = ws + h * kChunkRows;
      float acc = 0.0f;
      for (int r = 0; r < n_here; ++r) acc = __fmaf_rn(wh[r], rs[r * stride + c], acc);
      part[size_t(h0 + h) * part_stride + 2 + c] = acc;
    }
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

// Dynamic shared memory of an AttnPartialBlock for head_dim d.
__host__ __device__ inline unsigned AttnPartialSmem(int d) {
  return unsigned(sizeof(float)) *
         unsigned(kHeadGroup * d + kChunkRows * (d + kAttnRowPad) + kHeadGroup * kChunkRows);
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
