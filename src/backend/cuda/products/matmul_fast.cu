// F16 / BF16 weights × fp32 activations on the TF32 tensor cores: the fast float path's
// products for prefill chunks (FloatPath::kFast; docs/CUDA.md "Numerics: exact and fast").
// Both weight types are exact in TF32 (11 and 8 significant bits), so only the activations
// are rounded: each is taken as kTerms TF32 values (2: hi + lo, device/tf32_mma.cuh, leaving
// out ~2^-22 of |x|; 1: tf32(x), a benchmark's switch), and the sums run in the tensor cores'
// order — not the exact kernels' bits (products/matvec_tiled.cu), within the tolerance
// docs/CUDA.md states.
//
// Tiles: a CTA of 4 warps (2 × 2) owns 64 weight rows × BN tokens and walks k in steps of 32.
// Each step's weights (widened to fp32) and activations (split into TF32 terms) are staged
// in shared memory once, while the next step's loads are in flight in registers. Short
// matrices (the HC mixes' 24 rows over 16,384 values, the router, the indexer's head weights
// and compressor) give too few tiles to fill the GPU and each CTA would stream its tokens'
// long rows alone, so their k range is cut into FastSplits slices, each CTA writing a
// partial sum, and FastReduceKernel adds the slices in order. An output's float order
// depends only on the weight's shape (the slices; in a slice k-steps ascending; in a step,
// the 8-value MMAs in k order, the lo term before the hi one), never on BN, the tile or the
// batch: a token's values are the same in any batch this kernel takes (kFastMinTokens tokens
// or more).
// Must not: serve tile (expert) mode, grouped projections, or the one-token steps.
#include <cstdint>

#include "backend/cuda/device/common.cuh"
#include "backend/cuda/device/tf32_mma.cuh"
#include "backend/cuda/products/launch.h"

namespace flashkv::cuda {
namespace {

constexpr int kBM = 64;
constexpr int kBK = 32;
constexpr int kThreads = 128;
// Row stride of the staged tiles in words: 36 ≡ 4 (mod 32), so the 8 rows × 4 columns a
// fragment load touches fall on 32 distinct banks, and the 16-byte stores of a quarter warp
// on distinct bank quads.
constexpr int kStride = kBK + 4;

// Eight weights (16 bytes of F16 or BF16) widened to fp32 bits — exact TF32 values.
template <DType T>
__device__ __forceinline__ void Widen8(const uint4& raw, uint32_t (&v)[8]) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (T == DType::kF16) {
      v[2 * i] = __float_as_uint(HalfBitsToFloat(uint16_t(w[i] & 0xffffu)));
      v[2 * i + 1] = __float_as_uint(HalfBitsToFloat(uint16_t(w[i] >> 16)));
    } else {  // BF16
      v[2 * i] = w[i] << 16;
      v[2 * i + 1] = w[i] & 0xffff0000u;
    }
  }
}

// Slices of k for a weight of `rows` rows × n values: 1, or up to 8 of at least 2,048 values
// for the short matrices (≤ 256 rows). A function of the shape only, so of the float order.
int FastSplits(int n, int rows) {
  if (rows > 256) return 1;
  int splits = 1;
  while (splits < 8 && n % (2 * splits * kBK) == 0 && n / (2 * splits) >= 2048) splits *= 2;
  return splits;
}

struct FastArgs {
  MatVecArgs a;
  int k_len;       // values per slice (a.n without slices)
  float* partial;  // with slices: [slices, n_tokens, rows]; null: straight into a.y
};

template <DType T, int BN, int kTerms>
__global__ void __launch_bounds__(kThreads) MatMulFastKernel(FastArgs f) {
  const MatVecArgs& a = f.a;
  constexpr int kWarpTokens = BN / 2;
  constexpr int kMt = 2;  // 16-row MMA tiles per warp: 32 rows
  constexpr int kNt = kWarpTokens / 8;
  constexpr int kWLoads = kBM * kBK / 8 / kThreads;  // 16-byte weight loads per thread
  constexpr int kXLoads = BN * kBK / 4 / kThreads;   // 16-byte activation loads per thread
  static_assert(kWLoads >= 1 && kXLoads >= 1 && kNt >= 1);
  __shared__ __align__(16) uint32_t ws[kBM][kStride];
  __shared__ __align__(16) uint32_t xs[kTerms][BN][kStride];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int wm = warp & 1, wn = warp >> 1;
  const int row0 = blockIdx.x * kBM, tok0 = blockIdx.y * BN;
  const uint64_t k_begin = uint64_t(blockIdx.z) * f.k_len;

  // Rows and tokens past the end repeat the last one; their sums are not stored.
  const uint8_t* wsrc[kWLoads];
  const uint8_t* xsrc[kXLoads];
#pragma unroll
  for (int i = 0; i < kWLoads; ++i) {
    const int idx = threadIdx.x + i * kThreads, r = idx / 4, c = idx % 4;
    wsrc[i] = a.w + uint64_t(min(row0 + r, a.rows - 1)) * a.row_bytes + 2 * k_begin + 16 * c;
  }
#pragma unroll
  for (int i = 0; i < kXLoads; ++i) {
    const int idx = threadIdx.x + i * kThreads, tk = idx / 8, c = idx % 8;
    xsrc[i] = a.x + uint64_t(min(tok0 + tk, a.n_tokens - 1)) * a.x_row_bytes + 4 * k_begin + 16 * c;
  }
  uint4 wreg[kWLoads];
  float4 xreg[kXLoads];
  auto load = [&](int k0) {
#pragma unroll
    for (int i = 0; i < kWLoads; ++i) {
      wreg[i] = __ldg(reinterpret_cast<const uint4*>(wsrc[i] + 2 * uint64_t(k0)));
    }
#pragma unroll
    for (int i = 0; i < kXLoads; ++i) {
      xreg[i] = __ldg(reinterpret_cast<const float4*>(xsrc[i] + 4 * uint64_t(k0)));
    }
  };
  auto store = [&]() {
#pragma unroll
    for (int i = 0; i < kWLoads; ++i) {
      const int idx = threadIdx.x + i * kThreads, r = idx / 4, c = idx % 4;
      uint32_t v[8];
      Widen8<T>(wreg[i], v);
      *reinterpret_cast<uint4*>(&ws[r][8 * c]) = make_uint4(v[0], v[1], v[2], v[3]);
      *reinterpret_cast<uint4*>(&ws[r][8 * c + 4]) = make_uint4(v[4], v[5], v[6], v[7]);
    }
#pragma unroll
    for (int i = 0; i < kXLoads; ++i) {
      const int idx = threadIdx.x + i * kThreads, tk = idx / 8, c = idx % 8;
      const float x[4] = {xreg[i].x, xreg[i].y, xreg[i].z, xreg[i].w};
      uint32_t hi[4], lo[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if constexpr (kTerms == 2) {
          SplitTf32(x[j], hi[j], lo[j]);
        } else {
          hi[j] = ToTf32(x[j]);
        }
      }
      *reinterpret_cast<uint4*>(&xs[0][tk][4 * c]) = make_uint4(hi[0], hi[1], hi[2], hi[3]);
      if constexpr (kTerms == 2) {
        *reinterpret_cast<uint4*>(&xs[kTerms - 1][tk][4 * c]) =
            make_uint4(lo[0], lo[1], lo[2], lo[3]);
      }
    }
  };

  float acc[kMt][kNt][4];
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;
    }
  }
  const int ksteps = f.k_len / kBK;
  load(0);
  store();
  __syncthreads();
  for (int kt = 0; kt < ksteps; ++kt) {
    if (kt + 1 < ksteps) load((kt + 1) * kBK);
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 8) {
      uint32_t af[kMt][4];
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) {
        const int r = wm * 32 + mt * 16 + g;
        af[mt][0] = ws[r][kk + t];
        af[mt][1] = ws[r + 8][kk + t];
        af[mt][2] = ws[r][kk + t + 4];
        af[mt][3] = ws[r + 8][kk + t + 4];
      }
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt) {
        const int n = wn * kWarpTokens + nt * 8 + g;
#pragma unroll
        for (int term = kTerms - 1; term >= 0; --term) {  // the small term first
          const uint32_t b0 = xs[term][n][kk + t], b1 = xs[term][n][kk + t + 4];
#pragma unroll
          for (int mt = 0; mt < kMt; ++mt) MmaTf32(af[mt], b0, b1, acc[mt][nt]);
        }
      }
    }
    if (kt + 1 < ksteps) {
      __syncthreads();  // every warp is done with this step's tiles
      store();
      __syncthreads();
    }
  }
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = row0 + wm * 32 + mt * 16 + g + (i >= 2 ? 8 : 0);
        const int tk = tok0 + wn * kWarpTokens + nt * 8 + 2 * t + (i & 1);
        if (r >= a.rows || tk >= a.n_tokens) continue;
        if (f.partial != nullptr) {
          f.partial[(uint64_t(blockIdx.z) * a.n_tokens + tk) * a.rows + r] = acc[mt][nt][i];
        } else {
          a.y[uint64_t(tk) * a.y_row_floats + r] = acc[mt][nt][i];
        }
      }
    }
  }
}

struct ReduceArgs {
  const float* partial;  // [splits, n_tokens, rows]
  float* y;
  uint64_t y_row_floats;
  int rows, n_tokens, splits;
};

// y = the slices' partial sums added in slice order.
__global__ void FastReduceKernel(ReduceArgs r) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t per_split = int64_t(r.n_tokens) * r.rows;
  if (i >= per_split) return;
  float sum = r.partial[i];
  for (int sp = 1; sp < r.splits; ++sp) sum = __fadd_rn(sum, r.partial[sp * per_split + i]);
  r.y[uint64_t(i / r.rows) * r.y_row_floats + uint64_t(i % r.rows)] = sum;
}

template <DType T, int kTerms>
void LaunchTyped(CudaBackend::State& s, const MatVecArgs& a) {
  const int splits = FastSplits(a.n, a.rows);
  FastArgs f{a, a.n / splits, nullptr};
  if (splits > 1) {
    f.partial = static_cast<float*>(
        s.Scratch(CudaScratch::kFastPartial, sizeof(float) * size_t(splits) * a.n_tokens * a.rows));
  }
  // Tiles of 32 tokens where 64 would leave SMs idle (short matrices); the tile never changes
  // a bit.
  const unsigned row_tiles = CeilDiv(a.rows, kBM);
  const bool narrow = uint64_t(row_tiles) * CeilDiv(a.n_tokens, 64) * splits <
                      2ull * unsigned(s.prop.multiProcessorCount);
  if (narrow) {
    s.Launch(MatMulFastKernel<T, 32, kTerms>, dim3(row_tiles, CeilDiv(a.n_tokens, 32), splits),
             dim3(kThreads), 0, f, a.weight_bytes);
  } else {
    s.Launch(MatMulFastKernel<T, 64, kTerms>, dim3(row_tiles, CeilDiv(a.n_tokens, 64), splits),
             dim3(kThreads), 0, f, a.weight_bytes);
  }
  if (splits > 1) {
    const ReduceArgs r{f.partial, a.y, a.y_row_floats, a.rows, a.n_tokens, splits};
    s.Launch(FastReduceKernel, dim3(CeilDiv(size_t(a.n_tokens) * a.rows, 256)), dim3(256), 0, r);
  }
}

template <DType T>
void LaunchTerms(CudaBackend::State& s, const MatVecArgs& a) {
  if (s.fast_terms == 1) {
    LaunchTyped<T, 1>(s, a);
  } else {
    LaunchTyped<T, 2>(s, a);
  }
}

}  // namespace

bool LaunchMatMulFast(CudaBackend::State& s, DType type, const MatVecArgs& a) {
  if (s.fast_terms <= 0 || a.tiles != nullptr || a.rows_per_group > 0 ||
      a.n_tokens < kFastMinTokens || a.n % kBK != 0 || a.row_bytes % 16 != 0 ||
      a.x_row_bytes % 16 != 0 || !Aligned16(a.w) || !Aligned16(a.x)) {
    return false;
  }
  switch (type) {
    case DType::kF16:
      LaunchTerms<DType::kF16>(s, a);
      return true;
    case DType::kBF16:
      LaunchTerms<DType::kBF16>(s, a);
      return true;
    default:
      return false;
  }
}

}  // namespace flashkv::cuda
