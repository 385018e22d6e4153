// MXFP4 and IQ4_NL × Q8_0 products: one warp per weight row (two for gate/up), every
// activation row of the launch's token block or expert tile in turn (device/row_tiles.cuh's body,
// shared with products/kquant_matvec.cu). Lane l forms the terms of blocks l, l + 32, …; lane 0
// then adds them in block order, unfused, starting from 0 — exactly ref::DotMXFP4's and
// ref::DotIQ4_NL's fold, so the result has their bits for any row length.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device/common.cuh"
#include "backend/cuda/device/mxfp4.cuh"
#include "backend/cuda/device/row_tiles.cuh"
#include "backend/cuda/products/mxfp4_launch.h"

namespace flashkv::cuda {
namespace {

constexpr int kBlock32Warps = 4;   // rows per block
constexpr int kBlock32Tokens = 8;  // activation rows per block in plain mode

// The 32-value block types this file runs: their bytes and block term.
template <DType T>
struct Block32 {
  static constexpr int kBytes = T == DType::kMXFP4 ? kMxfp4BlockBytes : kIq4nlBlockBytes;
  __device__ __forceinline__ static float Term(const uint8_t* wblk, const int8_t* xq, float dx) {
    if constexpr (T == DType::kMXFP4) {
      return Mxfp4BlockTerm(wblk, xq, dx);
    } else {
      return Iq4nlBlockTerm(wblk, xq, dx);
    }
  }
};

// The reference's fold of one weight row against one Q8_0 activation row (qs [n], then d
// [n/32]); every lane returns it.
template <DType T>
struct Block32Dot {
  __device__ __forceinline__ float operator()(const uint8_t* wrow, const uint8_t* xrow,
                                              int n) const {
    const int lane = threadIdx.x & 31;
    const int nblk = n / 32;
    const int8_t* xq = reinterpret_cast<const int8_t*>(xrow);
    const float* xd = reinterpret_cast<const float*>(xrow + n);
    float acc = 0.0f;
    for (int base = 0; base < nblk; base += 32) {
      const int b = base + lane;
      const float term =
          b < nblk ? Block32<T>::Term(wrow + size_t(Block32<T>::kBytes) * b, xq + 32 * b, xd[b])
                   : 0.0f;
      const int cnt = min(32, nblk - base);
      for (int j = 0; j < 32; ++j) {
        const float v = __shfl_sync(kFullMask, term, j);
        if (j < cnt) acc = __fadd_rn(acc, v);
      }
    }
    return acc;
  }
};

template <DType T>
__global__ void __launch_bounds__(kBlock32Warps * 32) Block32MatVecKernel(MatVecArgs a) {
  RowTileMatVec<kBlock32Warps, kBlock32Tokens>(a, Block32Dot<T>{});
}

template <DType T>
__global__ void __launch_bounds__(kBlock32Warps * 32) Block32GateUpKernel(GateUpArgs g) {
  RowTileGateUp<kBlock32Warps, kBlock32Tokens>(g, Block32Dot<T>{});
}

dim3 Block32Grid(const MatVecArgs& a) {
  return RowTileGrid<kBlock32Warps, kBlock32Tokens>(a);
}

template <DType T>
bool LaunchTyped(CudaBackend::State& s, const MatVecArgs& a) {
  if (a.n % 32 != 0 || a.rows <= 0) return false;
  s.Launch(Block32MatVecKernel<T>, Block32Grid(a), dim3(kBlock32Warps * 32), 0, a, a.weight_bytes);
  return true;
}

template <DType T>
bool LaunchTyped(CudaBackend::State& s, const GateUpArgs& g) {
  if (g.mv.n % 32 != 0 || g.mv.rows <= 0) return false;
  s.Launch(Block32GateUpKernel<T>, Block32Grid(g.mv), dim3(kBlock32Warps * 32), 0, g,
           g.mv.weight_bytes);
  return true;
}

}  // namespace

bool LaunchMxfp4(CudaBackend::State& s, const MatVecArgs& a) {
  return LaunchTyped<DType::kMXFP4>(s, a);
}
bool LaunchMxfp4(CudaBackend::State& s, const GateUpArgs& g) {
  return LaunchTyped<DType::kMXFP4>(s, g);
}
bool LaunchIq4nl(CudaBackend::State& s, const MatVecArgs& a) {
  return LaunchTyped<DType::kIQ4_NL>(s, a);
}
bool LaunchIq4nl(CudaBackend::State& s, const GateUpArgs& g) {
  return LaunchTyped<DType::kIQ4_NL>(s, g);
}

}  // namespace flashkv::cuda
