// Weight products for a batch of decode rows (issue #18: one token row from each of 2–31
// sessions). Each keeps a row's terms and fold exactly as the one-token kernels form them, so
// a row's bits do not depend on its batch (docs/CUDA.md "Batched decode kernels"):
// - MatVecBatchQ8_0Kernel (plain Q8_0 products): a warp's lanes are (weight row, activation
//   row) pairs; each lane walks its weight row's blocks in order, a pair of blocks at a time
//   as TileTermsQ8Pairs reads them, and folds the terms sequentially from 0 with unfused adds
//   — the tile kernel's terms and order. The lanes of one weight row load the same words, so
//   a warp reads each weight row once for up to 32 activation rows (the 8-token warp kernel
//   read it once per 8, one row per warp, with few loads in flight). With 16 or 32 lanes a
//   row the weight words are staged in shared memory by cp.async (MatVecBatchSmemQ8_0Kernel)
//   instead of being held in every lane's registers, so enough bytes are in flight.
// - MoeGroupTileKernel (routed experts): a block stages one tile of its expert's rows once
//   (TileIssue) and runs TileCompute on it for every pair of the expert tile (≤ 8), the very
//   computation GateUpTileKernel / MatVecTileKernel do for a tile of one pair — so each
//   expert's blocks are read once per step for all the rows routed to it.
#include <cstdlib>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/matvec_batch.h"
#include "backend/cuda/matvec_tile.cuh"

namespace flashkv::cuda {
namespace {

constexpr int kBatchWarps = 8;

struct BatchLaunch {
  MatVecArgs a;
  int lanes_per_row;  // P: activation rows per pass (a power of two <= 32)
};

// The two block terms of weight blocks 2p, 2p + 1 (68 bytes as 17 words, wv) against the
// activation row's quants and scales, folded into acc in block order: TileTermsQ8Pairs'
// formulas and the tile kernel's sequential unfused fold.
__device__ __forceinline__ float FoldPairQ8_0(float acc, const uint32_t (&wv)[17], const int8_t* xq,
                                              float2 d) {
  int xv[8];
  LoadQuants32(xq, xv);
  int s0 = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) s0 = __dp4a(int(__funnelshift_r(wv[k], wv[k + 1], 16)), xv[k], s0);
  LoadQuants32(xq + 32, xv);
  int s1 = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) s1 = __dp4a(int(wv[9 + k]), xv[k], s1);
  const float d0 = HalfBitsToFloat(uint16_t(wv[0] & 0xffffu));
  const float d1 = HalfBitsToFloat(uint16_t(wv[8] >> 16));
  acc = __fadd_rn(acc, __fmul_rn(__fmul_rn(d0, d.x), float(s0)));
  return __fadd_rn(acc, __fmul_rn(__fmul_rn(d1, d.y), float(s1)));
}

// Where lane (r, t) reads its activation row.
__device__ __forceinline__ const uint8_t* BatchXRow(const MatVecArgs& a, int row, int t) {
  const int slice = a.rows_per_group > 0 ? row / a.rows_per_group : 0;
  return a.x + uint64_t(t) * a.x_row_bytes + uint64_t(slice) * a.x_group_bytes;
}

// Few activation rows (P <= 8: 4+ weight rows a warp, enough loads in flight from
// registers): lane (r, t) = weight row blockIdx.x · rows_per_block + r, activation row
// blockIdx.y · P + t, its weight words straight from global memory.
template <int P>
__global__ void __launch_bounds__(kBatchWarps * 32) MatVecBatchQ8_0Kernel(BatchLaunch l) {
  const MatVecArgs& a = l.a;
  constexpr int kRowsPerWarp = 32 / P;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int row = (blockIdx.x * kBatchWarps + warp) * kRowsPerWarp + lane / P;
  const int t = blockIdx.y * P + lane % P;
  if (row >= a.rows || t >= a.n_tokens) return;
  const uint8_t* xr = BatchXRow(a, row, t);
  const int8_t* xq = reinterpret_cast<const int8_t*>(xr);
  const float2* xd = reinterpret_cast<const float2*>(xr + a.n);
  const uint32_t* wrow = reinterpret_cast<const uint32_t*>(a.w + uint64_t(row) * a.row_bytes);
  const int npair = a.n / 64;
  float acc = 0.0f;
#pragma unroll 2
  for (int p = 0; p < npair; ++p) {
    uint32_t wv[17];
#pragma unroll
    for (int k = 0; k < 17; ++k) wv[k] = __ldg(wrow + 17 * p + k);
    acc = FoldPairQ8_0(acc, wv, xq + 64 * p, __ldg(xd + p));
  }
  a.y[uint64_t(t) * a.y_row_floats + row] = acc;
}

// Many activation rows (P = 16 or 32: only 2 or 1 weight rows a warp, whose words in
// registers would be copied P times): the block's kRowsPerPass weight rows are staged in
// chunks of kChunkPairs block pairs (1,088 bytes a row, 16-byte aligned when a row is a
// multiple of 8 blocks), double-buffered with cp.async, and every lane folds the chunks in
// order — the same sequential fold.
constexpr int kChunkPairs = 16;
constexpr int kChunkBytes = kChunkPairs * 68;
template <int P>
constexpr int BatchSmemRows() {
  return kBatchWarps * 32 / P;
}

template <int P>
__global__ void __launch_bounds__(kBatchWarps * 32) MatVecBatchSmemQ8_0Kernel(BatchLaunch l) {
  extern __shared__ __align__(16) uint8_t chunk_smem[];  // [2][kRows][kChunkBytes]
  const MatVecArgs& a = l.a;
  constexpr int kRows = BatchSmemRows<P>();
  constexpr int kPieces = kChunkBytes / 16;  // 16-byte copies per row and chunk
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int row0 = blockIdx.x * kRows;
  const int rows = min(kRows, a.rows - row0);
  const int r = warp * (32 / P) + lane / P;
  const int t = blockIdx.y * P + lane % P;
  const bool active = r < rows && t < a.n_tokens;
  const uint8_t* w0 = a.w + uint64_t(row0) * a.row_bytes;
  const int n_chunks = a.n / (64 * kChunkPairs);
  auto issue = [&](int c, int buf) {
    uint8_t* dst = chunk_smem + buf * (kRows * kChunkBytes);
    for (int i = threadIdx.x; i < rows * kPieces; i += kBatchWarps * 32) {
      const int rr = i / kPieces, j = i % kPieces;
      CpAsync16(SmemAddr(dst + rr * kChunkBytes + 16 * j),
                w0 + uint64_t(rr) * a.row_bytes + uint64_t(c) * kChunkBytes + 16 * j);
    }
    CpAsyncCommit();
  };
  const int8_t* xq = nullptr;
  const float2* xd = nullptr;
  if (active) {
    const uint8_t* xr = BatchXRow(a, row0 + r, t);
    xq = reinterpret_cast<const int8_t*>(xr);
    xd = reinterpret_cast<const float2*>(xr + a.n);
  }
  float acc = 0.0f;
  issue(0, 0);
  for (int c = 0; c < n_chunks; ++c) {
    if (c + 1 < n_chunks) {
      issue(c + 1, (c + 1) & 1);
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    __syncthreads();
    if (active) {
      const uint32_t* sw = reinterpret_cast<const uint32_t*>(
          chunk_smem + (c & 1) * (kRows * kChunkBytes) + r * kChunkBytes);
#pragma unroll 2
      for (int p = 0; p < kChunkPairs; ++p) {
        uint32_t wv[17];
#pragma unroll
        for (int k = 0; k < 17; ++k) wv[k] = sw[17 * p + k];
        const int gp = c * kChunkPairs + p;
        acc = FoldPairQ8_0(acc, wv, xq + 64 * gp, __ldg(xd + gp));
      }
    }
    __syncthreads();
  }
  if (active) a.y[uint64_t(t) * a.y_row_floats + row0 + r] = acc;
}

template <int NR>
struct GroupLaunch {
  MatVecArgs a;          // tile mode: a.tiles, a.pairs, a.pair_div
  const uint8_t* w_up;   // NR == 2: the up weight (a.w is gate)
  const float* route_w;  // NR == 2: [pairs]
  float clamp;
  int tile_rows;
};

// grid (row tiles of the expert matrix, expert tiles): the block's rows of its tile's expert
// staged once, then every pair of the tile computed from them in pair order.
template <DType T, int NR>
__global__ void __launch_bounds__(kTileThreads, NR == 2 ? kTileMinBlocks - 2 : kTileMinBlocks)
    MoeGroupTileKernel(GroupLaunch<NR> l) {
  extern __shared__ __align__(16) uint8_t tile_smem[];
  __shared__ uint64_t grid_smem[T == DType::kIQ2_XXS ? kIq2TableEntries : 1];
  const MatVecArgs& a = l.a;
  const int* tile = a.tiles + 3 * blockIdx.y;
  const int count = tile[2];
  if (count <= 0) return;
  const int row0 = blockIdx.x * l.tile_rows;
  const int rows = min(l.tile_rows, a.rows - row0);
  const uint64_t off = uint64_t(tile[0]) * a.expert_bytes + uint64_t(row0) * a.row_bytes;
  const uint8_t* w[NR];
  w[0] = a.w + off;
  if constexpr (NR == 2) w[1] = l.w_up + off;
  TileIssue<NR>(w, rows, int(a.row_bytes), tile_smem);
  TileTables<T>(grid_smem, a.iq2_grid);
  CpAsyncWait<0>();
  __syncthreads();
  for (int j = 0; j < count; ++j) {
    const int p = a.pairs[tile[1] + j];
    const TileX x{a.x + uint64_t(p / a.pair_div) * a.x_row_bytes};
    float out[NR];
    TileCompute<T, NR>(w, rows, int(a.row_bytes), a.n, x, tile_smem, grid_smem, out);
    if (int(threadIdx.x) < rows) {
      float* y = a.y + uint64_t(p) * a.y_row_floats + row0 + threadIdx.x;
      if constexpr (NR == 2) {
        *y = __fmul_rn(ClampedSwiGlu(out[0], out[1], l.clamp), l.route_w[p]);
      } else {
        *y = out[0];
      }
    }
  }
}

bool BatchKernelsOn() {
  static const bool on = [] {
    const char* env = std::getenv("FLASHKV_CUDA_BATCH");
    return env == nullptr || std::atoi(env) != 0;
  }();
  return on;
}

template <DType T, int NR>
bool LaunchGroup(CudaBackend::State& s, const GroupLaunch<NR>& base, uint64_t weight_bytes) {
  const MatVecArgs& a = base.a;
  const int tile_rows = TileRowsFor(a.row_bytes, NR);
  if (tile_rows == 0) return false;
  GroupLaunch<NR> l = base;
  l.tile_rows = tile_rows;
  const unsigned smem = TileSmemBytes(a.row_bytes, NR, tile_rows, a.n / TileFormat<T>::kValues);
  const dim3 grid(unsigned((a.rows + tile_rows - 1) / tile_rows), unsigned(a.n_tiles));
  PreferSharedForTiles(MoeGroupTileKernel<T, NR>);
  s.Launch(MoeGroupTileKernel<T, NR>, grid, dim3(kTileThreads), smem, l, weight_bytes);
  return true;
}

template <int NR>
bool LaunchGroupTyped(CudaBackend::State& s, DType type, const GroupLaunch<NR>& l,
                      uint64_t weight_bytes) {
  switch (type) {
    case DType::kQ8_0:
      return LaunchGroup<DType::kQ8_0, NR>(s, l, weight_bytes);
    case DType::kQ2_K:
      return LaunchGroup<DType::kQ2_K, NR>(s, l, weight_bytes);
    case DType::kIQ2_XXS:
      return LaunchGroup<DType::kIQ2_XXS, NR>(s, l, weight_bytes);
    default:
      return false;
  }
}

}  // namespace

int MoeGroupMaxTokens() {
  static const int v = [] {
    const char* env = std::getenv("FLASHKV_CUDA_MOE_GROUP_MAX");
    const int e = env != nullptr ? std::atoi(env) : -1;
    return e >= 0 ? e : kMoeGroupMaxTokens;
  }();
  return BatchKernelsOn() ? v : 0;
}

bool LaunchMatVecBatch(CudaBackend::State& s, DType type, const MatVecArgs& a) {
  if (!BatchKernelsOn() || type != DType::kQ8_0 || a.tiles != nullptr || a.n_tokens < 2 ||
      a.n_tokens > kMatVecBatchMaxTokens || a.n % 64 != 0 || a.row_bytes % 4 != 0 ||
      reinterpret_cast<uintptr_t>(a.w) % 4 != 0 || a.x_row_bytes % 16 != 0 ||
      a.x_group_bytes % 16 != 0) {
    return false;
  }
  int P = 2;
  while (P < a.n_tokens && P < 32) P *= 2;
  const BatchLaunch l{a, P};
  const dim3 block(kBatchWarps * 32);
  const unsigned row_groups = unsigned((a.n_tokens + P - 1) / P);
  const bool staged = P >= 16 && a.n % (64 * kChunkPairs) == 0 && a.row_bytes % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(a.w) % 16 == 0;
  if (staged) {
    const int rows_per_block = kBatchWarps * 32 / P;
    const dim3 grid(unsigned((a.rows + rows_per_block - 1) / rows_per_block), row_groups);
    const unsigned smem = unsigned(2 * rows_per_block * kChunkBytes);
    if (P == 16) {
      PreferSharedForTiles(MatVecBatchSmemQ8_0Kernel<16>);
      s.Launch(MatVecBatchSmemQ8_0Kernel<16>, grid, block, smem, l, a.weight_bytes);
    } else {
      PreferSharedForTiles(MatVecBatchSmemQ8_0Kernel<32>);
      s.Launch(MatVecBatchSmemQ8_0Kernel<32>, grid, block, smem, l, a.weight_bytes);
    }
    return true;
  }
  const int rows_per_block = kBatchWarps * (32 / P);
  const dim3 grid(unsigned((a.rows + rows_per_block - 1) / rows_per_block), row_groups);
  switch (P) {
    case 2:
      s.Launch(MatVecBatchQ8_0Kernel<2>, grid, block, 0, l, a.weight_bytes);
      break;
    case 4:
      s.Launch(MatVecBatchQ8_0Kernel<4>, grid, block, 0, l, a.weight_bytes);
      break;
    case 8:
      s.Launch(MatVecBatchQ8_0Kernel<8>, grid, block, 0, l, a.weight_bytes);
      break;
    case 16:
      s.Launch(MatVecBatchQ8_0Kernel<16>, grid, block, 0, l, a.weight_bytes);
      break;
    default:
      s.Launch(MatVecBatchQ8_0Kernel<32>, grid, block, 0, l, a.weight_bytes);
      break;
  }
  return true;
}

bool LaunchMoeGroupGateUp(CudaBackend::State& s, DType type, const GateUpArgs& g) {
  const GroupLaunch<2> l{g.mv, g.w_up, g.route_w, g.clamp, 0};
  return LaunchGroupTyped<2>(s, type, l, g.mv.weight_bytes);
}

bool LaunchMoeGroupDown(CudaBackend::State& s, DType type, const MatVecArgs& a) {
  const GroupLaunch<1> l{a, nullptr, nullptr, 0.0f, 0};
  return LaunchGroupTyped<1>(s, type, l, a.weight_bytes);
}

}  // namespace flashkv::cuda
