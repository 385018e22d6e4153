// Routed experts of a few decode rows from different sessions (issue #18: a step of 2–31
// rows): MoeGroupTileKernel stages one tile of its expert's rows once (TileIssue) and runs
// TileCompute on it for every pair of the expert tile (≤ 8), the very computation
// GateUpTileKernel / MatVecTileKernel do for a tile of one pair — so each expert's blocks are
// read once per step for all the rows routed to it, and every pair keeps the bits of its
// token alone (docs/CUDA.md "Batched decode steps").

#include "backend/cuda/device/common.cuh"
#include "backend/cuda/device/matvec_tile.cuh"
#include "backend/cuda/products/moe_group.h"

namespace flashkv::cuda {
namespace {

template <int NR>
struct GroupLaunch {
  MatVecArgs a;                      // tile mode: a.tiles, a.pairs, a.pair_div
  const uint8_t* w_up;               // NR == 2: the up weight (a.w is gate)
  const uint8_t* const* up_experts;  // NR == 2: its table (GateUpArgs::up_experts)
  const float* route_w;              // NR == 2: [pairs]
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
  const uint64_t off = uint64_t(row0) * a.row_bytes;
  const uint8_t* w[NR];
  w[0] = ExpertMatrix(a.w, a.w_experts, tile[0], a.expert_bytes) + off;
  if constexpr (NR == 2) w[1] = ExpertMatrix(l.w_up, l.up_experts, tile[0], a.expert_bytes) + off;
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

template <DType T, int NR>
bool LaunchGroup(CudaBackend::State& s, const GroupLaunch<NR>& base, uint64_t weight_bytes) {
  const MatVecArgs& a = base.a;
  const int tile_rows = TileRowsFor(a.row_bytes, NR, s.tile_bytes);
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

bool LaunchMoeGroupGateUp(CudaBackend::State& s, DType type, const GateUpArgs& g) {
  const GroupLaunch<2> l{g.mv, g.w_up, g.up_experts, g.route_w, g.clamp, 0};
  return LaunchGroupTyped<2>(s, type, l, g.mv.weight_bytes);
}

bool LaunchMoeGroupDown(CudaBackend::State& s, DType type, const MatVecArgs& a) {
  const GroupLaunch<1> l{a, nullptr, nullptr, nullptr, 0.0f, 0};
  return LaunchGroupTyped<1>(s, type, l, a.weight_bytes);
}

}  // namespace flashkv::cuda
