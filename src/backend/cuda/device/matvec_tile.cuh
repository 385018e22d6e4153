// TileRowDots: one activation row (decode) against a tile of consecutive weight rows, q8
// activations, by a whole block. The tile of each of the NR weights is one contiguous byte
// range, copied into shared memory with cp.async so every 16-byte load
// of the block is in flight at once (the one-warp-per-row kernels had a row's few loads in
// flight per warp, which left HBM idle between rows). Then every thread forms block terms —
// BlockTerm's formulas: exact integer sums, the float term as WarpRowDotQ8 forms it — into
// shared memory, and one thread per row folds its row's terms in block order with unfused
// adds (× 0.125 for IQ2_XXS). Same terms, same order: the bits of WarpRowDotQ8's one-token
// path and of ref::DotQ8.
// Must not: know what the rows mean (matmul, projection sets, experts use it).
#pragma once

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device/imma_ptx.cuh"
#include "backend/cuda/device/pdl.cuh"
#include "backend/cuda/device/quant.cuh"

namespace flashkv::cuda {

inline constexpr int kTileThreads = 256;
// Blocks per SM the tile kernels' registers leave room for (__launch_bounds__): the loads in
// flight per SM are these blocks' tiles. 8 where an SM runs 2,048 threads (sm_80, sm_90,
// sm_100); 6 where it runs 1,536 (sm_86, sm_87, sm_89, sm_120), for which ptxas would ignore
// 8 with a warning. Only the device pass reads it (CUDA C++ Programming Guide, "Launch
// Bounds", picks its values per __CUDA_ARCH__ the same way).
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 860 || __CUDA_ARCH__ == 870 || \
                               __CUDA_ARCH__ == 890 || __CUDA_ARCH__ >= 1200)
inline constexpr int kTileMinBlocks = 6;
#else
inline constexpr int kTileMinBlocks = 8;
#endif
// Weight bytes a block aims to hold (all NR weights) come from the backend's settings
// (CudaBackendOptions::tile_bytes, default kCudaTileBytes).
// The most weight bytes of one tile (dynamic shared memory stays under the 48 KiB default).
inline constexpr uint64_t kTileMaxBytes = kCudaTileMaxBytes;

// Every tile kernel asks for the largest shared-memory carveout once (AllowSharedMemory): with
// the default the driver may leave room for only a few blocks per SM, which caps the loads
// in flight (each block's are its tile).
inline constexpr int kTileSmemLimit = 96 * 1024;
template <typename A>
void PreferSharedForTiles(void (*kernel)(A)) {
  static const cudaError_t raised = AllowSharedMemory(kernel, kTileSmemLimit);
  (void)raised;  // without it the kernels still run, with fewer blocks per SM
}

template <DType T>
struct TileFormat;
template <>
struct TileFormat<DType::kQ8_0> {
  static constexpr int kBlockBytes = 34, kValues = 32, kUnits = 1;
};
template <>
struct TileFormat<DType::kQ2_K> {
  static constexpr int kBlockBytes = 84, kValues = 256, kUnits = 8;
};
template <>
struct TileFormat<DType::kIQ2_XXS> {
  static constexpr int kBlockBytes = 66, kValues = 256, kUnits = 8;
};

// Whether the tile kernels take this type: the ds4 decode types.
__host__ __device__ constexpr bool TileType(DType t) {
  return t == DType::kQ8_0 || t == DType::kQ2_K || t == DType::kIQ2_XXS;
}

// Rows per tile for NR weights of row_bytes each, aiming at target_bytes a tile
// (CudaBackend::State::tile_bytes; 0: the rows do not fit a tile); at most one per thread
// (each row is folded by one thread).
inline int TileRowsFor(uint64_t row_bytes, int nr, uint64_t target_bytes) {
  const uint64_t per = row_bytes * uint64_t(nr);
  if (per == 0 || per > kTileMaxBytes) return 0;
  const uint64_t r = (target_bytes + per / 2) / per;
  return int(r < 1 ? 1 : r > uint64_t(kTileThreads) ? kTileThreads : r);
}
// Shared-memory bytes of one weight's tile: the rows keep their offset from 16 bytes, so
// the 16-byte pieces land 16-byte aligned.
__host__ __device__ inline int TileSlotBytes(int tile_bytes) {
  return ((tile_bytes + 15) & ~15) + 16;
}
// Dynamic shared memory of a tile of `rows` rows: the weights, then the terms (a multiple of
// 16 bytes, so a second buffer follows aligned).
__host__ __device__ inline unsigned TileSmemBytes(uint64_t row_bytes, int nr, int rows,
                                                  int blocks_per_row) {
  const uint64_t b = uint64_t(nr) * TileSlotBytes(int(row_bytes * uint64_t(rows))) +
                     sizeof(float) * uint64_t(nr) * uint64_t(rows) * uint64_t(blocks_per_row);
  return unsigned((b + 15) & ~uint64_t(15));
}

// The grid of a looping tile kernel over n_tiles tiles, and whether its blocks loop (then
// they need two buffers of shared memory). A looping kernel (TileLoop) has blocks_per_sm
// blocks per SM (CudaBackend::State::tile_blocks_per_sm), each walking tiles blockIdx.x,
// + gridDim.x, … with the next tile's copy in flight while it computes the current one;
// 0: a block per tile (no loop).
inline int TileGrid(int n_tiles, int sms, int blocks_per_sm, bool* loops) {
  const int k = blocks_per_sm;
  const int g = k > 0 && n_tiles > k * sms ? k * sms : n_tiles;
  *loops = g < n_tiles;
  return g;
}

// Where row r of the tile reads its activations: one row, or (grouped projections) the
// slice of its row group.
struct TileX {
  const uint8_t* x;
  int row0 = 0;
  int rows_per_group = 0;
  uint64_t group_bytes = 0;
  __device__ __forceinline__ const uint8_t* For(int r) const {
    return rows_per_group > 0 ? x + uint64_t((row0 + r) / rows_per_group) * group_bytes : x;
  }
};

// The IQ2_XXS grid in shared memory: its 256 entries.
inline constexpr int kIq2TableEntries = 256;

// The IQ2_XXS unit of Iq2xxsUnitIsum, the grid from shared memory, its 32 activation quants
// (xv) in registers: the unit's 8 bytes (2-byte aligned) as two or three aligned 32-bit
// loads and a funnel shift, the sign masks computed (Iq2SignBytes) rather than looked up —
// the shared-memory pipe, not the ALUs, bounds these kernels. The signs applied as
// Σ g·x − 2·Σ (g & m)·x: the same exact integer (Σ ±grid·q8 · (2·ls + 1)).
__device__ __forceinline__ int Iq2xxsUnitIsumTile(const uint8_t* wblk, int g, const int (&xv)[8],
                                                  const uint64_t* grid) {
  const uintptr_t f = reinterpret_cast<uintptr_t>(wblk + 2 + 8 * g);
  const uint32_t* fw = reinterpret_cast<const uint32_t*>(f & ~uintptr_t(3));
  const uint32_t sh = uint32_t(f & 2) * 8;  // 16 when the field starts mid-word
  const uint32_t w0 = fw[0], w1 = fw[1];
  const uint32_t w2 = fw[sh != 0 ? 2 : 1];  // the third word only when the field reaches it
  const uint32_t a = __funnelshift_r(w0, w1, sh);
  const uint32_t b = __funnelshift_r(w1, w2, sh);
  int sum_g = 0, sum_m = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint64_t gv = grid[(a >> (8 * k)) & 0xffu];
    uint32_t m_lo, m_hi;
    Iq2SignBytes((b >> (7 * k)) & 127u, &m_lo, &m_hi);
    const uint32_t g_lo = uint32_t(gv), g_hi = uint32_t(gv >> 32);
    sum_g = __dp4a(int(g_lo), xv[2 * k], sum_g);
    sum_g = __dp4a(int(g_hi), xv[2 * k + 1], sum_g);
    sum_m = __dp4a(int(g_lo & m_lo), xv[2 * k], sum_m);
    sum_m = __dp4a(int(g_hi & m_hi), xv[2 * k + 1], sum_m);
  }
  return (sum_g - 2 * sum_m) * int(2 * (b >> 28) + 1);
}

// 32 activation quants (16-byte aligned) into registers.
__device__ __forceinline__ void LoadQuants32(const int8_t* q, int (&xv)[8]) {
  const int4 x0 = __ldg(reinterpret_cast<const int4*>(q));
  const int4 x1 = __ldg(reinterpret_cast<const int4*>(q + 16));
  xv[0] = x0.x, xv[1] = x0.y, xv[2] = x0.z, xv[3] = x0.w;
  xv[4] = x1.x, xv[5] = x1.y, xv[6] = x1.z, xv[7] = x1.w;
}

// Whether TileTermsQ8Pairs takes a Q8_0 tile: an even number of blocks a row and every
// weight's tile 4-byte aligned (then each pair of blocks, 68 bytes, starts on a word).
template <int NR>
__device__ __forceinline__ bool Q8PairsFit(const uint8_t* const (&tile)[NR], int nblk) {
  bool fit = (nblk & 1) == 0;
#pragma unroll
  for (int i = 0; i < NR; ++i) fit = fit && (reinterpret_cast<uintptr_t>(tile[i]) & 3) == 0;
  return fit;
}

// The Q8_0 block terms of a tile in shared memory, a pair of blocks per thread and pass: the
// pair's 68 bytes as 17 aligned 32-bit loads (the first block's quants funnel-shifted out of
// them, the second's whole words; consecutive threads' pairs fall in distinct banks), the
// activations as four 16-byte and one 8-byte load. 16-bit loads of single 34-byte blocks were
// 17 shared-memory loads a block, with bank conflicts, and kept the L1 pipe busy (Nsight
// Compute, docs/CUDA.md). The terms: the formula of the unit loop below, into
// terms[(wi·rows + r)·nblk + block].
template <int NR>
__device__ __forceinline__ void TileTermsQ8Pairs(const uint8_t* const (&tile)[NR], int rows,
                                                 int row_bytes, int n, const TileX& x,
                                                 float* terms) {
  const int nblk = n / 32, npair = nblk / 2;
  const int total = NR * rows * npair;
  int p = int(threadIdx.x) % npair;
  int r = (int(threadIdx.x) / npair) % rows;
  int wi = (int(threadIdx.x) / npair) / rows;
  for (int base = 0; base < total; base += kTileThreads) {
    if (wi < NR) {
      const uint8_t* tb = tile[0];  // tile[wi] without a local-memory index
#pragma unroll
      for (int i = 1; i < NR; ++i) tb = wi == i ? tile[i] : tb;
      const uint32_t* sw = reinterpret_cast<const uint32_t*>(tb + r * row_bytes + 68 * p);
      const uint8_t* xr = x.For(r);
      const int8_t* xq = reinterpret_cast<const int8_t*>(xr) + 64 * p;
      const float2 xd = __ldg(reinterpret_cast<const float2*>(xr + n) + p);
      uint32_t wv[17];
#pragma unroll
      for (int k = 0; k < 17; ++k) wv[k] = sw[k];
      int xv[8];
      LoadQuants32(xq, xv);
      int s0 = 0;
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        s0 = __dp4a(int(__funnelshift_r(wv[k], wv[k + 1], 16)), xv[k], s0);
      }
      LoadQuants32(xq + 32, xv);
      int s1 = 0;
#pragma unroll
      for (int k = 0; k < 8; ++k) s1 = __dp4a(int(wv[9 + k]), xv[k], s1);
      const float d0 = HalfBitsToFloat(uint16_t(wv[0] & 0xffffu));
      const float d1 = HalfBitsToFloat(uint16_t(wv[8] >> 16));
      float2 t;
      t.x = __fmul_rn(__fmul_rn(d0, xd.x), float(s0));
      t.y = __fmul_rn(__fmul_rn(d1, xd.y), float(s1));
      *reinterpret_cast<float2*>(terms + (wi * rows + r) * nblk + 2 * p) = t;
    }
    p += kTileThreads;
    while (p >= npair) {
      p -= npair;
      if (++r == rows) {
        r = 0;
        ++wi;
      }
    }
  }
}

// Where weight i's tile of tile_bytes starting at w lies in a buffer of TileSmemBytes: the
// rows keep their offset from 16 bytes (so the 16-byte pieces land 16-byte aligned).
__device__ __forceinline__ uint8_t* TileIn(uint8_t* buf, int i, int tile_bytes, const uint8_t* w) {
  return buf + i * TileSlotBytes(tile_bytes) + (reinterpret_cast<uintptr_t>(w) & 15);
}

// Starts the copy of the NR weights' tiles (rows of row_bytes from w[i]) into buf: whole
// 16-byte pieces by cp.async (one commit group), the < 16 bytes before the first and after the
// last piece by threads 0..31 (rows of >= 34 bytes). Called by every thread of the block.
template <int NR>
__device__ __forceinline__ void TileIssue(const uint8_t* const (&w)[NR], int rows, int row_bytes,
                                          uint8_t* buf) {
  const int tid = threadIdx.x;
  const int tile_bytes = rows * row_bytes;
#pragma unroll
  for (int i = 0; i < NR; ++i) {
    const uintptr_t g = reinterpret_cast<uintptr_t>(w[i]);
    const uintptr_t a0 = (g + 15) & ~uintptr_t(15), a1 = (g + tile_bytes) & ~uintptr_t(15);
    uint8_t* dst = TileIn(buf, i, tile_bytes, w[i]);  // byte j of the tile at dst + j
    const int chunks = int((a1 - a0) / 16);
    const int head = int(a0 - g);
    const uint4* src = reinterpret_cast<const uint4*>(a0);
    for (int c = tid; c < chunks; c += kTileThreads) {
      CpAsync16(SmemAddr(dst + head + 16 * c), src + c);
    }
    if (tid < head) {
      dst[tid] = w[i][tid];
    } else if (tid >= 16 && tid < 16 + int(g + tile_bytes - a1)) {
      const int j = int(a1 - g) + tid - 16;
      dst[j] = w[i][j];
    }
  }
  CpAsyncCommit();
}

// The IQ2_XXS grid into grid_smem (kIq2TableEntries); visible after the next barrier.
template <DType T>
__device__ __forceinline__ void TileTables(uint64_t* grid_smem, const uint64_t* iq2_grid) {
  if constexpr (T == DType::kIQ2_XXS) {
    for (int i = threadIdx.x; i < kIq2TableEntries; i += kTileThreads) {
      grid_smem[i] = __ldg(iq2_grid + i);
    }
  }
}

// The block terms of a tile in shared memory by units (kUnits lanes a block), into
// terms[(wi·rows + r)·nblk + block]: every type's path (Q8_0 when TileTermsQ8Pairs does not
// fit).
template <DType T, int NR>
__device__ __forceinline__ void TileTermsUnits(const uint8_t* const (&tile)[NR], int rows,
                                               int row_bytes, int n, const TileX& x,
                                               const uint64_t* grid_smem, float* terms) {
  using F = TileFormat<T>;
  const int tid = threadIdx.x;
  const int nblk = n / F::kValues;
  // Thread tid takes units tid, tid + kTileThreads, … of (weight, row, block, unit) order;
  // its (block, row, weight) advance by a fixed step, so no division in the loop. A K-quant
  // unit's activation quants (and bsums) stay in registers while the thread's unit of
  // the activation row stays the same (with 256 threads and 2^k blocks a row it always
  // does: the thread takes the same unit of every row), so a tile reads them once, not once
  // a row.
  const int total = NR * rows * nblk * F::kUnits;
  constexpr int kStep = kTileThreads / F::kUnits;  // blocks per pass
  const int u = tid % F::kUnits;
  int blk = (tid / F::kUnits) % nblk;
  int wr = (tid / F::kUnits) / nblk;  // weight · rows + row
  int r = wr % rows;
  int wi = wr / rows;
  // Whose activation quants xv holds (K-quants): the low 32 bits of their address (the
  // activation rows of a tile lie within 4 GiB; 1 matches no 16-byte aligned address).
  uint32_t held = 1;
  int xv[8] = {};
  uint32_t xbs = 0;
  for (int base = 0; base < total; base += kTileThreads) {
    const bool valid = wi < NR;
    const int b = (wi * rows + r) * nblk + blk;
    const uint8_t* tb = tile[0];  // tile[wi] without a local-memory index
#pragma unroll
    for (int i = 1; i < NR; ++i) tb = wi == i ? tile[i] : tb;
    const uint8_t* sblk = tb + r * row_bytes + F::kBlockBytes * blk;
    const uint8_t* xr = x.For(r);
    if constexpr (T == DType::kQ8_0) {
      if (valid) {
        const Q8Row xq = Q8_0RowOf(xr, n);
        terms[b] = __fmul_rn(__fmul_rn(LoadHalfDev(sblk), __ldg(xq.d + blk)),
                             float(Q8_0BlockIsum(sblk, xq.qs + 32 * blk)));
      }
    } else {
      const Q8Row xq = Q8_KRowOf(xr, n);
      const int8_t* q = xq.qs + 256 * blk + 32 * u;
      const uint32_t key = uint32_t(reinterpret_cast<uintptr_t>(q));
      if (valid && key != held) {
        LoadQuants32(q, xv);
        if constexpr (T == DType::kQ2_K) {
          xbs = __ldg(reinterpret_cast<const uint32_t*>(xq.bsums + 16 * blk + 2 * u));
        }
        held = key;
      }
      if constexpr (T == DType::kQ2_K) {
        int isum = 0, summs = 0;
        if (valid) Q2KUnitIsumRegs(sblk, u, xv, xbs, &isum, &summs);
        isum = GroupSumInt<8>(isum);
        summs = GroupSumInt<8>(summs);
        if (valid && u == 0) {
          const float dy = __ldg(xq.d + blk);
          const float dall = __fmul_rn(dy, LoadHalfDev(sblk + 80));
          const float dmin = __fmul_rn(dy, LoadHalfDev(sblk + 82));
          terms[b] = __fsub_rn(__fmul_rn(dall, float(isum)), __fmul_rn(dmin, float(summs)));
        }
      } else {  // IQ2_XXS
        int bsum = valid ? Iq2xxsUnitIsumTile(sblk, u, xv, grid_smem) : 0;
        bsum = GroupSumInt<8>(bsum);
        if (valid && u == 0) {
          terms[b] = __fmul_rn(__fmul_rn(LoadHalfDev(sblk), __ldg(xq.d + blk)), float(bsum));
        }
      }
    }
    blk += kStep;
    while (blk >= nblk) {
      blk -= nblk;
      if (++r == rows) {
        r = 0;
        ++wi;
      }
    }
  }
}

// The dot products of a tile already in buf (TileIssue's copy complete and behind a barrier):
// on return thread r < rows holds row r's dot product of weight i in out[i]. Ends with a
// __syncthreads, so buf may be reused after it. w: the tile's global rows (for their offset).
template <DType T, int NR>
__device__ __forceinline__ void TileCompute(const uint8_t* const (&w)[NR], int rows, int row_bytes,
                                            int n, const TileX& x, uint8_t* buf,
                                            const uint64_t* grid_smem, float (&out)[NR]) {
  using F = TileFormat<T>;
  const int tid = threadIdx.x;
  const int tile_bytes = rows * row_bytes;
  const int slot = TileSlotBytes(tile_bytes);
  const uint8_t* tile[NR];
#pragma unroll
  for (int i = 0; i < NR; ++i) tile[i] = TileIn(buf, i, tile_bytes, w[i]);
  const int nblk = n / F::kValues;
  float* terms = reinterpret_cast<float*>(buf + NR * slot);  // [NR][rows][nblk]

  if constexpr (T == DType::kQ8_0) {
    if (Q8PairsFit<NR>(tile, nblk)) {
      TileTermsQ8Pairs<NR>(tile, rows, row_bytes, n, x, terms);
    } else {
      TileTermsUnits<T, NR>(tile, rows, row_bytes, n, x, grid_smem, terms);
    }
  } else {
    TileTermsUnits<T, NR>(tile, rows, row_bytes, n, x, grid_smem, terms);
  }
  __syncthreads();

  // The fold: block order, unfused adds (the NR rows of a thread interleaved).
#pragma unroll
  for (int i = 0; i < NR; ++i) out[i] = 0.0f;
  if (tid < rows) {
    const float* t0 = terms + tid * nblk;
    int k = 0;
    if ((nblk & 3) == 0) {  // the terms four at a time (16-byte aligned), added one by one
#pragma unroll 2
      for (; k < nblk; k += 4) {
#pragma unroll
        for (int i = 0; i < NR; ++i) {
          const float4 q = *reinterpret_cast<const float4*>(t0 + i * rows * nblk + k);
          out[i] = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(out[i], q.x), q.y), q.z), q.w);
        }
      }
    }
#pragma unroll 8
    for (; k < nblk; ++k) {
#pragma unroll
      for (int i = 0; i < NR; ++i) out[i] = __fadd_rn(out[i], t0[i * rows * nblk + k]);
    }
#pragma unroll
    for (int i = 0; i < NR; ++i) {
      if constexpr (T == DType::kIQ2_XXS) out[i] = __fmul_rn(0.125f, out[i]);
    }
  }
  __syncthreads();
}

// One tile, start to end: issue, wait for the predecessor grid (PdlWait) and the copy, compute
// (smem: TileSmemBytes; grid_smem:
// kIq2TableEntries for IQ2_XXS). On return thread r < rows holds row r's dot product of
// weight i in out[i]; ends with a __syncthreads.
template <DType T, int NR>
__device__ __forceinline__ void TileRowDots(const uint8_t* const (&w)[NR], int rows, int row_bytes,
                                            int n, const TileX& x, uint8_t* smem,
                                            uint64_t* grid_smem, const uint64_t* iq2_grid,
                                            float (&out)[NR]) {
  TileIssue<NR>(w, rows, row_bytes, smem);
  TileTables<T>(grid_smem, iq2_grid);
  // The weights are in flight; the activations are the predecessor's (device/pdl.cuh).
  PdlWait();
  PdlTrigger();
  CpAsyncWait<0>();
  __syncthreads();
  TileCompute<T, NR>(w, rows, row_bytes, n, x, smem, grid_smem, out);
}

// One tile of a looping kernel: NR weights' rows from w[i], `rows` rows starting at output row
// row0, activations x.
template <int NR>
struct TileJob {
  const uint8_t* w[NR];
  int row0;
  int rows;
  int row_bytes;
  TileX x;
  int tag = 0;  // the caller's (which output)
};

// Tiles blockIdx.x, + gridDim.x, … < n_tiles, job(t) naming each (its rows no more than the
// buffers were sized for): the next tile is copied into the other buffer (smem + buf_bytes)
// while the current one is computed; done(job, out) is called by every thread after each
// tile (thread r < job.rows holds row r's products).
template <DType T, int NR, typename JobFn, typename DoneFn>
__device__ __forceinline__ void TileLoop(int n_tiles, int n, uint8_t* smem, unsigned buf_bytes,
                                         uint64_t* grid_smem, const uint64_t* iq2_grid, JobFn job,
                                         DoneFn done) {
  int t = blockIdx.x;
  if (t >= n_tiles) {
    PdlWait();  // every block waits (device/pdl.cuh)
    return;
  }
  TileJob<NR> cur = job(t);
  TileIssue<NR>(cur.w, cur.rows, cur.row_bytes, smem);
  TileTables<T>(grid_smem, iq2_grid);
  // The first tile's weights are in flight; the activations are the predecessor's.
  PdlWait();
  PdlTrigger();
  for (int i = 0;; ++i) {
    const int tn = t + int(gridDim.x);
    TileJob<NR> nxt = cur;
    if (tn < n_tiles) {
      nxt = job(tn);
      TileIssue<NR>(nxt.w, nxt.rows, nxt.row_bytes, smem + ((i + 1) & 1) * buf_bytes);
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    __syncthreads();
    float out[NR];
    TileCompute<T, NR>(cur.w, cur.rows, cur.row_bytes, n, cur.x, smem + (i & 1) * buf_bytes,
                       grid_smem, out);
    done(cur, out);
    if (tn >= n_tiles) break;
    t = tn;
    cur = nxt;
  }
}

}  // namespace flashkv::cuda
