// Dense Q8_0 products of a step of 2–31 decode rows (issue #18). The 8-token warp kernel read
// each weight row once per 8 rows with a few loads in flight per warp (31 ms of a 16-row
// step on Flash, docs/PERFORMANCE.md); here a block stages a tile of weight rows once
// (TileIssue, the one-token tile kernels' cp.async copy) and forms, for each chunk of up to
// kChunk tokens, every token's block terms from it (TileTermsQ8Pairs / TileTermsUnits: the
// formulas TileCompute uses for a token alone), then folds each (token, row) in block order
// with unfused adds from 0 — TileCompute's fold, so each output has the bits of its token
// alone (and of ref::DotQ8). Unlike TileCompute, which folds one token by `rows` threads, the
// chunk's tokens are folded side by side.
#include <cstdlib>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/matvec_rows.h"
#include "backend/cuda/matvec_tile.cuh"

namespace flashkv::cuda {
namespace {

// Tokens whose terms are held at once: their terms (kChunk × the tile's blocks, 4 bytes each)
// beside the 34-byte blocks keep a block's shared memory near twice the tile's.
constexpr int kChunk = 8;

struct RowsLaunch {
  MatVecArgs a;
  int tile_rows;
};

__device__ __forceinline__ void ChunkTerms(const uint8_t* const (&tile)[1], int rows, int row_bytes,
                                           int n, const TileX& x, float* terms) {
  constexpr DType T = DType::kQ8_0;
  if (Q8PairsFit<1>(tile, n / 32)) {
    TileTermsQ8Pairs<1>(tile, rows, row_bytes, n, x, terms);
  } else {
    TileTermsUnits<T, 1>(tile, rows, row_bytes, n, x, nullptr, terms);
  }
}

// grid: row tiles of the matrix. The block's tile staged once, then the tokens in chunks.
__global__ void __launch_bounds__(kTileThreads, kTileMinBlocks) MatVecRowsQ8_0Kernel(RowsLaunch l) {
  extern __shared__ __align__(16) uint8_t tile_smem[];
  const MatVecArgs& a = l.a;
  const int row0 = blockIdx.x * l.tile_rows;
  const int rows = min(l.tile_rows, a.rows - row0);
  const int row_bytes = int(a.row_bytes);
  const int tile_bytes = rows * row_bytes;
  const uint8_t* w[1] = {a.w + uint64_t(row0) * a.row_bytes};
  TileIssue<1>(w, rows, row_bytes, tile_smem);
  const uint8_t* tile[1] = {TileIn(tile_smem, 0, tile_bytes, w[0])};
  const int nblk = a.n / 32;
  float* terms = reinterpret_cast<float*>(tile_smem + TileSlotBytes(l.tile_rows * row_bytes));
  const int per_token = rows * nblk;  // even whenever the pair path runs (nblk even)
  CpAsyncWait<0>();
  __syncthreads();
  for (int t0 = 0; t0 < a.n_tokens; t0 += kChunk) {
    const int cnt = min(kChunk, a.n_tokens - t0);
    for (int c = 0; c < cnt; ++c) {
      const TileX x{a.x + uint64_t(t0 + c) * a.x_row_bytes, row0, a.rows_per_group,
                    a.x_group_bytes};
      ChunkTerms(tile, rows, row_bytes, a.n, x, terms + c * per_token);
    }
    __syncthreads();
    for (int f = threadIdx.x; f < cnt * rows; f += kTileThreads) {
      const int c = f / rows, r = f % rows;
      const float* tr = terms + c * per_token + r * nblk;
      float acc = 0.0f;
      for (int k = 0; k < nblk; ++k) acc = __fadd_rn(acc, tr[k]);
      a.y[uint64_t(t0 + c) * a.y_row_floats + row0 + r] = acc;
    }
    __syncthreads();
  }
}

}  // namespace

int DenseRowsMaxTokens() {
  static const int v = [] {
    const char* env = std::getenv("FLASHKV_CUDA_DENSE_ROWS_MAX");
    const int e = env != nullptr ? std::atoi(env) : -1;
    return e >= 0 ? e : kDenseRowsMaxTokens;
  }();
  return v;
}

bool LaunchMatVecRowsQ8_0(CudaBackend::State& s, const MatVecArgs& a) {
  if (a.tiles != nullptr || a.n_tokens < 2 || a.n_tokens > DenseRowsMaxTokens()) return false;
  if (a.n % 32 != 0) return false;
  const int tile_rows = TileRowsFor(a.row_bytes, 1);
  if (tile_rows == 0) return false;
  const int nblk = a.n / 32;
  const uint64_t smem = uint64_t(TileSlotBytes(int(a.row_bytes) * tile_rows)) +
                        sizeof(float) * uint64_t(kChunk) * uint64_t(tile_rows) * uint64_t(nblk);
  if (smem > uint64_t(kTileSmemLimit)) return false;
  PreferSharedForTiles(MatVecRowsQ8_0Kernel);
  const RowsLaunch l{a, tile_rows};
  s.Launch(MatVecRowsQ8_0Kernel, dim3(CeilDiv(a.rows, tile_rows)), dim3(kTileThreads),
           unsigned(smem), l, a.weight_bytes);
  return true;
}

}  // namespace flashkv::cuda
