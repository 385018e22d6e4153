// Which activation and output rows a warp-per-row product kernel visits (mxfp4_matvec.cu,
// kquant_matvec.cu): plain mode, a block of `kTokens` consecutive tokens (blockIdx.y); tile
// mode (expert products), the entries of tile blockIdx.y (MatVecArgs). Must not: compute.
#pragma once

#include <cstdint>

#include "backend/cuda/matvec_launch.h"

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

// Grid of a warp-per-row launch: kWarps rows per block, one block row per token block or tile.
template <int kWarps, int kTokens>
dim3 RowTileGrid(const MatVecArgs& a) {
  const int blocks_y = a.tiles != nullptr ? a.n_tiles : int((a.n_tokens + kTokens - 1) / kTokens);
  return dim3((a.rows + kWarps - 1) / kWarps, blocks_y);
}

}  // namespace flashkv::cuda
