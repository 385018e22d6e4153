// Q3_K / Q5_K / Q6_K / IQ2_XS / IQ1_M / IQ3_XXS / IQ3_S / IQ2_S / IQ1_S / IQ4_XS × Q8_K
// products: one warp per weight row (two for gate/up), every activation row of the launch's
// token block or expert tile in turn (device/row_tiles.cuh's body, shared with
// products/mxfp4_matvec.cu). Per 256-value block lane t forms the exact integer terms of values 8t
// .. 8t+7 (lanes::BlockTerms), the warp sums them (integers: any order), and every lane runs the
// block's fp32 fold in the reference's order (lanes::FoldBlock, unfused), so each lane ends
// with ref::DotQ8's bits — the split tensor/quant_lanes.h defines and tensor's
// DotQ8ByLanes holds to the reference on the CPU.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device/common.cuh"
#include "backend/cuda/device/quant.cuh"
#include "backend/cuda/device/row_tiles.cuh"
#include "backend/cuda/products/kquant_launch.h"
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
__device__ const uint64_t kIq2sGridDev[1024] = {
#include "tensor/iq2s_grid.inc"
};
__device__ const uint32_t kIq3xxsGridDev[256] = {
#include "tensor/iq3xxs_grid.inc"
};
__device__ const uint32_t kIq3sGridDev[512] = {
#include "tensor/iq3s_grid.inc"
};

template <DType T>
__device__ __forceinline__ const void* GridFor() {
  if constexpr (T == DType::kIQ2_XS) return kIq2xsGridDev;
  if constexpr (T == DType::kIQ2_S) return kIq2sGridDev;
  if constexpr (T == DType::kIQ1_M || T == DType::kIQ1_S) return kIq1sGridDev;
  if constexpr (T == DType::kIQ3_XXS) return kIq3xxsGridDev;
  if constexpr (T == DType::kIQ3_S) return kIq3sGridDev;
  return nullptr;
}

// Integer terms a block has per worker (the rest are 0).
template <DType T>
constexpr int kTermCount =
    T == DType::kIQ2_XS || T == DType::kIQ2_S || T == DType::kIQ3_XXS || T == DType::kIQ3_S ? 1
    : T == DType::kIQ1_M || T == DType::kIQ1_S                                              ? 2
                                                                                            : 8;

template <DType T>
constexpr int kBlockBytes = lanes::LanesBlockBytes(T);

// ref::DotQ8 of one weight row against one Q8_K activation row in the GPU's split layout
// (device/quant.cuh Q8_KRowOf: qs [n], d [n/256], bsums [n/16]); every lane returns it.
template <DType T>
__device__ __forceinline__ float WarpDotLanes(const uint8_t* wrow, const uint8_t* xrow, int n) {
  const int lane = threadIdx.x & 31;
  const void* grid = GridFor<T>();
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
struct LanesDot {
  __device__ __forceinline__ float operator()(const uint8_t* w, const uint8_t* x, int n) const {
    return WarpDotLanes<T>(w, x, n);
  }
};

template <DType T>
__global__ void __launch_bounds__(kKqWarps * 32) KQuantMatVecKernel(MatVecArgs a) {
  RowTileMatVec<kKqWarps, kKqTokens>(a, LanesDot<T>{});
}

template <DType T>
__global__ void __launch_bounds__(kKqWarps * 32) KQuantGateUpKernel(GateUpArgs g) {
  RowTileGateUp<kKqWarps, kKqTokens>(g, LanesDot<T>{});
}

// fp32 activations (act-quant off): lane t multiply-adds values 8t .. 8t+7 of every 256-value
// block (lanes::DequantValues8, DequantizeRow's values) into one fused chain, then the warp's
// xor-tree sum — the order of every fp32-activation product on the GPU (docs/CUDA.md), so the
// result agrees with the CPU's DotF32 to rounding, not bit for bit.
template <DType T>
struct LanesF32Dot {
  __device__ __forceinline__ float operator()(const uint8_t* w, const uint8_t* xrow, int n) const {
    const int lane = threadIdx.x & 31;
    const float* x = reinterpret_cast<const float*>(xrow);
    float acc = 0.0f;
    for (int b = 0; b < n / kQK_K; ++b) {
      float v[8];
      lanes::DequantValues8<T>(w + size_t(kBlockBytes<T>) * b, lane, GridFor<T>(), v);
      const float4* xb = reinterpret_cast<const float4*>(x + size_t(kQK_K) * b + 8 * lane);
      const float4 x0 = __ldg(xb), x1 = __ldg(xb + 1);
      acc = __fmaf_rn(v[0], x0.x, acc);
      acc = __fmaf_rn(v[1], x0.y, acc);
      acc = __fmaf_rn(v[2], x0.z, acc);
      acc = __fmaf_rn(v[3], x0.w, acc);
      acc = __fmaf_rn(v[4], x1.x, acc);
      acc = __fmaf_rn(v[5], x1.y, acc);
      acc = __fmaf_rn(v[6], x1.z, acc);
      acc = __fmaf_rn(v[7], x1.w, acc);
    }
    return WarpSum(acc);
  }
};

template <DType T>
__global__ void __launch_bounds__(kKqWarps * 32) KQuantF32MatVecKernel(MatVecArgs a) {
  RowTileMatVec<kKqWarps, kKqTokens>(a, LanesF32Dot<T>{});
}

template <DType T>
__global__ void __launch_bounds__(kKqWarps * 32) KQuantF32GateUpKernel(GateUpArgs g) {
  RowTileGateUp<kKqWarps, kKqTokens>(g, LanesF32Dot<T>{});
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
    case DType::kIQ3_XXS:
      fn(std::integral_constant<DType, DType::kIQ3_XXS>{});
      return true;
    case DType::kIQ3_S:
      fn(std::integral_constant<DType, DType::kIQ3_S>{});
      return true;
    case DType::kIQ2_S:
      fn(std::integral_constant<DType, DType::kIQ2_S>{});
      return true;
    case DType::kIQ1_S:
      fn(std::integral_constant<DType, DType::kIQ1_S>{});
      return true;
    case DType::kIQ4_XS:
      fn(std::integral_constant<DType, DType::kIQ4_XS>{});
      return true;
    // Embedding rows and fp32-activation products only; their q8 products:
    // products/mxfp4_matvec.cu.
    case DType::kIQ4_NL:
      fn(std::integral_constant<DType, DType::kIQ4_NL>{});
      return true;
    case DType::kMXFP4:
      fn(std::integral_constant<DType, DType::kMXFP4>{});
      return true;
    default:
      return false;
  }
}

}  // namespace

bool LaunchKQuantEmbed(CudaBackend::State& s, DType type, const KQuantEmbedArgs& a) {
  if (!lanes::HasDequantLanes(type) || a.n_embd % kQK_K != 0) return false;
  return Dispatch(type, [&](auto t) {
    s.Launch(KQuantEmbedKernel<decltype(t)::value>, dim3(a.n_tokens), dim3(128), 0, a);
  });
}

bool HasKQuantKernel(DType type) {
  return lanes::HasLanes(type);
}

bool LaunchKQuant(CudaBackend::State& s, DType type, const MatVecArgs& a) {
  if (!HasKQuantKernel(type) || a.n % kQK_K != 0 || a.rows <= 0) return false;
  return Dispatch(type, [&](auto t) {
    if constexpr (lanes::HasLanes(decltype(t)::value)) LaunchTypedMatVec<decltype(t)::value>(s, a);
  });
}

bool LaunchKQuant(CudaBackend::State& s, DType type, const GateUpArgs& g) {
  if (!HasKQuantKernel(type) || g.mv.n % kQK_K != 0 || g.mv.rows <= 0) return false;
  return Dispatch(type, [&](auto t) {
    if constexpr (lanes::HasLanes(decltype(t)::value)) LaunchTypedGateUp<decltype(t)::value>(s, g);
  });
}

bool LaunchKQuantF32(CudaBackend::State& s, DType type, const MatVecArgs& a) {
  if (!lanes::HasDequantLanes(type) || a.n % kQK_K != 0 || a.rows <= 0) return false;
  return Dispatch(type, [&](auto t) {
    s.Launch(KQuantF32MatVecKernel<decltype(t)::value>, RowTileGrid<kKqWarps, kKqTokens>(a),
             dim3(kKqWarps * 32), 0, a, a.weight_bytes);
  });
}

bool LaunchKQuantF32(CudaBackend::State& s, DType type, const GateUpArgs& g) {
  if (!lanes::HasDequantLanes(type) || g.mv.n % kQK_K != 0 || g.mv.rows <= 0) return false;
  return Dispatch(type, [&](auto t) {
    s.Launch(KQuantF32GateUpKernel<decltype(t)::value>, RowTileGrid<kKqWarps, kKqTokens>(g.mv),
             dim3(kKqWarps * 32), 0, g, g.mv.weight_bytes);
  });
}

}  // namespace flashkv::cuda
