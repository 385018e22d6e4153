// The warp-per-row product kernels' one body (products/mxfp4_matvec.cu, products/kquant_matvec.cu):
// which activation and output rows a warp visits — plain mode, a block of `kTokens` consecutive
// tokens (blockIdx.y); tile mode (expert products), the entries of tile blockIdx.y
// (MatVecArgs) — and the plain / gate-up epilogues around a per-type row dot. Must not: know a
// block format (the dot functor does).
#pragma once

#include <cstdint>

#include "backend/cuda/device/common.cuh"
#include "backend/cuda/products/launch.h"

namespace flashkv::cuda {

struct RowTile {
  int nt = 0;
  int expert = 0;
  const int32_t* pairs = nullptr;
  int t0 = 0;
};

template <int kTokens>
__device__ __forceinline__ RowTile ResolveRowTile(const MatVecArgs& a) {
  RowTile r;
  if (a.tiles == nullptr) {
    r.t0 = blockIdx.y * kTokens;
    r.nt = min(kTokens, a.n_tokens - r.t0);
  } else {
    const int32_t* tile = a.tiles + 3 * blockIdx.y;
    r.expert = tile[0];
    r.pairs = a.pairs + tile[1];
    r.nt = tile[2];
  }
  return r;
}

// Activation row and output row of entry t of the tile.
__device__ __forceinline__ void TileEntryRows(const MatVecArgs& a, const RowTile& tr, int t,
                                              int* xrow, int* yrow) {
  if (tr.pairs == nullptr) {
    *xrow = *yrow = tr.t0 + t;
  } else {
    const int p = tr.pairs[t];
    *xrow = p / a.pair_div;
    *yrow = p;
  }
}

// y = W x over the launch's token block or tile: warp w of the block owns weight row
// blockIdx.x * kWarps + w; dot(wrow, xrow, n) must return the row product on every lane.
template <int kWarps, int kTokens, typename Dot>
__device__ __forceinline__ void RowTileMatVec(const MatVecArgs& a, Dot dot) {
  const int row = blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (row >= a.rows) return;
  const RowTile tr = ResolveRowTile<kTokens>(a);
  const int slice = a.rows_per_group > 0 ? row / a.rows_per_group : 0;
  const uint8_t* wrow =
      ExpertMatrix(a.w, a.w_experts, tr.expert, a.expert_bytes) + uint64_t(row) * a.row_bytes;
  for (int t = 0; t < tr.nt; ++t) {
    int xr, yr;
    TileEntryRows(a, tr, t, &xr, &yr);
    const uint8_t* x = a.x + uint64_t(xr) * a.x_row_bytes + uint64_t(slice) * a.x_group_bytes;
    const float v = dot(wrow, x, a.n);
    if ((threadIdx.x & 31) == 0) a.y[uint64_t(yr) * a.y_row_floats + row] = v;
  }
}

// Expert gate/up with GateUpKernel's epilogue: clamped SwiGLU times the route weight.
template <int kWarps, int kTokens, typename Dot>
__device__ __forceinline__ void RowTileGateUp(const GateUpArgs& g, Dot dot) {
  const MatVecArgs& a = g.mv;
  const int row = blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (row >= a.rows) return;
  const RowTile tr = ResolveRowTile<kTokens>(a);
  const uint64_t off = uint64_t(row) * a.row_bytes;
  const uint8_t* wg = ExpertMatrix(a.w, a.w_experts, tr.expert, a.expert_bytes) + off;
  const uint8_t* wu = ExpertMatrix(g.w_up, g.up_experts, tr.expert, a.expert_bytes) + off;
  for (int t = 0; t < tr.nt; ++t) {
    int xr, p;
    TileEntryRows(a, tr, t, &xr, &p);
    const uint8_t* x = a.x + uint64_t(xr) * a.x_row_bytes;
    const float gate = dot(wg, x, a.n);
    const float up = dot(wu, x, a.n);
    if ((threadIdx.x & 31) == 0)
      a.y[uint64_t(p) * a.y_row_floats + row] =
          __fmul_rn(ClampedSwiGlu(gate, up, g.clamp), g.route_w[p]);
  }
}

// Grid of a warp-per-row launch: kWarps rows per block, one block row per token block or tile.
template <int kWarps, int kTokens>
dim3 RowTileGrid(const MatVecArgs& a) {
  const int blocks_y = a.tiles != nullptr ? a.n_tiles : int((a.n_tokens + kTokens - 1) / kTokens);
  return dim3((a.rows + kWarps - 1) / kWarps, blocks_y);
}

}  // namespace flashkv::cuda
