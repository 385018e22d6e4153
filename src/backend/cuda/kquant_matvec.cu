// Q3_K / Q5_K / Q6_K / IQ2_XS / IQ1_M × Q8_K products: one warp per weight row (two for
// gate/up), every activation row of the launch's token block or expert tile in turn. Per
// 256-value block lane t forms the exact integer terms of values 8t .. 8t+7
// (lanes::BlockTerms), the warp sums them (integers: any order), and every lane runs the
// block's fp32 fold in the reference's order (lanes::FoldBlock, unfused), so each lane ends
// with ref::DotQ8's bits — the split tensor/quant_lanes.h defines and tensor's
// DotQ8ByLanes holds to the reference on the CPU.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kquant_launch.h"
#include "backend/cuda/quant_dev.cuh"
#include "backend/cuda/row_tiles.cuh"
#include "tensor/quant_blocks.h"
#include "tensor/quant_lanes.h"

namespace flashkv::cuda {
namespace {

constexpr int kKqWarps = 4;   // rows per block
constexpr int kKqTokens = 8;  // activation rows per block in plain mode

// The codebooks, from the same initializers as the host tables (tensor/iq*_tables.cpp).
__device__ const uint64_t kIq2xsGridDev[512] = {
#include "tensor/iq2xs_grid.inc"
};
__device__ const uint64_t kIq1sGridDev[2048] = {
#include "tensor/iq1s_grid.inc"
};

template <DType T>
__device__ __forceinline__ const uint64_t* GridFor() {
  if constexpr (T == DType::kIQ2_XS) return kIq2xsGridDev;
  if constexpr (T == DType::kIQ1_M) return kIq1sGridDev;
  return nullptr;
}

// Integer terms a block has per worker (the rest are 0).
template <DType T>
constexpr int kTermCount = T == DType::kIQ2_XS  ? 1
                           : T == DType::kIQ1_M ? 2
                                                : 8;

template <DType T>
constexpr int kBlockBytes = T == DType::kQ3_K     ? int(sizeof(BlockQ3_K))
                            : T == DType::kQ5_K   ? int(sizeof(BlockQ5_K))
                            : T == DType::kQ6_K   ? int(sizeof(BlockQ6_K))
                            : T == DType::kIQ2_XS ? int(sizeof(BlockIQ2_XS))
                                                  : int(sizeof(BlockIQ1_M));

// ref::DotQ8 of one weight row against one Q8_K activation row in the GPU's split layout
// (quant_dev.cuh Q8_KRowOf: qs [n], d [n/256], bsums [n/16]); every lane returns it.
template <DType T>
__device__ __forceinline__ float WarpDotLanes(const uint8_t* wrow, const uint8_t* xrow, int n) {
  const int lane = threadIdx.x & 31;
  const uint64_t* grid = GridFor<T>();
  const Q8Row x = Q8_KRowOf(xrow, n);
  lanes::Fold f;
  for (int b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = wrow + size_t(kBlockBytes<T>) * b;
    int32_t c[8];
    lanes::BlockTerms<T>(blk, x.qs + size_t(kQK_K) * b, lane, grid, c);
    int32_t tot[8] = {};
#pragma unroll
    for (int k = 0; k < kTermCount<T>; ++k) tot[k] = __reduce_add_sync(kFullMask, c[k]);
    lanes::FoldBlock<T>(f, blk, x.d[b], x.bsums + 16 * size_t(b), tot);
  }
  return lanes::FinishFold<T>(f);
}

template <DType T>
__global__ void __launch_bounds__(kKqWarps * 32) KQuantMatVecKernel(MatVecArgs a) {
  const int row = blockIdx.x * kKqWarps + (threadIdx.x >> 5);
  if (row >= a.rows) return;
  const RowTile tr = ResolveRowTile<kKqTokens>(a);
  const int slice = a.rows_per_group > 0 ? row / a.rows_per_group : 0;
  const uint8_t* wrow = a.w + uint64_t(tr.expert) * a.expert_bytes + uint64_t(row) * a.row_bytes;
  for (int t = 0; t < tr.nt; ++t) {
    int xr, yr;
    TileEntryRows(a, tr, t, &xr, &yr);
    const uint8_t* x = a.x + uint64_t(xr) * a.x_row_bytes + uint64_t(slice) * a.x_group_bytes;
    const float v = WarpDotLanes<T>(wrow, x, a.n);
    if ((threadIdx.x & 31) == 0) a.y[uint64_t(yr) * a.y_row_floats + row] = v;
  }
}

template <DType T>
__global__ void __launch_bounds__(kKqWarps * 32) KQuantGateUpKernel(GateUpArgs g) {
  const MatVecArgs& a = g.mv;
  const int row = blockIdx.x * kKqWarps + (threadIdx.x >> 5);
  if (row >= a.rows) return;
  const RowTile tr = ResolveRowTile<kKqTokens>(a);
  const uint64_t off = uint64_t(tr.expert) * a.expert_bytes + uint64_t(row) * a.row_bytes;
  for (int t = 0; t < tr.nt; ++t) {
    int xr, p;
    TileEntryRows(a, tr, t, &xr, &p);
    const uint8_t* x = a.x + uint64_t(xr) * a.x_row_bytes;
    const float gate = WarpDotLanes<T>(a.w + off, x, a.n);
    const float up = WarpDotLanes<T>(g.w_up + off, x, a.n);
    if ((threadIdx.x & 31) == 0)
      a.y[uint64_t(p) * a.y_row_floats + row] =
          __fmul_rn(ClampedSwiGlu(gate, up, g.clamp), g.route_w[p]);
  }
}

// One block per token: thread u dequantizes values 8u .. 8u+7 of the token's row
// (lanes::DequantValues8, DequantizeRow's bits) and writes them to every stream.
template <DType T>
__global__ void KQuantEmbedKernel(KQuantEmbedArgs a) {
  const uint8_t* row = a.table + uint64_t(a.tokens[blockIdx.x]) * a.row_bytes;
  float* o = a.out + uint64_t(blockIdx.x) * a.n_copies * a.n_embd;
  for (int u = threadIdx.x; u < a.n_embd / 8; u += blockDim.x) {
    float v[8];
    lanes::DequantValues8<T>(row + size_t(kBlockBytes<T>) * (u / 32), u % 32, GridFor<T>(), v);
    for (int c = 0; c < a.n_copies; ++c) {
#pragma unroll
      for (int j = 0; j < 8; ++j) o[uint64_t(c) * a.n_embd + 8 * u + j] = v[j];
    }
  }
}

template <DType T>
void LaunchTypedMatVec(CudaBackend::State& s, const MatVecArgs& a) {
  s.Launch(KQuantMatVecKernel<T>, RowTileGrid<kKqWarps, kKqTokens>(a), dim3(kKqWarps * 32), 0, a,
           a.weight_bytes);
}

template <DType T>
void LaunchTypedGateUp(CudaBackend::State& s, const GateUpArgs& g) {
  s.Launch(KQuantGateUpKernel<T>, RowTileGrid<kKqWarps, kKqTokens>(g.mv), dim3(kKqWarps * 32), 0, g,
           g.mv.weight_bytes);
}

// Calls fn.template operator()<T>() for the runtime type; false when it is not one of ours.
template <typename Fn>
bool Dispatch(DType type, Fn&& fn) {
  switch (type) {
    case DType::kQ3_K:
      fn(std::integral_constant<DType, DType::kQ3_K>{});
      return true;
    case DType::kQ5_K:
      fn(std::integral_constant<DType, DType::kQ5_K>{});
      return true;
    case DType::kQ6_K:
      fn(std::integral_constant<DType, DType::kQ6_K>{});
      return true;
    case DType::kIQ2_XS:
      fn(std::integral_constant<DType, DType::kIQ2_XS>{});
      return true;
    case DType::kIQ1_M:
      fn(std::integral_constant<DType, DType::kIQ1_M>{});
      return true;
    default:
      return false;
  }
}

}  // namespace

bool LaunchKQuantEmbed(CudaBackend::State& s, DType type, const KQuantEmbedArgs& a) {
  if (!HasKQuantKernel(type) || a.n_embd % kQK_K != 0) return false;
  return Dispatch(type, [&](auto t) {
    s.Launch(KQuantEmbedKernel<decltype(t)::value>, dim3(a.n_tokens), dim3(128), 0, a);
  });
}

bool HasKQuantKernel(DType type) {
  return lanes::HasLanes(type);
}

bool LaunchKQuant(CudaBackend::State& s, DType type, const MatVecArgs& a) {
  if (!HasKQuantKernel(type) || a.n % kQK_K != 0 || a.rows <= 0) return false;
  return Dispatch(type, [&](auto t) { LaunchTypedMatVec<decltype(t)::value>(s, a); });
}

bool LaunchKQuant(CudaBackend::State& s, DType type, const GateUpArgs& g) {
  if (!HasKQuantKernel(type) || g.mv.n % kQK_K != 0 || g.mv.rows <= 0) return false;
  return Dispatch(type, [&](auto t) { LaunchTypedGateUp<decltype(t)::value>(s, g); });
}

}  // namespace flashkv::cuda
