// IndexerTopK (docs/DS4_MODEL.md §4.5), as src/backend/cpu/op_indexer.cpp decides it:
//   score(t, w) = Σ_h (weights[t, h] · scale) · max(0, rows[w] · q[t, h])
// then the top_k rows by score, an equal score going to the lower row id, written in
// ascending id order; a token that sees n_vis <= top_k rows selects all of them.
// Two kernels per token batch: a score kernel and IndexSelectKernel (one block per token: a
// 4-pass radix select finds the k-th largest score exactly, then an ordered compaction
// keeps every larger score and the lowest ids among the equal ones). The score kernel is
// IndexScoreKernel (a block scores 32 rows of one token) for decode and short batches, and
// IndexScoreTiledKernel (a block scores 128 rows × 32 tokens, reading each row and each
// token's queries once per tile) for prefill chunks; both form every score as the same
// sequence of fused multiply-adds and adds, so the selection does not depend on the batch.
// On the fast float path (State::fast_terms > 0, docs/CUDA.md "Numerics: exact and fast") the
// tiled kernel forms each head's dots on the TF32 tensor cores instead: official numerics
// leave the queries and the rows FP4 values times a power of two (Hadamard + FP4, then F16),
// exact in TF32, so one term each and only the summation order differs.
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_state.h"
#include "backend/cuda/device/common.cuh"
#include "backend/cuda/device/imma_ptx.cuh"
#include "backend/cuda/device/tf32_mma.cuh"

namespace flashkv {
namespace cuda {
namespace {

constexpr int kScoreRows = 32;
constexpr int kHeadGroups = 8;
constexpr int kSelectThreads = 256;  // one thread per radix digit
constexpr int kTiledRows = 128;
constexpr int kTiledTokens = 32;
constexpr int kTiledThreads = 256;
constexpr int kTiledMinTokens = 16;  // smaller batches keep the one-token kernel

struct IndexScoreArgs {
  const float* q;        // [n_tokens, n_heads, dim]
  const float* weights;  // [n_tokens, n_heads]
  const float* rows;     // [n_rows, dim]
  float* scores;         // [sub tokens, score_stride]
  uint64_t score_stride;
  float weight_scale;
  int64_t pos0;  // position of token t0
  int t0;        // first token of this batch
  int n_heads;
  int dim;
  int ratio;
  int top_k;
  int n_batch;  // tokens in this batch (the tiled kernel's token tail)
};

// Block: kScoreRows rows × kHeadGroups head groups (one thread each). A thread forms
// relu(row · q_h) · w_h for its heads (four fused-multiply-add chains per dot, summed in
// order); thread r of warp 0 then adds the heads in head order.
__global__ void __launch_bounds__(kScoreRows* kHeadGroups) IndexScoreKernel(IndexScoreArgs a) {
  extern __shared__ float smem[];
  const int t = a.t0 + blockIdx.y;
  const int n_vis = int((a.pos0 + blockIdx.y + 1) / a.ratio);
  const int r0 = blockIdx.x * kScoreRows;
  if (n_vis <= a.top_k || r0 >= n_vis) return;
  const int dim = a.dim;
  const int stride = dim + 4;  // 16-byte rows, conflict-free float4 reads
  const int H = a.n_heads;
  float* qs = smem;                        // [H, dim]
  float* ws = qs + H * dim;                // [H]
  float* rs = ws + ((H + 3) & ~3);         // [kScoreRows, stride]
  float* part = rs + kScoreRows * stride;  // [kScoreRows, H + 1]
  const float* qt = a.q + size_t(t) * H * dim;
  for (int i = threadIdx.x; i < H * dim; i += blockDim.x) qs[i] = qt[i];
  for (int h = threadIdx.x; h < H; h += blockDim.x) {
    ws[h] = __fmul_rn(a.weights[size_t(t) * H + h], a.weight_scale);
  }
  const int n_here = min(kScoreRows, n_vis - r0);
  for (int i = threadIdx.x; i < n_here * dim; i += blockDim.x) {
    const int r = i / dim, c = i % dim;
    rs[r * stride + c] = a.rows[size_t(r0 + r) * dim + c];
  }
  __syncthreads();
  const int r = threadIdx.x % kScoreRows;
  const int g = threadIdx.x / kScoreRows;
  if (r < n_here) {
    const float4* row = reinterpret_cast<const float4*>(rs + r * stride);
    for (int h = g; h < H; h += kHeadGroups) {
      const float4* qh = reinterpret_cast<const float4*>(qs + h * dim);
      float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f, p3 = 0.0f;
      for (int c = 0; c < dim / 4; ++c) {
        const float4 x = row[c], y = qh[c];
        p0 = __fmaf_rn(x.x, y.x, p0);
        p1 = __fmaf_rn(x.y, y.y, p1);
        p2 = __fmaf_rn(x.z, y.z, p2);
        p3 = __fmaf_rn(x.w, y.w, p3);
      }
      float dot = __fadd_rn(__fadd_rn(p0, p1), __fadd_rn(p2, p3));
      if (dot < 0.0f) dot = 0.0f;
      part[r * (H + 1) + h] = __fmul_rn(dot, ws[h]);
    }
  }
  __syncthreads();
  if (threadIdx.x < n_here) {
    float s = 0.0f;
    for (int h = 0; h < H; ++h) s = __fadd_rn(s, part[threadIdx.x * (H + 1) + h]);
    a.scores[blockIdx.y * a.score_stride + r0 + threadIdx.x] = s;
  }
}

// The tiled twin of IndexScoreKernel for prefill chunks: grid (row tiles, token tiles),
// a CTA scores kTiledRows rows × kTiledTokens tokens. The rows stay in shared memory for the
// whole CTA; the heads are walked in order, each head's queries of the tile's tokens staged
// with cp.async (double-buffered). Warp w, lane: rows 32·(w & 3) + (lane & 7) + 8i, tokens
// 16·(w >> 2) + (lane >> 3) + 4j (i, j < 4). Each thread keeps its 16 scores across the
// heads: per head and (row, token) it forms IndexScoreKernel's dot (four fused-multiply-add
// chains over dims ≡ 0…3 mod 4, summed (p0 + p1) + (p2 + p3)), the relu and the product
// with the head weight, and adds it to the running score in head order — the one-token
// kernel's terms and order, so the bits are the same.
// kFast: warp w takes rows 32·(w & 3) … + 31 and tokens 16·(w >> 2) … + 15 as 2 × 2 MMA tiles;
// each head's dots come from mma.m16n8k8 over the dims (device/tf32_mma.cuh's C layout), then
// the same relu, head weight and head-order sum.
template <bool kFast>
__global__ void __launch_bounds__(kTiledThreads, 2) IndexScoreTiledKernel(IndexScoreArgs a) {
  extern __shared__ __align__(16) float tsm[];
  const int dim = a.dim;
  const int pitch = dim + 4;  // 16-byte rows, conflict-free float4 reads
  const int H = a.n_heads;
  float* rs = tsm;                            // [kTiledRows, pitch]
  float* qs = rs + kTiledRows * pitch;        // [2][kTiledTokens, pitch]
  float* ws = qs + 2 * kTiledTokens * pitch;  // [kTiledTokens, H]
  const int tid = threadIdx.x;
  const int r0 = blockIdx.x * kTiledRows;
  const int bt0 = blockIdx.y * kTiledTokens;                   // first token of the tile (batch)
  const int n_tok = min(kTiledTokens, a.n_batch - bt0);        // tokens in the tile
  const int vis_last = int((a.pos0 + bt0 + n_tok) / a.ratio);  // the tile's largest n_vis
  if (vis_last <= a.top_k || r0 >= vis_last) return;
  const int n_here = min(kTiledRows, vis_last - r0);
  const int v4 = dim / 4;
  // Rows and tokens past the tile's end are not loaded: their scores are never written.
  for (int i = tid; i < n_here * v4; i += kTiledThreads) {
    const int r = i / v4, f = 4 * (i % v4);
    CpAsync16(SmemAddr(rs + r * pitch + f), a.rows + size_t(r0 + r) * dim + f);
  }
  const float* q0 = a.q + size_t(a.t0 + bt0) * H * dim;
  auto load_q = [&](int stage, int h) {
    float* dst = qs + stage * kTiledTokens * pitch;
    for (int i = tid; i < n_tok * v4; i += kTiledThreads) {
      const int t = i / v4, f = 4 * (i % v4);
      CpAsync16(SmemAddr(dst + t * pitch + f), q0 + (size_t(t) * H + h) * dim + f);
    }
    CpAsyncCommit();
  };
  for (int i = tid; i < n_tok * H; i += kTiledThreads) {
    const int t = i / H, h = i % H;
    ws[i] = __fmul_rn(a.weights[size_t(a.t0 + bt0 + t) * H + h], a.weight_scale);
  }
  load_q(0, 0);  // one group with the rows

  const int warp = tid >> 5, lane = tid & 31;
  const int rb = 32 * (warp & 3) + (lane & 7);
  const int tb = 16 * (warp >> 2) + (lane >> 3);
  // A warp whose rows or tokens all lie past the tile's end skips the products.
  const bool busy = 32 * (warp & 3) < n_here && 16 * (warp >> 2) < n_tok;
  float score[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) score[i][j] = 0.0f;
  }
  const int g = lane >> 2, tq = lane & 3;
  const int rw = 32 * (warp & 3), tw = 16 * (warp >> 2);  // the fast path's warp tile
  for (int h = 0; h < H; ++h) {
    if (h + 1 < H) {
      load_q((h + 1) & 1, h + 1);
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    __syncthreads();
    if (busy && kFast) {
      const float* qh = qs + (h & 1) * kTiledTokens * pitch;
      float acc[2][2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
          for (int k = 0; k < 4; ++k) acc[mt][nt][k] = 0.0f;
        }
      }
#pragma unroll 4
      for (int kk = 0; kk < dim; kk += 8) {
        uint32_t af[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          const float* r = rs + (rw + 16 * mt + g) * pitch + kk + tq;
          af[mt][0] = __float_as_uint(r[0]);
          af[mt][1] = __float_as_uint(r[8 * pitch]);
          af[mt][2] = __float_as_uint(r[4]);
          af[mt][3] = __float_as_uint(r[8 * pitch + 4]);
        }
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const float* y = qh + (tw + 8 * nt + g) * pitch + kk + tq;
          const uint32_t b0 = __float_as_uint(y[0]), b1 = __float_as_uint(y[4]);
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) MmaTf32(af[mt], b0, b1, acc[mt][nt]);
        }
      }
      // score[2·mt + nt][k]: row rw + 16·mt + g + 8·(k >> 1), token tw + 8·nt + 2·tq + (k & 1).
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const int tt = min(tw + 8 * nt + 2 * tq + (k & 1), kTiledTokens - 1);
            float dot = acc[mt][nt][k];
            if (dot < 0.0f) dot = 0.0f;
            score[2 * mt + nt][k] =
                __fadd_rn(score[2 * mt + nt][k], __fmul_rn(dot, ws[tt * H + h]));
          }
        }
      }
    } else if (busy) {
      const float* qh = qs + (h & 1) * kTiledTokens * pitch;
      float acc[4][4][4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
#pragma unroll
          for (int k = 0; k < 4; ++k) acc[i][j][k] = 0.0f;
        }
      }
#pragma unroll 1
      for (int c = 0; c < dim; c += 4) {
        float4 rv[4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          rv[i] = *reinterpret_cast<const float4*>(rs + (rb + 8 * i) * pitch + c);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float4 y = *reinterpret_cast<const float4*>(qh + (tb + 4 * j) * pitch + c);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            acc[i][j][0] = __fmaf_rn(rv[i].x, y.x, acc[i][j][0]);
            acc[i][j][1] = __fmaf_rn(rv[i].y, y.y, acc[i][j][1]);
            acc[i][j][2] = __fmaf_rn(rv[i].z, y.z, acc[i][j][2]);
            acc[i][j][3] = __fmaf_rn(rv[i].w, y.w, acc[i][j][3]);
          }
        }
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int tt = min(tb + 4 * j, kTiledTokens - 1);
        const float wh = ws[tt * H + h];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          float dot = __fadd_rn(__fadd_rn(acc[i][j][0], acc[i][j][1]),
                                __fadd_rn(acc[i][j][2], acc[i][j][3]));
          if (dot < 0.0f) dot = 0.0f;
          score[i][j] = __fadd_rn(score[i][j], __fmul_rn(dot, wh));
        }
      }
    }
    __syncthreads();  // the stage read here is the next prefetch's target
  }
  if (!busy) return;
  if constexpr (kFast) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int tl = tw + 8 * (e & 1) + 2 * tq + (k & 1);
        if (tl >= n_tok) continue;
        const int bt = bt0 + tl;
        const int n_vis = int((a.pos0 + bt + 1) / a.ratio);
        const int r = r0 + rw + 16 * (e >> 1) + g + 8 * (k >> 1);
        if (n_vis > a.top_k && r < n_vis) a.scores[size_t(bt) * a.score_stride + r] = score[e][k];
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int bt = bt0 + tb + 4 * j;
      if (tb + 4 * j >= n_tok) continue;
      const int n_vis = int((a.pos0 + bt + 1) / a.ratio);
      if (n_vis <= a.top_k) continue;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = r0 + rb + 8 * i;
        if (r < n_vis) a.scores[size_t(bt) * a.score_stride + r] = score[i][j];
      }
    }
  }
}

// Order-preserving map of a float to an unsigned key (larger float, larger key); -0 is
// taken as +0 and NaN as the smallest key.
__device__ __forceinline__ uint32_t ScoreKey(float f) {
  if (f != f) return 0u;
  if (f == 0.0f) f = 0.0f;
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

struct IndexSelectArgs {
  const float* scores;
  uint64_t score_stride;
  int32_t* selected;  // [n_tokens, top_k]
  int64_t pos0;
  int t0;
  int ratio;
  int top_k;
};

__global__ void __launch_bounds__(kSelectThreads) IndexSelectKernel(IndexSelectArgs a) {
  __shared__ uint32_t hist[256];
  __shared__ uint32_t sh_prefix, sh_need;
  __shared__ int warp_sums[2][kSelectThreads / 32];
  const int t = a.t0 + blockIdx.x;
  const int n_vis = int((a.pos0 + blockIdx.x + 1) / a.ratio);
  const int k = a.top_k;
  int32_t* sel = a.selected + size_t(t) * k;
  if (n_vis <= k) {
    for (int s = threadIdx.x; s < k; s += blockDim.x) sel[s] = s < n_vis ? s : -1;
    return;
  }
  const float* sc = a.scores + blockIdx.x * a.score_stride;
  // Radix select, 8 bits per pass from the top: the k-th largest key and how many keys
  // equal to it must be taken.
  uint32_t prefix = 0, need = uint32_t(k);
  for (int pass = 0; pass < 4; ++pass) {
    const int shift = 24 - 8 * pass;
    const uint32_t mask_hi = pass == 0 ? 0u : (0xffffffffu << (shift + 8));
    for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < n_vis; i += blockDim.x) {
      const uint32_t key = ScoreKey(sc[i]);
      if ((key & mask_hi) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
    }
    __syncthreads();
    // The digit holding the need-th largest key: thread i owns digit 255 - i; a block
    // scan of the counts from the top finds the bin where the running count reaches need.
    {
      const int dg = 255 - int(threadIdx.x);
      const uint32_t c = hist[dg];
      uint32_t incl = c;  // inclusive scan over threads 0..255 (digits 255 down)
      const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const uint32_t v = __shfl_up_sync(kFullMask, incl, o);
        if (lane >= o) incl += v;
      }
      if (lane == 31) warp_sums[0][warp] = int(incl);
      __syncthreads();
      uint32_t before = 0;
      for (int w = 0; w < warp; ++w) before += uint32_t(warp_sums[0][w]);
      incl += before;
      const uint32_t excl = incl - c;
      if (excl < need && incl >= need) {
        sh_prefix = prefix | (uint32_t(dg) << shift);
        sh_need = need - excl;
      }
    }
    __syncthreads();
    prefix = sh_prefix;
    need = sh_need;
    __syncthreads();
  }
  const uint32_t thr = prefix;
  // Ordered compaction: ids ascending; keys above thr, and the first `need` equal ones.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int taken = 0, eq_seen = 0;
  for (int base = 0; base < n_vis; base += blockDim.x) {
    const int i = base + threadIdx.x;
    const uint32_t key = i < n_vis ? ScoreKey(sc[i]) : 0u;
    const bool gt = i < n_vis && key > thr;
    const bool eq = i < n_vis && key == thr;
    const unsigned eq_ballot = __ballot_sync(kFullMask, eq);
    if (lane == 0) warp_sums[0][warp] = __popc(eq_ballot);
    __syncthreads();
    int eq_before = eq_seen;
    for (int w = 0; w < warp; ++w) eq_before += warp_sums[0][w];
    eq_before += __popc(eq_ballot & ((1u << lane) - 1u));
    const bool take = gt || (eq && uint32_t(eq_before) < need);
    const unsigned take_ballot = __ballot_sync(kFullMask, take);
    if (lane == 0) warp_sums[1][warp] = __popc(take_ballot);
    __syncthreads();
    int pos = taken;
    int eq_total = 0, take_total = 0;
    for (int w = 0; w < int(blockDim.x >> 5); ++w) {
      if (w < warp) pos += warp_sums[1][w];
      eq_total += warp_sums[0][w];
      take_total += warp_sums[1][w];
    }
    pos += __popc(take_ballot & ((1u << lane) - 1u));
    if (take && pos < k) sel[pos] = i;
    taken += take_total;
    eq_seen += eq_total;
    __syncthreads();
  }
  for (int s = taken + threadIdx.x; s < k; s += blockDim.x) sel[s] = -1;
}

}  // namespace
}  // namespace cuda

namespace {

size_t TiledScoreSmem(const IndexerArgs& a) {
  return sizeof(float) * (size_t(cuda::kTiledRows + 2 * cuda::kTiledTokens) * (a.dim + 4) +
                          size_t(cuda::kTiledTokens) * a.n_heads);
}

// Two CTAs of ~107 KB per SM need the largest carveout; asked once per process.
bool TiledKernelReady() {
  static const cudaError_t raised =
      cuda::AllowSharedMemory(cuda::IndexScoreTiledKernel<false>, 200 * 1024);
  static const cudaError_t raised_fast =
      cuda::AllowSharedMemory(cuda::IndexScoreTiledKernel<true>, 200 * 1024);
  return raised == cudaSuccess && raised_fast == cudaSuccess;
}

// Whether IndexScoreTiledKernel serves this batch: prefill chunks with the tiled kernels on,
// rows of whole 16-byte units and a tile that fits in shared memory.
bool UseTiledScores(const CudaBackend::State& s, const IndexerArgs& a) {
  return s.tiled_prefill && s.tiled_indexer && a.n_tokens >= cuda::kTiledMinTokens &&
         a.dim % 4 == 0 && cuda::Aligned16(a.q.get()) && cuda::Aligned16(a.rows.get()) &&
         TiledScoreSmem(a) <= 200 * 1024 && TiledKernelReady();
}

// Whether the tiled scores take the fast path's tensor cores: prefill chunks (kFastMinTokens
// tokens or more, backend.h) with rows of whole 8-value MMA steps, while State::fast_indexer
// allows it.
bool FastScores(const CudaBackend::State& s, const IndexerArgs& a) {
  return s.fast_terms > 0 && s.fast_indexer && a.n_tokens >= kFastMinTokens && a.dim % 8 == 0;
}

// Scores of the batch's tokens [t0, t0 + n) into scores[(t - t0) · stride + row] for every
// token that sees more than top_k rows (row < its n_vis); other entries are left alone.
void LaunchScores(CudaBackend::State& s, const IndexerArgs& a, int t0, int n, float* scores,
                  int64_t stride, bool tiled) {
  cuda::IndexScoreArgs sa{a.q.get(),
                          a.weights.get(),
                          a.rows.get(),
                          scores,
                          uint64_t(stride),
                          a.weight_scale,
                          a.pos0 + t0,
                          t0,
                          a.n_heads,
                          a.dim,
                          a.ratio,
                          a.top_k,
                          n};
  const int64_t max_vis = (a.pos0 + t0 + n) / a.ratio;
  if (tiled) {
    const dim3 grid(unsigned(cuda::CeilDiv(max_vis, cuda::kTiledRows)),
                    unsigned(cuda::CeilDiv(n, cuda::kTiledTokens)));
    if (FastScores(s, a)) {
      s.Launch(cuda::IndexScoreTiledKernel<true>, grid, dim3(cuda::kTiledThreads),
               unsigned(TiledScoreSmem(a)), sa);
    } else {
      s.Launch(cuda::IndexScoreTiledKernel<false>, grid, dim3(cuda::kTiledThreads),
               unsigned(TiledScoreSmem(a)), sa);
    }
    return;
  }
  const int smem =
      int(sizeof(float)) * (a.n_heads * a.dim + ((a.n_heads + 3) & ~3) +
                            cuda::kScoreRows * (a.dim + 4) + cuda::kScoreRows * (a.n_heads + 1));
  if (smem > 48 * 1024) {
    // The attribute is per function and device: raised once on each device this process
    // drives (several with --gpus), with that device current.
    static std::atomic<uint64_t> raised{0};
    const uint64_t bit = uint64_t(1) << (unsigned(s.device) & 63u);
    if ((raised.load() & bit) == 0) {
      cudaSetDevice(s.device);
      cudaFuncSetAttribute(cuda::IndexScoreKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           200 * 1024);
      raised.fetch_or(bit);
    }
  }
  s.Launch(cuda::IndexScoreKernel, dim3(unsigned(cuda::CeilDiv(max_vis, cuda::kScoreRows)), n),
           dim3(cuda::kScoreRows * cuda::kHeadGroups), unsigned(smem), sa);
}

}  // namespace

void CudaBackend::IndexerTopK(const IndexerArgs& a) {
  if (a.n_tokens <= 0) return;
  const int64_t max_vis = (a.pos0 + a.n_tokens) / a.ratio;
  const bool scoring = max_vis > a.top_k;
  // Token batches bounded so the score matrix stays under 256 MiB.
  const int64_t stride = std::max<int64_t>(max_vis, 1);
  const int batch =
      int(std::max<int64_t>(1, std::min<int64_t>(a.n_tokens, (int64_t(64) << 20) / stride)));
  float* scores = nullptr;
  if (scoring) {
    scores = static_cast<float*>(
        s_->Scratch(CudaScratch::kIndexScores, sizeof(float) * size_t(batch) * stride));
    if (scores == nullptr) return;
  }
  const bool tiled = UseTiledScores(*s_, a);
  for (int t0 = 0; t0 < a.n_tokens; t0 += batch) {
    const int n = std::min(batch, a.n_tokens - t0);
    if (scoring) LaunchScores(*s_, a, t0, n, scores, stride, tiled);
    cuda::IndexSelectArgs ka{scores, uint64_t(stride), a.selected.get(), a.pos0 + t0,
                             t0,     a.ratio,          a.top_k};
    s_->Launch(cuda::IndexSelectKernel, dim3(n), dim3(cuda::kSelectThreads), 0, ka);
  }
}

void CudaBackend::IndexerScores(const IndexerArgs& a, DevPtr<float> scores) {
  if (a.n_tokens <= 0) return;
  const int64_t stride = std::max<int64_t>((a.pos0 + a.n_tokens) / a.ratio, 1);
  LaunchScores(*s_, a, 0, a.n_tokens, scores.get(), stride, UseTiledScores(*s_, a));
}

}  // namespace flashkv
