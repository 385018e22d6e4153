// Attention for prefill chunks: the same chunked sink softmax as attention/attention.cu, tiled so
// that a block multiplies many query rows against each K/V row it loads. DS4 has one KV
// head, so the query rows that share a token's visible rows are its n_head heads: a tile is
// 64 heads × 64 rows (two chunks) of one token.
//   AttnScoresKernel: q·row per (head, row) with the one-token kernel's four chains (dims
//     ≡ 0…3 mod 4, summed (p0 + p1) + (p2 + p3)) and scale, then per (head, chunk) the
//     chunk max, the weights exp(s − m_c) and their xor-tree sum over the chunk's 32 lanes,
//     written to scratch (weights, stats).
//   AttnValuesKernel: per (token, 64 heads, 128 columns) the weighted row sum of every chunk
//     (sequential over the chunk's rows), folded in chunk order with exp(m_c − m) and the
//     sink exactly as AttnMergeKernel folds the one-token kernel's partial vectors, which
//     therefore never go to memory.
// Every output is formed from the same terms in the same order as the one-token path, so
// chunked prefill keeps decode's bits (CudaOpsTest.AttentionTiledIsBitIdenticalToDecode).
//
// The fast float path (State::fast_terms > 0, docs/CUDA.md "Numerics: exact and fast") keeps
// the tiles, the chunked softmax and the merge, and moves both products onto the TF32 tensor
// cores (mma.m16n8k8, device/tf32_mma.cuh): the scores as Q·Rᵀ with each query value as two
// TF32 terms, the values as P·R per chunk with each weight exp(s − m_c) as two terms. The rows
// are F16-rounded in official numerics, so exact in TF32; what differs from the exact kernels
// is the left-out ~2^-22 of each query value and weight and the tensor cores' summation
// order. A token's outputs still depend only on its own rows (CudaFastTest).
#include <algorithm>

#include "backend/cuda/attention/rows.cuh"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device/common.cuh"
#include "backend/cuda/device/imma_ptx.cuh"
#include "backend/cuda/device/tf32_mma.cuh"

namespace flashkv {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kTileHeads = 64;
constexpr int kTileRows = 2 * kChunkRows;
constexpr int kSliceDims = 32;          // head dims per pipeline stage
constexpr int kPitch = kSliceDims + 4;  // floats per staged row: conflict-free float4 reads
constexpr int kScorePitch = kTileRows + 1;
constexpr int kValueCols = 128;

struct ScoreSmem {
  float q[2][kTileHeads][kPitch];
  float r[2][kTileRows][kPitch];
};
static_assert(sizeof(float) * kTileHeads * kScorePitch <= sizeof(ScoreSmem),
              "the scores reuse the staging buffers");

// The fast path's products of one 32-dim slice: warp w takes heads 16·(w & 3) … + 15 and rows
// 32·(w >> 2) … + 31 (four 8-row MMA tiles), accumulating into acc[nt][0..3] in the MMA's C
// layout (device/tf32_mma.cuh).
__device__ __forceinline__ void ScoreSliceTf32(const ScoreSmem& sm, int st, int warp, int lane,
                                               float (&acc)[4][4]) {
  const int g = lane >> 2, t = lane & 3;
  const int h = 16 * (warp & 3) + g;
  const int rb = 32 * (warp >> 2) + g;
#pragma unroll
  for (int kk = 0; kk < kSliceDims; kk += 8) {
    uint32_t hi[4], lo[4];
    SplitTf32(sm.q[st][h][kk + t], hi[0], lo[0]);
    SplitTf32(sm.q[st][h + 8][kk + t], hi[1], lo[1]);
    SplitTf32(sm.q[st][h][kk + t + 4], hi[2], lo[2]);
    SplitTf32(sm.q[st][h + 8][kk + t + 4], hi[3], lo[3]);
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const uint32_t b0 = __float_as_uint(sm.r[st][rb + 8 * nt][kk + t]);
      const uint32_t b1 = __float_as_uint(sm.r[st][rb + 8 * nt][kk + t + 4]);
      MmaTf32(lo, b0, b1, acc[nt]);
      MmaTf32(hi, b0, b1, acc[nt]);
    }
  }
}

// grid (row tiles, head tiles, batch tokens). Exact (kFast false): warp w takes heads
// 32·(w & 1) + hq + 8i, rows 16·(w >> 1) + rq + 4j (hq = lane & 7, rq = lane >> 3; i, j < 4):
// 16 dot products per thread, each as four chains. 128 registers, so two CTAs share an SM.
// Fast: ScoreSliceTf32's tiles.
template <bool kFast>
__global__ void __launch_bounds__(kThreads, 2) AttnScoresKernel(AttnArgs a) {
  __shared__ __align__(16) ScoreSmem sm;
  __shared__ const float* row_ptr[kTileRows];
  const int tid = threadIdx.x;
  const int bt = blockIdx.z;
  const int t = a.t0 + bt;
  const int h0 = blockIdx.y * kTileHeads;
  const RowSeq seq = Rows(a, t);
  const int n_rows = seq.n_raw + seq.n_comp;
  const int r0 = blockIdx.x * kTileRows;
  if (r0 >= n_rows) return;
  const int n_here = min(kTileRows, n_rows - r0);
  const int n_heads_here = min(kTileHeads, a.n_head - h0);
  const int d = a.head_dim;
  if (tid < n_here) row_ptr[tid] = RowPtr(a, seq, t, r0 + tid);
  __syncthreads();

  // Heads and rows past the tile's end are not loaded: their products are never read.
  const float* q_tok = a.q + (size_t(t) * a.n_head + h0) * d;
  auto load = [&](int stage, int c0) {
    for (int i = tid; i < kTileHeads * kSliceDims / 4; i += kThreads) {
      const int h = i / (kSliceDims / 4), f = 4 * (i % (kSliceDims / 4));
      if (h < n_heads_here) CpAsync16(SmemAddr(&sm.q[stage][h][f]), q_tok + size_t(h) * d + c0 + f);
      if (h < n_here) CpAsync16(SmemAddr(&sm.r[stage][h][f]), row_ptr[h] + c0 + f);
    }
    CpAsyncCommit();
  };

  const int warp = tid >> 5, lane = tid & 31;
  const int hb = 32 * (warp & 1) + (lane & 7);
  const int rb = 16 * (warp >> 1) + (lane >> 3);
  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int k = 0; k < 4; ++k) acc[i][j][k] = 0.0f;
    }
  }
  float facc[4][4];
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
    for (int k = 0; k < 4; ++k) facc[nt][k] = 0.0f;
  }
  // A warp whose rows (or heads) all lie past the tile's end skips the products (a token's
  // last tile is often short), leaving the SM to the other CTA.
  const bool busy = kFast ? 32 * (warp >> 2) < n_here && 16 * (warp & 3) < n_heads_here
                          : 16 * (warp >> 1) < n_here && 32 * (warp & 1) < n_heads_here;
  const int n_slices = d / kSliceDims;
  load(0, 0);
  for (int s = 0; s < n_slices; ++s) {
    if (s + 1 < n_slices) {
      load((s + 1) & 1, (s + 1) * kSliceDims);
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    __syncthreads();
    const int st = s & 1;
    if (!busy) {
      __syncthreads();
      continue;
    }
    if constexpr (kFast) {
      ScoreSliceTf32(sm, st, warp, lane, facc);
    } else {
#pragma unroll
      for (int c = 0; c < kSliceDims; c += 4) {
        float4 qv[4], rv[4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          qv[i] = *reinterpret_cast<const float4*>(&sm.q[st][hb + 8 * i][c]);
#pragma unroll
        for (int j = 0; j < 4; ++j)
          rv[j] = *reinterpret_cast<const float4*>(&sm.r[st][rb + 4 * j][c]);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            acc[i][j][0] = __fmaf_rn(qv[i].x, rv[j].x, acc[i][j][0]);
            acc[i][j][1] = __fmaf_rn(qv[i].y, rv[j].y, acc[i][j][1]);
            acc[i][j][2] = __fmaf_rn(qv[i].z, rv[j].z, acc[i][j][2]);
            acc[i][j][3] = __fmaf_rn(qv[i].w, rv[j].w, acc[i][j][3]);
          }
        }
      }
    }
    __syncthreads();
  }

  float* sc = &sm.q[0][0][0];  // [kTileHeads][kScorePitch]
  if constexpr (kFast) {
    const int h = 16 * (warp & 3) + (lane >> 2), r = 32 * (warp >> 2) + 2 * (lane & 3);
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        sc[(h + 8 * (k >> 1)) * kScorePitch + r + 8 * nt + (k & 1)] =
            __fmul_rn(facc[nt][k], a.scale);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float dot =
            __fadd_rn(__fadd_rn(acc[i][j][0], acc[i][j][1]), __fadd_rn(acc[i][j][2], acc[i][j][3]));
        sc[(hb + 8 * i) * kScorePitch + rb + 4 * j] = __fmul_rn(dot, a.scale);
      }
    }
  }
  __syncthreads();
  // One warp per (head, chunk), lane = row of the chunk, as in AttnPartialKernel.
  const int chunk0 = blockIdx.x * 2;
  for (int pair = warp; pair < kTileHeads * 2; pair += kThreads / 32) {
    const int h = pair >> 1, ch = pair & 1;
    const int chunk_rows = n_here - ch * kChunkRows;
    if (h >= n_heads_here || chunk_rows <= 0) continue;
    float* srow = sc + h * kScorePitch + ch * kChunkRows;
    const bool valid = lane < chunk_rows;
    const float score = valid ? srow[lane] : -INFINITY;
    const float m = WarpMax(score);
    const float w = valid ? expf(__fsub_rn(score, m)) : 0.0f;
    const float sum = WarpSum(w);
    srow[lane] = w;
    if (lane == 0) {
      float* st = a.stats + ((size_t(bt) * a.n_chunks + chunk0 + ch) * a.head_stride + h0 + h) * 2;
      st[0] = m;
      st[1] = sum;
    }
  }
  __syncthreads();
  for (int i = tid; i < kTileRows * kTileHeads; i += kThreads) {
    const int r = i / kTileHeads, h = i % kTileHeads;
    if (r < n_here && h < n_heads_here) {
      a.weights[((size_t(bt) * a.n_chunks + chunk0) * kChunkRows + r) * a.head_stride + h0 + h] =
          sc[h * kScorePitch + r];
    }
  }
}

struct ValueSmem {
  float w[2][kChunkRows][kTileHeads];
  float r[2][kChunkRows][kValueCols];
  float stats[2][kTileHeads][2];
};

// What a values CTA works on (grid: column tiles, head tiles, batch tokens): its token, its
// 64 heads and 128 columns, the token's rows and their chunks.
struct ValueTile {
  int t, h0, c0, n_rows, nch;
  size_t tok_chunk0;
  RowSeq seq;
};
__device__ __forceinline__ ValueTile ValueTileOf(const AttnArgs& a) {
  ValueTile v;
  v.t = a.t0 + int(blockIdx.z);
  v.h0 = blockIdx.y * kTileHeads;
  v.c0 = blockIdx.x * kValueCols;
  v.seq = Rows(a, v.t);
  v.n_rows = v.seq.n_raw + v.seq.n_comp;
  v.nch = (v.n_rows + kChunkRows - 1) / kChunkRows;
  v.tok_chunk0 = size_t(blockIdx.z) * a.n_chunks;
  return v;
}

// Chunk c's weights, rows (those past the chunk's end and columns past head_dim are not
// loaded) and stats into stage `stage` of either kernel's shared memory, one cp.async group.
template <typename Smem>
__device__ __forceinline__ void LoadValueStage(const AttnArgs& a, const ValueTile& v, Smem& sm,
                                               int stage, int c) {
  const int tid = threadIdx.x;
  const float* wsrc = a.weights + ((v.tok_chunk0 + c) * kChunkRows) * a.head_stride + v.h0;
  for (int i = tid; i < kChunkRows * kTileHeads / 4; i += kThreads) {
    const int r = i / (kTileHeads / 4), f = 4 * (i % (kTileHeads / 4));
    CpAsync16(SmemAddr(&sm.w[stage][r][f]), wsrc + size_t(r) * a.head_stride + f);
  }
  const int rows_here = min(kChunkRows, v.n_rows - c * kChunkRows);
  for (int i = tid; i < kChunkRows * kValueCols / 4; i += kThreads) {
    const int r = i / (kValueCols / 4), f = 4 * (i % (kValueCols / 4));
    if (r < rows_here && v.c0 + f < a.head_dim) {
      CpAsync16(SmemAddr(&sm.r[stage][r][f]), RowPtr(a, v.seq, v.t, c * kChunkRows + r) + v.c0 + f);
    }
  }
  if (tid < kTileHeads * 2 / 4) {
    CpAsync16(SmemAddr(&sm.stats[stage][0][0] + 4 * tid),
              a.stats + ((v.tok_chunk0 + c) * a.head_stride + v.h0) * 2 + 4 * tid);
  }
  CpAsyncCommit();
}

// The merge's start for head h of the tile (clamped to the last real one): m = the maximum of
// the sink and every chunk max (fmaxf: any order), denom = exp(sink − m).
__device__ __forceinline__ void MergeStart(const AttnArgs& a, const ValueTile& v, int h, float& m,
                                           float& denom) {
  m = a.sinks[v.h0 + h];
  for (int c = 0; c < v.nch; ++c) {
    m = fmaxf(m, a.stats[((v.tok_chunk0 + c) * a.head_stride + v.h0 + h) * 2]);
  }
  denom = expf(__fsub_rn(a.sinks[v.h0 + h], m));
}

// grid (column tiles, head tiles, batch tokens). Warp w, lane: heads 4·hg … 4·hg + 3 with
// hg = 4·(w & 3) + (lane & 3); columns 4·cg … 4·cg + 3 and 64 + 4·cg … with
// cg = 8·(w >> 2) + (lane >> 2).
__global__ void __launch_bounds__(kThreads) AttnValuesKernel(AttnArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  ValueSmem& sm = *reinterpret_cast<ValueSmem*>(smem_raw);
  const ValueTile v = ValueTileOf(a);
  const int tid = threadIdx.x;
  const int t = v.t, h0 = v.h0, c0 = v.c0, d = a.head_dim, n_rows = v.n_rows, nch = v.nch;
  auto load = [&](int stage, int c) { LoadValueStage(a, v, sm, stage, c); };

  const int warp = tid >> 5, lane = tid & 31;
  const int hl = 4 * (4 * (warp & 3) + (lane & 3));  // first of the thread's 4 heads
  const int cl = 4 * (8 * (warp >> 2) + (lane >> 2));
  const bool col_ok[2] = {c0 + cl < d, c0 + 64 + cl < d};
  const int n_heads_here = min(kTileHeads, a.n_head - h0);

  float m[4], denom[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) MergeStart(a, v, min(hl + i, n_heads_here - 1), m[i], denom[i]);
  float out[4][8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int k = 0; k < 8; ++k) out[i][k] = 0.0f;
  }

  load(0, 0);
  for (int c = 0; c < nch; ++c) {
    if (c + 1 < nch) {
      load((c + 1) & 1, c + 1);
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    __syncthreads();
    const int st = c & 1;
    const int rows_here = min(kChunkRows, n_rows - c * kChunkRows);
    float acc[4][8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[i][k] = 0.0f;
    }
    for (int r = 0; r < rows_here; ++r) {
      const float4 wv = *reinterpret_cast<const float4*>(&sm.w[st][r][hl]);
      const float4 ra = *reinterpret_cast<const float4*>(&sm.r[st][r][cl]);
      const float4 rb = *reinterpret_cast<const float4*>(&sm.r[st][r][64 + cl]);
      const float wh[4] = {wv.x, wv.y, wv.z, wv.w};
      const float rv[8] = {ra.x, ra.y, ra.z, ra.w, rb.x, rb.y, rb.z, rb.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int k = 0; k < 8; ++k) acc[i][k] = __fmaf_rn(wh[i], rv[k], acc[i][k]);
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float mc = sm.stats[st][hl + i][0];
      const float sum = sm.stats[st][hl + i][1];
      const float f = sum > 0.0f ? expf(__fsub_rn(mc, m[i])) : 0.0f;
      if (f != 0.0f) {
        denom[i] = __fadd_rn(denom[i], __fmul_rn(sum, f));
#pragma unroll
        for (int k = 0; k < 8; ++k) out[i][k] = __fmaf_rn(acc[i][k], f, out[i][k]);
      }
    }
    __syncthreads();  // the next load overwrites this stage
  }

#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (hl + i >= n_heads_here) continue;
    const float inv = __fdiv_rn(1.0f, denom[i]);
    float* o = a.out + (size_t(t) * a.n_head + h0 + hl + i) * d + c0;
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      if (!col_ok[g]) continue;
      float4 v;
      v.x = __fmul_rn(out[i][4 * g], inv);
      v.y = __fmul_rn(out[i][4 * g + 1], inv);
      v.z = __fmul_rn(out[i][4 * g + 2], inv);
      v.w = __fmul_rn(out[i][4 * g + 3], inv);
      *reinterpret_cast<float4*>(o + 64 * g + cl) = v;
    }
  }
}

// The fast path's values: per (token, 64 heads, 128 columns) and chunk, P·R on the TF32 tensor
// cores — P the chunk's weights [heads × 32 rows] as two TF32 terms, R its rows [32 × columns]
// — then folded in chunk order with exp(m_c − m) and the sink as AttnValuesKernel folds them.
// Warp w: heads 16·(w & 3) … + 15, columns 64·(w >> 2) … + 63 (eight 8-column MMA tiles).
// Pitches of 72 and 136 words (≡ 8 mod 32) keep the fragment loads conflict-free.
constexpr int kFastWPitch = kTileHeads + 8;
constexpr int kFastRPitch = kValueCols + 8;
struct FastValueSmem {
  float w[2][kChunkRows][kFastWPitch];
  float r[2][kChunkRows][kFastRPitch];
  float stats[2][kTileHeads][2];
};

__global__ void __launch_bounds__(kThreads) AttnValuesFastKernel(AttnArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  FastValueSmem& sm = *reinterpret_cast<FastValueSmem*>(smem_raw);
  const ValueTile v = ValueTileOf(a);
  const int tid = threadIdx.x;
  const int t = v.t, h0 = v.h0, c0 = v.c0, d = a.head_dim, n_rows = v.n_rows, nch = v.nch;
  auto load = [&](int stage, int c) { LoadValueStage(a, v, sm, stage, c); };

  const int warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, tq = lane & 3;
  const int hw = 16 * (warp & 3);   // the warp's first head
  const int cw = 64 * (warp >> 2);  // the warp's first column
  const int n_heads_here = min(kTileHeads, a.n_head - h0);
  const bool busy = hw < n_heads_here && c0 + cw < d;

  // The thread's two heads: hw + g and hw + g + 8.
  float m[2], denom[2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
    MergeStart(a, v, min(hw + g + 8 * i, n_heads_here - 1), m[i], denom[i]);
  float out[8][4];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
    for (int k = 0; k < 4; ++k) out[nt][k] = 0.0f;
  }

  load(0, 0);
  for (int c = 0; c < nch; ++c) {
    if (c + 1 < nch) {
      load((c + 1) & 1, c + 1);
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    __syncthreads();
    const int st = c & 1;
    const int rows_here = min(kChunkRows, n_rows - c * kChunkRows);
    if (busy) {
      float acc[8][4];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
        for (int k = 0; k < 4; ++k) acc[nt][k] = 0.0f;
      }
#pragma unroll
      for (int kk = 0; kk < kChunkRows; kk += 8) {
        // Rows past the chunk's end were not loaded: their weights and values read as zero.
        const bool k0 = kk + tq < rows_here, k1 = kk + tq + 4 < rows_here;
        uint32_t hi[4], lo[4];
        SplitTf32(k0 ? sm.w[st][kk + tq][hw + g] : 0.0f, hi[0], lo[0]);
        SplitTf32(k0 ? sm.w[st][kk + tq][hw + g + 8] : 0.0f, hi[1], lo[1]);
        SplitTf32(k1 ? sm.w[st][kk + tq + 4][hw + g] : 0.0f, hi[2], lo[2]);
        SplitTf32(k1 ? sm.w[st][kk + tq + 4][hw + g + 8] : 0.0f, hi[3], lo[3]);
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          const int col = cw + 8 * nt + g;
          const uint32_t b0 = k0 ? __float_as_uint(sm.r[st][kk + tq][col]) : 0u;
          const uint32_t b1 = k1 ? __float_as_uint(sm.r[st][kk + tq + 4][col]) : 0u;
          MmaTf32(lo, b0, b1, acc[nt]);
          MmaTf32(hi, b0, b1, acc[nt]);
        }
      }
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int hl = hw + g + 8 * i;
        const float mc = sm.stats[st][hl][0];
        const float sum = sm.stats[st][hl][1];
        const float f = sum > 0.0f ? expf(__fsub_rn(mc, m[i])) : 0.0f;
        if (f != 0.0f) {
          denom[i] = __fadd_rn(denom[i], __fmul_rn(sum, f));
#pragma unroll
          for (int nt = 0; nt < 8; ++nt) {
            out[nt][2 * i] = __fmaf_rn(acc[nt][2 * i], f, out[nt][2 * i]);
            out[nt][2 * i + 1] = __fmaf_rn(acc[nt][2 * i + 1], f, out[nt][2 * i + 1]);
          }
        }
      }
    }
    __syncthreads();  // the next load overwrites this stage
  }

  if (!busy) return;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int hl = hw + g + 8 * i;
    if (hl >= n_heads_here) continue;
    const float inv = __fdiv_rn(1.0f, denom[i]);
    float* o = a.out + (size_t(t) * a.n_head + h0 + hl) * d + c0;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const int col = cw + 8 * nt + 2 * tq;
      if (c0 + col >= d) continue;
      float2 v;
      v.x = __fmul_rn(out[nt][2 * i], inv);
      v.y = __fmul_rn(out[nt][2 * i + 1], inv);
      *reinterpret_cast<float2*>(o + col) = v;
    }
  }
}

}  // namespace

void LaunchAttentionTiled(CudaBackend::State& s, const AttentionArgs& a, int n_chunks) {
  const int head_tiles = (a.n_head + kTileHeads - 1) / kTileHeads;
  const int head_stride = head_tiles * kTileHeads;
  const size_t per_token = size_t(n_chunks) * head_stride * (kChunkRows + 2);
  const int batch =
      int(std::max<size_t>(1, std::min<size_t>(a.n_tokens, (size_t(64) << 20) / per_token)));
  auto* scratch =
      static_cast<float*>(s.Scratch(CudaScratch::kAttnPartial, sizeof(float) * per_token * batch));
  if (scratch == nullptr) return;
  static const cudaError_t raised = AllowSharedMemory(AttnValuesKernel, int(sizeof(ValueSmem)));
  if (raised != cudaSuccess) return s.FailCuda("attention: shared memory attribute", raised);
  static const cudaError_t raised_fast =
      AllowSharedMemory(AttnValuesFastKernel, int(sizeof(FastValueSmem)));
  if (raised_fast != cudaSuccess) {
    return s.FailCuda("attention: shared memory attribute", raised_fast);
  }
  // The fast float path takes prefill chunks only (backend.h kFastMinTokens).
  const bool fast = s.fast_terms > 0 && a.n_tokens >= kFastMinTokens;
  const int row_tiles = (n_chunks * kChunkRows + kTileRows - 1) / kTileRows;
  const int col_tiles = (a.head_dim + kValueCols - 1) / kValueCols;
  for (int t0 = 0; t0 < a.n_tokens; t0 += batch) {
    const int n = std::min(batch, a.n_tokens - t0);
    AttnArgs k{};
    k.q = a.q.get();
    k.kv_new = a.kv_new.get();
    k.ring = a.ring.get();
    k.comp = a.comp_rows.get();
    k.selected = a.selected.get();
    k.sinks = reinterpret_cast<const float*>(a.sinks->data.get());
    k.weights = scratch;
    k.stats = scratch + size_t(n) * n_chunks * kChunkRows * head_stride;
    k.out = a.out.get();
    k.pos0 = a.pos0;
    k.t0 = t0;
    k.n_chunks = n_chunks;
    k.head_stride = head_stride;
    k.n_head = a.n_head;
    k.head_dim = a.head_dim;
    k.n_swa = a.n_swa;
    k.ratio = a.ratio;
    k.top_k = a.top_k;
    k.scale = a.scale;
    if (fast) {
      s.Launch(AttnScoresKernel<true>, dim3(row_tiles, head_tiles, n), dim3(kThreads), 0, k);
      s.Launch(AttnValuesFastKernel, dim3(col_tiles, head_tiles, n), dim3(kThreads),
               unsigned(sizeof(FastValueSmem)), k);
    } else {
      s.Launch(AttnScoresKernel<false>, dim3(row_tiles, head_tiles, n), dim3(kThreads), 0, k);
      s.Launch(AttnValuesKernel, dim3(col_tiles, head_tiles, n), dim3(kThreads),
               unsigned(sizeof(ValueSmem)), k);
    }
  }
}

}  // namespace cuda
}  // namespace flashkv
