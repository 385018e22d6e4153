// MXFP4 × Q8_0 products: one warp per weight row (two for gate/up), every activation row
// of the launch's token block or expert tile in turn. Lane l forms the terms of blocks
// l, l + 32, …; lane 0 then adds them in block order, unfused, starting from 0 — exactly
// ref::DotMXFP4's fold, so the result has its bits for any row length.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/mxfp4_dev.cuh"
#include "backend/cuda/mxfp4_launch.h"
#include "backend/cuda/row_tiles.cuh"

namespace flashkv::cuda {
namespace {

constexpr int kMxfp4Warps = 4;   // rows per block
constexpr int kMxfp4Tokens = 8;  // activation rows per block in plain mode

// ref::DotMXFP4 of one weight row against one Q8_0 activation row (qs [n], then d [n/32]);
// every lane returns it.
__device__ __forceinline__ float WarpDotMxfp4(const uint8_t* wrow, const uint8_t* xrow, int n) {
  const int lane = threadIdx.x & 31;
  const int nblk = n / 32;
  const int8_t* xq = reinterpret_cast<const int8_t*>(xrow);
  const float* xd = reinterpret_cast<const float*>(xrow + n);
  float acc = 0.0f;
  for (int base = 0; base < nblk; base += 32) {
    const int b = base + lane;
    const float term =
        b < nblk ? Mxfp4BlockTerm(wrow + size_t(kMxfp4BlockBytes) * b, xq + 32 * b, xd[b]) : 0.0f;
    const int cnt = min(32, nblk - base);
    for (int j = 0; j < 32; ++j) {
      const float v = __shfl_sync(kFullMask, term, j);
      if (j < cnt) acc = __fadd_rn(acc, v);
    }
  }
  return acc;
}

__global__ void __launch_bounds__(kMxfp4Warps * 32) Mxfp4MatVecKernel(MatVecArgs a) {
  const int row = blockIdx.x * kMxfp4Warps + (threadIdx.x >> 5);
  if (row >= a.rows) return;
  const RowTile tr = ResolveRowTile<kMxfp4Tokens>(a);
  const int slice = a.rows_per_group > 0 ? row / a.rows_per_group : 0;
  const uint8_t* wrow = a.w + uint64_t(tr.expert) * a.expert_bytes + uint64_t(row) * a.row_bytes;
  for (int t = 0; t < tr.nt; ++t) {
    int xr, yr;
    TileEntryRows(a, tr, t, &xr, &yr);
    const uint8_t* x = a.x + uint64_t(xr) * a.x_row_bytes + uint64_t(slice) * a.x_group_bytes;
    const float v = WarpDotMxfp4(wrow, x, a.n);
    if ((threadIdx.x & 31) == 0) a.y[uint64_t(yr) * a.y_row_floats + row] = v;
  }
}

__global__ void __launch_bounds__(kMxfp4Warps * 32) Mxfp4GateUpKernel(GateUpArgs g) {
  const MatVecArgs& a = g.mv;
  const int row = blockIdx.x * kMxfp4Warps + (threadIdx.x >> 5);
  if (row >= a.rows) return;
  const RowTile tr = ResolveRowTile<kMxfp4Tokens>(a);
  const uint64_t off = uint64_t(tr.expert) * a.expert_bytes + uint64_t(row) * a.row_bytes;
  for (int t = 0; t < tr.nt; ++t) {
    int xr, p;
    TileEntryRows(a, tr, t, &xr, &p);
    const uint8_t* x = a.x + uint64_t(xr) * a.x_row_bytes;
    const float gate = WarpDotMxfp4(a.w + off, x, a.n);
    const float up = WarpDotMxfp4(g.w_up + off, x, a.n);
    if ((threadIdx.x & 31) == 0)
      a.y[uint64_t(p) * a.y_row_floats + row] =
          __fmul_rn(ClampedSwiGlu(gate, up, g.clamp), g.route_w[p]);
  }
}

dim3 Mxfp4Grid(const MatVecArgs& a) {
  return RowTileGrid<kMxfp4Warps, kMxfp4Tokens>(a);
}

}  // namespace

bool LaunchMxfp4(CudaBackend::State& s, const MatVecArgs& a) {
  if (a.n % 32 != 0 || a.rows <= 0) return false;
  s.Launch(Mxfp4MatVecKernel, Mxfp4Grid(a), dim3(kMxfp4Warps * 32), 0, a, a.weight_bytes);
  return true;
}

bool LaunchMxfp4(CudaBackend::State& s, const GateUpArgs& g) {
  if (g.mv.n % 32 != 0 || g.mv.rows <= 0) return false;
  s.Launch(Mxfp4GateUpKernel, Mxfp4Grid(g.mv), dim3(kMxfp4Warps * 32), 0, g, g.mv.weight_bytes);
  return true;
}

}  // namespace flashkv::cuda
