// MatMul, MatMulGrouped and the shared weight-product kernels: activation quantizers
// (ds4's Q8_0 / Q8_K, bit for bit) and MatVecKernel / GateUpKernel, one warp per weight
// row and up to 8 tokens (or expert slots) per block row, so each weight row is read once
// per 8 activation rows. See device/matvec.cuh for the float order.
#include <algorithm>
#include <string>
#include <type_traits>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device/act_quant.cuh"
#include "backend/cuda/device/matvec.cuh"
#include "backend/cuda/device/matvec_tile.cuh"
#include "backend/cuda/device/matvec_tp.cuh"
#include "backend/cuda/products/kquant_launch.h"
#include "backend/cuda/products/launch.h"
#include "backend/cuda/products/mxfp4_launch.h"

namespace flashkv {
namespace cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

struct QuantArgs {
  const float* x;  // [n_rows, n]
  uint8_t* out;    // [n_rows, row_bytes]
  int n;
  int n_rows;
  uint64_t row_bytes;
};

// One warp per block of 32 (Q8_0) or 256 (Q8_K) values (device/act_quant.cuh).
__global__ void QuantizeQ8_0Kernel(QuantArgs a) {
  PdlTrigger();  // launched without the overlap flag: the next tile kernel may start
  const int64_t blk = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  const int per_row = a.n / 32;
  if (blk >= int64_t(per_row) * a.n_rows) return;
  const int64_t row = blk / per_row;
  const int b = int(blk % per_row);
  QuantizeQ8_0BlockWarp(a.x + row * a.n + b * 32, a.out + row * a.row_bytes, a.n, b);
}

// Q8_0 by rows (CudaBackendOptions::quant_rows, the default): 8 lanes a block and 4
// values a lane (one 16-byte load), so a warp reads 4 consecutive blocks — 512 contiguous
// bytes — and writes their 128 quants with one 4-byte store a lane; a block's amax takes 3
// shuffles within its 8 lanes. A maximum is the same in any order and each value's quant is
// QuantizeQ8_0ValueWarp's formula (device/act_quant.cuh), so the bits are the warp-per-block
// kernel's. The warps stride over the blocks from a bounded grid: the warp-per-block kernel
// launches a CTA per 4 blocks (524,288 for a prefill chunk's attention output, 2,048 × 32,768
// values) and took 25.2 ms of a 16-layer 2,048-token chunk on the H100 (129 launches; ~0.4
// TB/s for the ~10 GB they move: docs/PERFORMANCE.md "Prefill in solo chunks"); this one 8.2 ms
// in the same chunk (docs/PERFORMANCE.md "The activation quantizer and a fast float path").
constexpr int kQuantQ8_0Warps = 8;
constexpr int kQuantQ8_0MaxBlocks = 4096;

__global__ void __launch_bounds__(kQuantQ8_0Warps * 32) QuantizeQ8_0RowsKernel(QuantArgs a) {
  PdlTrigger();  // launched without the overlap flag: the next tile kernel may start
  const int lane = threadIdx.x & 31;
  const int per_row = a.n / 32;
  const int64_t total = int64_t(per_row) * a.n_rows;  // blocks
  const int64_t stride = int64_t(gridDim.x) * kQuantQ8_0Warps * 4;
  for (int64_t base = (int64_t(blockIdx.x) * kQuantQ8_0Warps + (threadIdx.x >> 5)) * 4;
       base < total; base += stride) {
    const int64_t blk = base + (lane >> 3);
    const bool valid = blk < total;
    // x is [n_rows, n] with n a multiple of 32: block blk starts 32·blk values in.
    const float4 v =
        valid ? reinterpret_cast<const float4*>(a.x + blk * 32)[lane & 7] : make_float4(0, 0, 0, 0);
    float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, o));
    if (!valid) continue;  // after the shuffles, which every lane takes part in
    const float d = __fdiv_rn(amax, 127.0f);
    const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
    const auto q = [id](float x) {
      return uint32_t(uint8_t(int8_t(min(max(__float2int_rn(__fmul_rn(x, id)), -128), 127))));
    };
    const int64_t row = blk / per_row;
    const int b = int(blk - row * per_row);
    uint8_t* out = a.out + row * a.row_bytes;
    reinterpret_cast<uint32_t*>(out + b * 32)[lane & 7] =
        q(v.x) | q(v.y) << 8 | q(v.z) << 16 | q(v.w) << 24;
    if ((lane & 7) == 0) reinterpret_cast<float*>(out + a.n)[b] = d;
  }
}

__global__ void QuantizeQ8_KKernel(QuantArgs a) {
  PdlTrigger();  // launched without the overlap flag: the next tile kernel may start
  const int64_t blk = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  const int per_row = a.n / 256;
  if (blk >= int64_t(per_row) * a.n_rows) return;
  const int64_t row = blk / per_row;
  const int b = int(blk % per_row);
  QuantizeQ8_KBlockWarp(a.x + row * a.n + b * 256, a.out + row * a.row_bytes, a.n, b);
}

// Resolves activation row t of the block's tile: its x pointer and its y row.
struct TileRows {
  int nt = 0;
  int expert = 0;
  int xrow[8];
  int yrow[8];
};

template <int NT>
__device__ __forceinline__ TileRows ResolveTile(const MatVecArgs& a) {
  TileRows r;
  if (a.tiles == nullptr) {
    const int t0 = blockIdx.y * NT;
    r.nt = min(NT, a.n_tokens - t0);
#pragma unroll
    for (int t = 0; t < NT; ++t) r.xrow[t] = r.yrow[t] = t0 + t;
  } else {
    const int* tile = a.tiles + 3 * blockIdx.y;
    r.expert = tile[0];
    r.nt = tile[2];
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int p = t < r.nt ? a.pairs[tile[1] + t] : 0;
      r.xrow[t] = p / a.pair_div;
      r.yrow[t] = p;
    }
  }
  return r;
}

// The NR rows' dot products for the tile's activation rows; lane t holds token t's.
template <DType T, bool kQ8, int NT, int NR>
__device__ __forceinline__ void RowDots(const MatVecArgs& a, const uint8_t* const* wrows,
                                        const uint8_t* const* xb, int nt, float* fold,
                                        float (&out)[NR], uint8_t* stage = nullptr) {
  const int lane = threadIdx.x & 31;
  if constexpr (kQ8) {
    WarpRowDotQ8<T, NT, NR>(wrows, xb, nt, a.n, fold, a.iq2_grid, out, stage);
  } else {
    const float* xf[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) xf[t] = reinterpret_cast<const float*>(xb[t]);
    float acc[NR][NT];
    WarpRowDotF32<T, NT, NR>(wrows, xf, nt, a.n, lane, 32, a.iq2_grid, acc);
#pragma unroll
    for (int r = 0; r < NR; ++r) {
      out[r] = acc[r][0];
#pragma unroll
      for (int t = 1; t < NT; ++t) {
        if (lane == t) out[r] = acc[r][t];
      }
    }
  }
}

template <DType T, bool kQ8, int NT>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) MatVecKernel(MatVecArgs a) {
  __shared__ float fold_all[kQ8 ? kWarpsPerBlock * kFoldFloats : 1];
  constexpr bool kStage = kQ8 && T == DType::kQ8_0 && NT == 1;
  __shared__ __align__(16) uint8_t stage_all[kStage ? kWarpsPerBlock * kQ8_0StageBytes : 16];
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * kWarpsPerBlock + warp;
  if (row >= a.rows) return;
  const TileRows tr = ResolveTile<NT>(a);
  if (tr.nt <= 0) return;
  const int slice = a.rows_per_group > 0 ? row / a.rows_per_group : 0;
  const uint8_t* xb[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    xb[t] = a.x + uint64_t(tr.xrow[t]) * a.x_row_bytes + uint64_t(slice) * a.x_group_bytes;
  }
  const uint8_t* wrow[1] = {ExpertMatrix(a.w, a.w_experts, tr.expert, a.expert_bytes) +
                            uint64_t(row) * a.row_bytes};
  float r[1];
  RowDots<T, kQ8, NT, 1>(a, wrow, xb, tr.nt, fold_all + warp * (kQ8 ? kFoldFloats : 0), r,
                         kStage ? stage_all + warp * kQ8_0StageBytes : nullptr);
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    if (lane == t && t < tr.nt) a.y[uint64_t(tr.yrow[t]) * a.y_row_floats + row] = r[0];
  }
}

// fp32 activations, few long rows: one row per block of kSplitWarps warps (SplitRowDotsF32).
template <DType T, int NT>
__global__ void __launch_bounds__(kSplitWarps * 32) MatVecSplitKernel(MatVecArgs a) {
  __shared__ float part[kSplitWarps][NT];
  const int row = blockIdx.x;
  const TileRows tr = ResolveTile<NT>(a);
  if (tr.nt <= 0) return;
  const int slice = a.rows_per_group > 0 ? row / a.rows_per_group : 0;
  const float* xf[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    xf[t] = reinterpret_cast<const float*>(a.x + uint64_t(tr.xrow[t]) * a.x_row_bytes +
                                           uint64_t(slice) * a.x_group_bytes);
  }
  const uint8_t* wrow =
      ExpertMatrix(a.w, a.w_experts, tr.expert, a.expert_bytes) + uint64_t(row) * a.row_bytes;
  const float sum = SplitRowDotsF32<T, NT>(wrow, xf, tr.nt, a.n, a.iq2_grid, part);
  if (threadIdx.x < tr.nt) a.y[uint64_t(tr.yrow[threadIdx.x]) * a.y_row_floats + row] = sum;
}

template <DType T, bool kQ8, int NT>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) GateUpKernel(GateUpArgs g) {
  __shared__ float fold_all[kQ8 ? kWarpsPerBlock * kFoldFloats : 1];
  const MatVecArgs& a = g.mv;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * kWarpsPerBlock + warp;
  if (row >= a.rows) return;
  const TileRows tr = ResolveTile<NT>(a);
  if (tr.nt <= 0) return;
  const uint8_t* xb[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) xb[t] = a.x + uint64_t(tr.xrow[t]) * a.x_row_bytes;
  const uint64_t off = uint64_t(row) * a.row_bytes;
  const uint8_t* wrows[2] = {ExpertMatrix(a.w, a.w_experts, tr.expert, a.expert_bytes) + off,
                             ExpertMatrix(g.w_up, g.up_experts, tr.expert, a.expert_bytes) + off};
  float gu[2];
  RowDots<T, kQ8, NT, 2>(a, wrows, xb, tr.nt, fold_all + warp * (kQ8 ? kFoldFloats : 0), gu);
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    if (lane == t && t < tr.nt) {
      const int p = tr.yrow[t];
      a.y[uint64_t(p) * a.y_row_floats + row] =
          __fmul_rn(ClampedSwiGlu(gu[0], gu[1], g.clamp), g.route_w[p]);
    }
  }
}

// One activation row (decode), q8, the ds4 types: a block per tile of consecutive weight rows
// (device/matvec_tile.cuh), grid (tiles, activation rows); plain mode or tile mode with tiles of
// one.
template <typename A>
struct TileLaunch {
  A args;
  int tile_rows;
  unsigned buf_bytes;  // one tile buffer (TileSmemBytes); two when the blocks loop
};

template <DType T>
__global__ void __launch_bounds__(kTileThreads, kTileMinBlocks)
    MatVecTileKernel(TileLaunch<MatVecArgs> l) {
  extern __shared__ __align__(16) uint8_t tile_smem[];
  __shared__ uint64_t grid_smem[T == DType::kIQ2_XXS ? kIq2TableEntries : 1];
  const MatVecArgs& a = l.args;
  if (a.tiles != nullptr) PdlWait();  // the expert tiles are the predecessor's (device/pdl.cuh)
  const TileRows tr = ResolveTile<1>(a);
  if (tr.nt <= 0) {
    PdlWait();
    return;
  }
  const uint8_t* w = ExpertMatrix(a.w, a.w_experts, tr.expert, a.expert_bytes);
  const uint8_t* x = a.x + uint64_t(tr.xrow[0]) * a.x_row_bytes;
  float* y = a.y + uint64_t(tr.yrow[0]) * a.y_row_floats;
  const int tile_rows = l.tile_rows;
  TileLoop<T, 1>((a.rows + tile_rows - 1) / tile_rows, a.n, tile_smem, l.buf_bytes, grid_smem,
                 a.iq2_grid,
                 [&](int t) {
                   const int row0 = t * tile_rows;
                   return TileJob<1>{{w + uint64_t(row0) * a.row_bytes},
                                     row0,
                                     min(tile_rows, a.rows - row0),
                                     int(a.row_bytes),
                                     TileX{x, row0, a.rows_per_group, a.x_group_bytes}};
                 },
                 [&](const TileJob<1>& j, const float(&out)[1]) {
                   if (int(threadIdx.x) < j.rows) y[j.row0 + threadIdx.x] = out[0];
                 });
}

// (Two weights' tiles: with kTileMinBlocks' 32 registers the IQ2_XXS one spills; registers
// come in steps of 8, so the next step is 40 and 6 blocks an SM, as MoeGateUpKernel.)
template <DType T>
__global__ void __launch_bounds__(kTileThreads, kTileMinBlocks - 2)
    GateUpTileKernel(TileLaunch<GateUpArgs> l) {
  extern __shared__ __align__(16) uint8_t tile_smem[];
  __shared__ uint64_t grid_smem[T == DType::kIQ2_XXS ? kIq2TableEntries : 1];
  const GateUpArgs& g = l.args;
  const MatVecArgs& a = g.mv;
  PdlWait();  // the tiles and route weights are the predecessor's (device/pdl.cuh)
  const TileRows tr = ResolveTile<1>(a);
  if (tr.nt <= 0) return;
  const uint8_t* wg = ExpertMatrix(a.w, a.w_experts, tr.expert, a.expert_bytes);
  const uint8_t* wu = ExpertMatrix(g.w_up, g.up_experts, tr.expert, a.expert_bytes);
  const uint8_t* x = a.x + uint64_t(tr.xrow[0]) * a.x_row_bytes;
  const int p = tr.yrow[0];
  float* y = a.y + uint64_t(p) * a.y_row_floats;
  const float route_w = g.route_w[p];
  const int tile_rows = l.tile_rows;
  TileLoop<T, 2>(
      (a.rows + tile_rows - 1) / tile_rows, a.n, tile_smem, l.buf_bytes, grid_smem, a.iq2_grid,
      [&](int t) {
        const int row0 = t * tile_rows;
        const uint64_t o = uint64_t(row0) * a.row_bytes;
        return TileJob<2>{
            {wg + o, wu + o}, row0, min(tile_rows, a.rows - row0), int(a.row_bytes), TileX{x}};
      },
      [&](const TileJob<2>& j, const float(&gu)[2]) {
        if (int(threadIdx.x) < j.rows) {
          y[j.row0 + threadIdx.x] = __fmul_rn(ClampedSwiGlu(gu[0], gu[1], g.clamp), route_w);
        }
      });
}

// The tile kernels for one activation row of a ds4 decode type, when a row fits a tile; false
// otherwise (the warp-per-row kernel takes it).
template <DType T, typename A>
bool LaunchTile(CudaBackend::State& s, const A& args, const MatVecArgs& a) {
  constexpr int kNR = std::is_same_v<A, GateUpArgs> ? 2 : 1;
  const int tile_rows = TileRowsFor(a.row_bytes, kNR, s.tile_bytes);
  if (tile_rows == 0) return false;
  const int nblk = a.n / TileFormat<T>::kValues;
  const unsigned buf = TileSmemBytes(a.row_bytes, kNR, tile_rows, nblk);
  bool loops = false;
  const int gx = TileGrid(int(CeilDiv(a.rows, tile_rows)), s.prop.multiProcessorCount,
                          s.tile_blocks_per_sm, &loops);
  const dim3 grid(gx, a.tiles != nullptr ? a.n_tiles : 1);
  const TileLaunch<A> l{args, tile_rows, buf};
  const unsigned smem = loops ? 2 * buf : buf;
  if constexpr (kNR == 2) {
    PreferSharedForTiles(GateUpTileKernel<T>);
    s.LaunchOverlapped(GateUpTileKernel<T>, grid, dim3(kTileThreads), smem, l, a.weight_bytes);
  } else {
    PreferSharedForTiles(MatVecTileKernel<T>);
    s.LaunchOverlapped(MatVecTileKernel<T>, grid, dim3(kTileThreads), smem, l, a.weight_bytes);
  }
  return true;
}

template <DType T, bool kQ8, typename A>
bool LaunchTyped(CudaBackend::State& s, const A& args, const MatVecArgs& a, int nt) {
  if constexpr (kQ8 && T == DType::kQ8_0 && std::is_same_v<A, MatVecArgs>) {
    // Prefill batches on the tensor cores (same bits; the dp4a kernels when it is off or
    // the shape does not fit).
    if (s.imma > 0 && a.tiles == nullptr && a.n_tokens >= s.imma_min_tokens &&
        LaunchMatMulImmaQ8_0(s, s.imma, a)) {
      return true;
    }
  }
  if constexpr (!kQ8 && (T == DType::kF16 || T == DType::kBF16 || T == DType::kF32) &&
                std::is_same_v<A, MatVecArgs>) {
    if (LaunchMatMulFast(s, T, a)) return true;
    if (s.tiled_prefill && LaunchMatVecTiled(s, T, a)) return true;
  }
  if constexpr (kQ8 && T == DType::kQ2_K && std::is_same_v<A, MatVecArgs>) {
    if (s.imma > 0 && a.tiles != nullptr && ImmaTilesOn(s, a.tile_nt) && LaunchDownImmaQ2K(s, a)) {
      return true;
    }
  }
  if constexpr (kQ8 && T == DType::kIQ2_XXS && std::is_same_v<A, GateUpArgs>) {
    if (s.imma > 0 && a.tiles != nullptr && ImmaTilesOn(s, a.tile_nt) &&
        LaunchGateUpImmaIq2(s, args)) {
      return true;
    }
  }
  if constexpr (kQ8 && TileType(T)) {
    if (a.tiles != nullptr ? a.tile_nt == 1 : a.n_tokens == 1) {
      if (LaunchTile<T>(s, args, a)) return true;
    } else if (a.tiles != nullptr && a.tile_nt == kTpTokens) {
      // Expert tiles of 32 pairs: token-parallel (64-pair tiles are the tensor cores' only). Plain
      // batches take the 8-token warp kernel, which reads its activations coalesced and measured
      // faster (docs/CUDA.md).
      const dim3 grid(CeilDiv(a.rows, kTpWarps), a.n_tiles);
      if constexpr (std::is_same_v<A, GateUpArgs>) {
        s.Launch(GateUpTPKernel<T>, grid, dim3(kTpWarps * 32), 0, args, a.weight_bytes);
      } else {
        s.Launch(MatVecTPKernel<T>, grid, dim3(kTpWarps * 32), 0, args, a.weight_bytes);
      }
      return true;
    }
  }
  if (nt > 8) return false;  // 32-entry tiles are for the token-parallel kernels only
  const int n_tiles = a.tiles != nullptr ? a.n_tiles : int(CeilDiv(a.n_tokens, nt));
  const dim3 grid(CeilDiv(a.rows, kWarpsPerBlock), n_tiles);
  const dim3 block(kWarpsPerBlock * 32);
  if constexpr (std::is_same_v<A, GateUpArgs>) {
    if (nt == 1) {
      s.Launch(GateUpKernel<T, kQ8, 1>, grid, block, 0, args, a.weight_bytes);
    } else {
      s.Launch(GateUpKernel<T, kQ8, 8>, grid, block, 0, args, a.weight_bytes);
    }
  } else if (!kQ8 && a.rows < kSplitBelowRows) {
    const dim3 split_grid(a.rows, n_tiles);
    if (nt == 1) {
      s.Launch(MatVecSplitKernel<T, 1>, split_grid, dim3(kSplitWarps * 32), 0, args,
               a.weight_bytes);
    } else {
      s.Launch(MatVecSplitKernel<T, 8>, split_grid, dim3(kSplitWarps * 32), 0, args,
               a.weight_bytes);
    }
  } else {
    if (nt == 1) {
      s.Launch(MatVecKernel<T, kQ8, 1>, grid, block, 0, args, a.weight_bytes);
    } else {
      s.Launch(MatVecKernel<T, kQ8, 8>, grid, block, 0, args, a.weight_bytes);
    }
  }
  return true;
}

template <typename A>
bool LaunchAny(CudaBackend::State& s, DType type, bool q8, const A& args, const MatVecArgs& a,
               int nt) {
  const int unit = type == DType::kF32 ? 4 : (type == DType::kF16 || type == DType::kBF16) ? 8 : 32;
  if (a.n % unit != 0) return false;
  if (q8) {
    switch (type) {
      case DType::kQ8_0:
        return LaunchTyped<DType::kQ8_0, true>(s, args, a, nt);
      case DType::kQ2_K:
        return LaunchTyped<DType::kQ2_K, true>(s, args, a, nt);
      case DType::kQ4_K:
        return LaunchTyped<DType::kQ4_K, true>(s, args, a, nt);
      case DType::kIQ2_XXS:
        return LaunchTyped<DType::kIQ2_XXS, true>(s, args, a, nt);
      case DType::kMXFP4:
        return LaunchMxfp4(s, args);
      case DType::kIQ4_NL:
        return LaunchIq4nl(s, args);  // products/mxfp4_launch.h
      default:
        if (HasKQuantKernel(type)) return LaunchKQuant(s, type, args);  // products/kquant_launch.h
        break;  // F32/F16/BF16 take fp32 activations in q8 mode too
    }
  }
  switch (type) {
    case DType::kF32:
      return LaunchTyped<DType::kF32, false>(s, args, a, nt);
    case DType::kF16:
      return LaunchTyped<DType::kF16, false>(s, args, a, nt);
    case DType::kBF16:
      return LaunchTyped<DType::kBF16, false>(s, args, a, nt);
    case DType::kQ8_0:
      return LaunchTyped<DType::kQ8_0, false>(s, args, a, nt);
    case DType::kQ2_K:
      return LaunchTyped<DType::kQ2_K, false>(s, args, a, nt);
    case DType::kQ4_K:
      return LaunchTyped<DType::kQ4_K, false>(s, args, a, nt);
    case DType::kIQ2_XXS:
      return LaunchTyped<DType::kIQ2_XXS, false>(s, args, a, nt);
    default:
      return LaunchKQuantF32(s, type, args);  // products/kquant_launch.h: the other block types
  }
}

// Activation rows per block row: 1 for a single token (decode), else 8.
int TileTokens(const MatVecArgs& a) {
  if (a.tiles != nullptr) return a.tile_nt;
  return a.n_tokens == 1 ? 1 : 8;
}

}  // namespace

ActQuant Q8ActFor(DType wtype) {
  switch (wtype) {
    case DType::kQ8_0:
    case DType::kMXFP4:
    case DType::kIQ4_NL:
      return ActQuant::kQ8_0;
    case DType::kQ2_K:
    case DType::kQ4_K:
    case DType::kIQ2_XXS:
      return ActQuant::kQ8_K;
    default:
      return HasKQuantKernel(wtype) ? ActQuant::kQ8_K : ActQuant::kNone;
  }
}

uint64_t Q8ActRowBytes(ActQuant q, int n) {
  // Quantized rows are padded to 16 bytes so their quants can be read as int4.
  switch (q) {
    case ActQuant::kQ8_0:
      return (uint64_t(n / 32) * 36 + 15) / 16 * 16;
    case ActQuant::kQ8_K:
      return (uint64_t(n / 256) * 292 + 15) / 16 * 16;
    default:
      return uint64_t(n) * sizeof(float);
  }
}

void LaunchQuantizeRows(CudaBackend::State& s, ActQuant q, const float* x, int n_rows, int n,
                        uint8_t* out) {
  QuantArgs a{x, out, n, n_rows, Q8ActRowBytes(q, n)};
  const int per_block = q == ActQuant::kQ8_0 ? 32 : 256;
  const uint64_t blocks = uint64_t(n / per_block) * n_rows;
  if (q == ActQuant::kQ8_0 && s.quant_rows) {
    const dim3 grid(std::min(CeilDiv(blocks, 4 * kQuantQ8_0Warps), unsigned(kQuantQ8_0MaxBlocks)));
    s.Launch(QuantizeQ8_0RowsKernel, grid, dim3(kQuantQ8_0Warps * 32), 0, a);
  } else if (q == ActQuant::kQ8_0) {
    s.Launch(QuantizeQ8_0Kernel, dim3(CeilDiv(blocks, kWarpsPerBlock)), dim3(kWarpsPerBlock * 32),
             0, a);
  } else if (q == ActQuant::kQ8_K) {
    const dim3 grid(CeilDiv(blocks, kWarpsPerBlock));
    s.Launch(QuantizeQ8_KKernel, grid, dim3(kWarpsPerBlock * 32), 0, a);
  }
}

bool LaunchMatVec(CudaBackend::State& s, DType type, bool q8, const MatVecArgs& a) {
  return LaunchAny(s, type, q8, a, a, TileTokens(a));
}

bool LaunchGateUp(CudaBackend::State& s, DType type, bool q8, const GateUpArgs& a) {
  return LaunchAny(s, type, q8, a, a.mv, TileTokens(a.mv));
}

}  // namespace cuda

namespace {

// Shared by MatMul and MatMulGrouped: x is [n_tokens·n_groups, in] slices; the weight's
// rows are split into n_groups equal groups, group g reading slice g of each token.
void Project(CudaBackend::State& s, const Weight& w, const float* x, int n_tokens, int n_groups,
             float* y, ActQuantMode aq) {
  const int in = int(w.ne[0]);
  const int rows = int(w.ne[1]);
  const ActQuant q = aq == ActQuantMode::kQ8 ? cuda::Q8ActFor(w.type) : ActQuant::kNone;
  cuda::MatVecArgs a;
  a.w = w.data.get();
  a.row_bytes = w.row_bytes;
  a.rows = rows;
  a.n = in;
  a.n_tokens = n_tokens;
  a.y = y;
  a.y_row_floats = uint64_t(rows);
  a.iq2_grid = s.iq2_grid;
  a.weight_bytes = w.matrix_bytes();
  const uint64_t slice_bytes = cuda::Q8ActRowBytes(q, in);
  if (q != ActQuant::kNone) {
    auto* xq = static_cast<uint8_t*>(
        s.Scratch(CudaScratch::kActQuant, slice_bytes * uint64_t(n_tokens) * n_groups));
    if (xq == nullptr) return;
    cuda::LaunchQuantizeRows(s, q, x, n_tokens * n_groups, in, xq);
    a.x = xq;
  } else {
    a.x = reinterpret_cast<const uint8_t*>(x);
  }
  a.x_row_bytes = slice_bytes * n_groups;
  if (n_groups > 1) {
    a.rows_per_group = rows / n_groups;
    a.x_group_bytes = slice_bytes;
  }
  if (!cuda::LaunchMatVec(s, w.type, q != ActQuant::kNone, a)) {
    s.Fail("matmul: no CUDA kernel for " + w.name + " (type " +
           std::string(GetDTypeInfo(w.type).name) + ", " + std::to_string(in) + " columns)");
  }
}

}  // namespace

void CudaBackend::MatMul(const Weight& w, DevPtr<const float> x, int n_tokens, DevPtr<float> y,
                         ActQuantMode aq) {
  if (n_tokens <= 0) return;
  Project(*s_, w, x.get(), n_tokens, 1, y.get(), aq);
}

void CudaBackend::MatMulGrouped(const Weight& w, DevPtr<const float> x, int n_tokens, int n_groups,
                                DevPtr<float> y, ActQuantMode aq) {
  if (n_tokens <= 0) return;
  Project(*s_, w, x.get(), n_tokens, n_groups, y.get(), aq);
}

}  // namespace flashkv
