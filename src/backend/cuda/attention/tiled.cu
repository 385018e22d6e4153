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
#include <algorithm>

#include "backend/cuda/attention/rows.cuh"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device/common.cuh"
#include "backend/cuda/device/imma_ptx.cuh"

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

// grid (row tiles, head tiles, batch tokens). Warp w: heads 32·(w & 1) + hq + 8i, rows
// 16·(w >> 1) + rq + 4j (hq = lane & 7, rq = lane >> 3; i, j < 4): 16 dot products per
// thread, each as four chains. 128 registers, so two CTAs share an SM.
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
  // A warp whose 16 rows (or 32 heads) all lie past the tile's end skips the products (a
  // token's last tile is often short), leaving the SM to the other CTA.
  const bool busy = 16 * (warp >> 1) < n_here && 32 * (warp & 1) < n_heads_here;
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
    __syncthreads();
  }

  float* sc = &sm.q[0][0][0];  // [kTileHeads][kScorePitch]
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float dot =
          __fadd_rn(__fadd_rn(acc[i][j][0], acc[i][j][1]), __fadd_rn(acc[i][j][2], acc[i][j][3]));
      sc[(hb + 8 * i) * kScorePitch + rb + 4 * j] = __fmul_rn(dot, a.scale);
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

// grid (column tiles, head tiles, batch tokens). Warp w, lane: heads 4·hg … 4·hg + 3 with
// hg = 4·(w & 3) + (lane & 3); columns 4·cg … 4·cg + 3 and 64 + 4·cg … with
// cg = 8·(w >> 2) + (lane >> 2).
__global__ void __launch_bounds__(kThreads) AttnValuesKernel(AttnArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  ValueSmem& sm = *reinterpret_cast<ValueSmem*>(smem_raw);
  const int tid = threadIdx.x;
  const int bt = blockIdx.z;
  const int t = a.t0 + bt;
  const int h0 = blockIdx.y * kTileHeads;
  const int c0 = blockIdx.x * kValueCols;
  const int d = a.head_dim;
  const RowSeq seq = Rows(a, t);
  const int n_rows = seq.n_raw + seq.n_comp;
  const int nch = (n_rows + kChunkRows - 1) / kChunkRows;
  const size_t tok_chunk0 = size_t(bt) * a.n_chunks;

  auto load = [&](int stage, int c) {
    const float* wsrc = a.weights + ((tok_chunk0 + c) * kChunkRows) * a.head_stride + h0;
    for (int i = tid; i < kChunkRows * kTileHeads / 4; i += kThreads) {
      const int r = i / (kTileHeads / 4), f = 4 * (i % (kTileHeads / 4));
      CpAsync16(SmemAddr(&sm.w[stage][r][f]), wsrc + size_t(r) * a.head_stride + f);
    }
    const int rows_here = min(kChunkRows, n_rows - c * kChunkRows);
    for (int i = tid; i < kChunkRows * kValueCols / 4; i += kThreads) {
      const int r = i / (kValueCols / 4), f = 4 * (i % (kValueCols / 4));
      if (r < rows_here && c0 + f < d) {
        CpAsync16(SmemAddr(&sm.r[stage][r][f]), RowPtr(a, seq, t, c * kChunkRows + r) + c0 + f);
      }
    }
    if (tid < kTileHeads * 2 / 4) {
      CpAsync16(SmemAddr(&sm.stats[stage][0][0] + 4 * tid),
                a.stats + ((tok_chunk0 + c) * a.head_stride + h0) * 2 + 4 * tid);
    }
    CpAsyncCommit();
  };

  const int warp = tid >> 5, lane = tid & 31;
  const int hl = 4 * (4 * (warp & 3) + (lane & 3));  // first of the thread's 4 heads
  const int cl = 4 * (8 * (warp >> 2) + (lane >> 2));
  const bool col_ok[2] = {c0 + cl < d, c0 + 64 + cl < d};
  const int n_heads_here = min(kTileHeads, a.n_head - h0);

  // The merge's maximum over the sink and every chunk max (fmaxf: any order).
  float m[4], denom[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int h = min(hl + i, n_heads_here - 1);
    m[i] = a.sinks[h0 + h];
    for (int c = 0; c < nch; ++c) {
      m[i] = fmaxf(m[i], a.stats[((tok_chunk0 + c) * a.head_stride + h0 + h) * 2]);
    }
    denom[i] = expf(__fsub_rn(a.sinks[h0 + h], m[i]));
  }
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
    s.Launch(AttnScoresKernel, dim3(row_tiles, head_tiles, n), dim3(kThreads), 0, k);
    s.Launch(AttnValuesKernel, dim3(col_tiles, head_tiles, n), dim3(kThreads),
             unsigned(sizeof(ValueSmem)), k);
  }
}

}  // namespace cuda
}  // namespace flashkv
