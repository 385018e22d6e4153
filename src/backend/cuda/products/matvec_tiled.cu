// Prefill batches of F16 / BF16 / F32 weights × fp32 activations (compressor, indexer and
// router projections, HC mixes): each weight row is read once per 16 (or 8) tokens instead
// of once per 8, and each lane holds an 8 × 8 tile of (row, token) partial sums instead of 8.
// The float order is WarpRowDotF32's, fixed by the weight's shape (products/matmul.cu picks it by
// kSplitBelowRows): k-lane g multiply-adds units g, g + S, … (8 or 4 values each, in
// order), then
//   S = 32 (MatVecKernel): the warp's xor tree;
//   S = 256 (MatVecSplitKernel): warp w's lanes are k-lanes 32w … 32w + 31; an xor tree
//     per warp, then the 8 warp sums added in warp order.
// So an output has the same bits whichever kernel or tile computed it.
#include <algorithm>

#include "backend/cuda/device/quant.cuh"
#include "backend/cuda/products/launch.h"

namespace flashkv::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kTile = 8;  // rows and tokens per lane tile

// S = 32: warp w takes rows 8·(w % 4) … and tokens 8·(w / 4) … of a 32-row × 16-token block
// tile, all 32 lanes being its k-lanes. S = 256: the block's 8 warps share one 8 × 8 tile.
template <int S>
struct TileShape {
  static constexpr int kRowGroups = S == 32 ? 4 : 1;
  static constexpr int kTokenGroups = S == 32 ? 2 : 1;
  static constexpr int kRows = kTile * kRowGroups;
  static constexpr int kTokens = kTile * kTokenGroups;
};

// Values 4j … 4j + 3 of a 16-byte unit, widened as DequantUnit<T> does.
template <DType T>
__device__ __forceinline__ void Widen4(const uint4& raw, int j, float (&v)[4]) {
  if constexpr (T == DType::kF32) {
    v[0] = __uint_as_float(raw.x);
    v[1] = __uint_as_float(raw.y);
    v[2] = __uint_as_float(raw.z);
    v[3] = __uint_as_float(raw.w);
  } else {
    const uint32_t lo = j == 0 ? raw.x : raw.z, hi = j == 0 ? raw.y : raw.w;
    const uint32_t w[2] = {lo, hi};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      if constexpr (T == DType::kF16) {
        v[2 * i] = HalfBitsToFloat(uint16_t(w[i] & 0xffffu));
        v[2 * i + 1] = HalfBitsToFloat(uint16_t(w[i] >> 16));
      } else {  // BF16
        v[2 * i] = __uint_as_float(w[i] << 16);
        v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
      }
    }
  }
}

template <DType T, int S>
__global__ void __launch_bounds__(kWarps * 32) MatVecTiledKernel(MatVecArgs a) {
  using Shape = TileShape<S>;
  constexpr int U = Unit<T>::kValues;
  __shared__ float part[S == 32 ? 1 : kWarps][kTile * kTile];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = S == 32 ? lane : int(threadIdx.x);
  const int row0 = blockIdx.x * Shape::kRows + kTile * (S == 32 ? warp % Shape::kRowGroups : 0);
  const int tok0 = blockIdx.y * Shape::kTokens + kTile * (S == 32 ? warp / Shape::kRowGroups : 0);
  if (S == 32 && (row0 >= a.rows || tok0 >= a.n_tokens)) return;  // whole warp idle
  // Rows and tokens past the end repeat the last one; their sums are not stored.
  const uint8_t* wrow[kTile];
  const float* xrow[kTile];
#pragma unroll
  for (int i = 0; i < kTile; ++i) {
    wrow[i] = a.w + uint64_t(min(row0 + i, a.rows - 1)) * a.row_bytes;
    xrow[i] = reinterpret_cast<const float*>(a.x + uint64_t(min(tok0 + i, a.n_tokens - 1)) *
                                                       a.x_row_bytes);
  }
  float acc[kTile][kTile];
#pragma unroll
  for (int r = 0; r < kTile; ++r) {
#pragma unroll
    for (int t = 0; t < kTile; ++t) acc[r][t] = 0.0f;
  }
  const int units = a.n / U;
  for (int u = g; u < units; u += S) {
    // The raw units stay packed (4 registers a row); each 4-value quarter is widened as it
    // is used, so the 8 × 8 accumulators, the raw rows and 4 values of 8 tokens fit in
    // registers.
    uint4 raw[kTile];
#pragma unroll
    for (int r = 0; r < kTile; ++r) raw[r] = __ldg(reinterpret_cast<const uint4*>(wrow[r]) + u);
#pragma unroll
    for (int j = 0; j < U / 4; ++j) {
      float4 q[kTile];
#pragma unroll
      for (int t = 0; t < kTile; ++t)
        q[t] = __ldg(reinterpret_cast<const float4*>(xrow[t] + size_t(u) * U) + j);
#pragma unroll
      for (int r = 0; r < kTile; ++r) {
        float v[4];
        Widen4<T>(raw[r], j, v);
#pragma unroll
        for (int t = 0; t < kTile; ++t) {
          acc[r][t] = __fmaf_rn(v[0], q[t].x, acc[r][t]);
          acc[r][t] = __fmaf_rn(v[1], q[t].y, acc[r][t]);
          acc[r][t] = __fmaf_rn(v[2], q[t].z, acc[r][t]);
          acc[r][t] = __fmaf_rn(v[3], q[t].w, acc[r][t]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kTile; ++r) {
#pragma unroll
    for (int t = 0; t < kTile; ++t) acc[r][t] = WarpSum(acc[r][t]);
  }
  if constexpr (S == 32) {
    // Every lane holds all 64 sums; lane l stores entries l and l + 32.
#pragma unroll
    for (int e = 0; e < kTile * kTile; ++e) {
      const int r = e % kTile, t = e / kTile;
      if ((e & 31) == lane && row0 + r < a.rows && tok0 + t < a.n_tokens) {
        a.y[uint64_t(tok0 + t) * a.y_row_floats + row0 + r] = acc[r][t];
      }
    }
  } else {
    if (lane == 0) {
#pragma unroll
      for (int e = 0; e < kTile * kTile; ++e) part[warp][e] = acc[e % kTile][e / kTile];
    }
    __syncthreads();
    if (threadIdx.x < kTile * kTile) {
      const int e = threadIdx.x, r = e % kTile, t = e / kTile;
      float sum = part[0][e];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) sum = __fadd_rn(sum, part[w][e]);
      if (row0 + r < a.rows && tok0 + t < a.n_tokens) {
        a.y[uint64_t(tok0 + t) * a.y_row_floats + row0 + r] = sum;
      }
    }
  }
}

template <DType T>
void LaunchTyped(CudaBackend::State& s, const MatVecArgs& a) {
  if (a.rows < kSplitBelowRows) {
    using Shape = TileShape<256>;
    const dim3 grid(CeilDiv(a.rows, Shape::kRows), CeilDiv(a.n_tokens, Shape::kTokens));
    s.Launch(MatVecTiledKernel<T, 256>, grid, dim3(kWarps * 32), 0, a);
  } else {
    using Shape = TileShape<32>;
    const dim3 grid(CeilDiv(a.rows, Shape::kRows), CeilDiv(a.n_tokens, Shape::kTokens));
    s.Launch(MatVecTiledKernel<T, 32>, grid, dim3(kWarps * 32), 0, a);
  }
}

}  // namespace

bool LaunchMatVecTiled(CudaBackend::State& s, DType type, const MatVecArgs& a) {
  if (a.tiles != nullptr || a.rows_per_group > 0 || a.n_tokens < kMatVecTiledMinTokens) {
    return false;
  }
  switch (type) {
    case DType::kF16:
      LaunchTyped<DType::kF16>(s, a);
      return true;
    case DType::kBF16:
      LaunchTyped<DType::kBF16>(s, a);
      return true;
    case DType::kF32:
      LaunchTyped<DType::kF32>(s, a);
      return true;
    default:
      return false;
  }
}

}  // namespace flashkv::cuda
