// Q8_0 weights × ds4's Q8_0 activations on the int8 tensor cores, for prefill-sized batches
// (MatMul / MatMulGrouped in plain mode). One `mma.m16n8k32` covers exactly one 32-value
// block of 16 weight rows × 8 tokens, so each block's integer sum is exact; the block's
// float term is then formed as every other q8 kernel forms it, (d_w · d_x) · Σ with
// unfused multiplies, and folded into the output with an unfused add in block order. A
// token's outputs therefore carry the bits of the one-token decode kernel, of the 8-token
// kernel and of ds4's CPU dot product, whatever tile or batch it is in (docs/CUDA.md).
//
// Tiles: a CTA owns BM weight rows × BN tokens; each pipeline stage stages 8 blocks
// (256 values) of its rows and tokens in shared memory with cp.async — raw 34-byte weight
// blocks (their quants are read two bytes off alignment, fixed up with a byte permute)
// and the activations' quants and scales — while the previous stage is multiplied. Each
// weight tile is read once per BN tokens.
//
// The integer sum is turned into a float without a conversion instruction: the MMA starts
// from the bit pattern of 1.5·2^23, so its result read as a float is 1.5·2^23 + Σ exactly
// (|Σ| ≤ 32·128·128 < 2^22), and one exact subtraction leaves Σ.
// Must not: serve other weight types, tile (expert) mode, or shapes ImmaShapeOk rejects.
#include <cstdint>

#include "backend/cuda/device/common.cuh"
#include "backend/cuda/device/imma_ptx.cuh"
#include "backend/cuda/products/launch.h"

namespace flashkv::cuda {
namespace {

constexpr int kStageBlocks = 8;                  // Q8_0 blocks per pipeline stage
constexpr int kStageValues = 32 * kStageBlocks;  // 256
constexpr int kWRowBytes = 34 * kStageBlocks;    // 272: one row's raw blocks of a stage
constexpr int kXRowBytes = kStageValues + 16;    // 272: one token's quants, padded
constexpr int kBiasBits = 0x4B400000;            // 1.5 · 2^23 as a float
constexpr float kBiasValue = 12582912.0f;

// Both row strides are 68 words ≡ 4 (mod 32): the 8 rows a fragment load touches fall
// on distinct bank quads, so neither the weight words nor the ldmatrix rows conflict.
static_assert(kWRowBytes % 16 == 0 && (kWRowBytes / 4) % 32 == 4);
static_assert(kXRowBytes % 16 == 0 && (kXRowBytes / 4) % 32 == 4);

template <int BM, int BN, int WM, int WN, int STAGES>
struct ImmaTile {
  static constexpr int kThreads = 32 * WM * WN;
  static constexpr int kMt = BM / WM / 16;  // 16-row MMA tiles per warp
  static constexpr int kNt = BN / WN / 8;   // 8-token MMA tiles per warp
  static constexpr int kWBytes = BM * kWRowBytes;
  static constexpr int kXqBytes = BN * kXRowBytes;
  static constexpr int kXdBytes = BN * kStageBlocks * 4;  // [block][token] floats
  static constexpr int kStageBytes = kWBytes + kXqBytes + kXdBytes;
  static constexpr int kSmem = STAGES * kStageBytes;
  static_assert(BM % (16 * WM) == 0 && BN % (8 * WN) == 0 && kNt % 2 == 0);
  static_assert(STAGES >= 2 && kSmem <= 227 * 1024);
};

// The block term (d_w · d_x) · Σ folded into acc: ds4's order, unfused.
__device__ __forceinline__ float FoldTerm(float acc, float dw, float dx, int biased) {
  const float isum = __fsub_rn(__int_as_float(biased), kBiasValue);
  return __fadd_rn(acc, __fmul_rn(__fmul_rn(dw, dx), isum));
}
// Four weight quants at p (a raw block's qs + 4k), 4-byte aligned exactly when kAligned.
template <bool kAligned>
__device__ __forceinline__ uint32_t LoadQuants(const uint8_t* p) {
  if constexpr (kAligned) {
    return *reinterpret_cast<const uint32_t*>(p);
  } else {
    const uint32_t* q = reinterpret_cast<const uint32_t*>(p - 2);
    return __byte_perm(q[0], q[1], 0x5432);
  }
}

// Where a CTA's tiles live in global memory. Rows and tokens past the ends are clamped to
// the last one (their results are discarded), so every load is in bounds.
struct TileSrc {
  int row0;
  int tok0;
  uint64_t x_off;  // grouped: this CTA's slice of each token's row
};

template <int BM, int BN, int WM, int WN, int STAGES>
__device__ __forceinline__ void LoadStage(const MatVecArgs& a, const TileSrc& src, uint8_t* st,
                                          int stage) {
  using C = ImmaTile<BM, BN, WM, WN, STAGES>;
  const uint32_t sw = SmemAddr(st);
  const uint32_t sxq = sw + C::kWBytes;
  const uint32_t sxd = sxq + C::kXqBytes;
  constexpr int kWChunks = kWRowBytes / 16;  // 17
  for (int i = threadIdx.x; i < BM * kWChunks; i += C::kThreads) {
    const int r = i / kWChunks, c = i - r * kWChunks;
    const int row = min(src.row0 + r, a.rows - 1);
    CpAsync16(sw + r * kWRowBytes + 16 * c,
              a.w + uint64_t(row) * a.row_bytes + uint64_t(kWRowBytes) * stage + 16 * c);
  }
  constexpr int kXChunks = kStageValues / 16;  // 16
  for (int i = threadIdx.x; i < BN * kXChunks; i += C::kThreads) {
    const int t = i / kXChunks, c = i - t * kXChunks;
    const int tok = min(src.tok0 + t, a.n_tokens - 1);
    CpAsync16(sxq + t * kXRowBytes + 16 * c, a.x + uint64_t(tok) * a.x_row_bytes + src.x_off +
                                                 uint64_t(kStageValues) * stage + 16 * c);
  }
  // Scales: consecutive threads read one token's 8 consecutive floats.
  for (int i = threadIdx.x; i < BN * kStageBlocks; i += C::kThreads) {
    const int t = i / kStageBlocks, b = i - t * kStageBlocks;
    const int tok = min(src.tok0 + t, a.n_tokens - 1);
    CpAsync4(sxd + 4 * (b * BN + t), a.x + uint64_t(tok) * a.x_row_bytes + src.x_off + a.n +
                                         4 * (uint64_t(kStageBlocks) * stage + b));
  }
}

template <int BM, int BN, int WM, int WN, int STAGES>
__device__ __forceinline__ void ComputeStage(
    const uint8_t* st, int wm0, int wn0,
    float (&acc)[ImmaTile<BM, BN, WM, WN, STAGES>::kMt][ImmaTile<BM, BN, WM, WN, STAGES>::kNt][4]) {
  using C = ImmaTile<BM, BN, WM, WN, STAGES>;
  constexpr int MT = C::kMt, NT = C::kNt;
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2, tig = lane & 3;
  const uint8_t* sw = st;
  const float* sxd = reinterpret_cast<const float*>(st + C::kWBytes + C::kXqBytes);
  // ldmatrix.x4 rows: lanes 0-7 tokens 0-7 / k 0-15, 8-15 tokens 0-7 / k 16-31, 16-23
  // tokens 8-15 / k 0-15, 24-31 tokens 8-15 / k 16-31: b0, b1 of two 8-token tiles.
  const uint32_t xq_lane = SmemAddr(st + C::kWBytes) +
                           (wn0 + (lane & 7) + 8 * (lane >> 4)) * kXRowBytes +
                           16 * ((lane >> 3) & 1);
  const uint8_t* w_lane = sw + (wm0 + g) * kWRowBytes + 2 + 4 * tig;
#pragma unroll
  for (int b = 0; b < kStageBlocks; ++b) {
    uint32_t bf[NT][2];
#pragma unroll
    for (int j = 0; j < NT / 2; ++j) {
      uint32_t r[4];
      LdMatrixX4(xq_lane + j * 16 * kXRowBytes + 32 * b, r);
      bf[2 * j][0] = r[0];
      bf[2 * j][1] = r[1];
      bf[2 * j + 1][0] = r[2];
      bf[2 * j + 1][1] = r[3];
    }
    float2 dx[NT];
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      dx[j] = *reinterpret_cast<const float2*>(sxd + b * BN + wn0 + 8 * j + 2 * tig);
    }
    // Block b of a stage starts 34·b bytes into the row: its quants are 4-byte aligned
    // for odd b only (b is a compile-time index, so the branch folds away).
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const uint8_t* q0 = w_lane + 16 * i * kWRowBytes + 34 * b;  // row g, quants 4·tig…
      const uint8_t* q1 = q0 + 8 * kWRowBytes;                    // row g + 8
      uint32_t af[4];
      if (b & 1) {
        af[0] = LoadQuants<true>(q0);
        af[1] = LoadQuants<true>(q1);
        af[2] = LoadQuants<true>(q0 + 16);
        af[3] = LoadQuants<true>(q1 + 16);
      } else {
        af[0] = LoadQuants<false>(q0);
        af[1] = LoadQuants<false>(q1);
        af[2] = LoadQuants<false>(q0 + 16);
        af[3] = LoadQuants<false>(q1 + 16);
      }
      const float dw0 = LoadHalfDev(q0 - 2 - 4 * tig);
      const float dw1 = LoadHalfDev(q1 - 2 - 4 * tig);
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        int d[4];
        Mma(af, bf[j][0], bf[j][1], d, kBiasBits);
        // d[0] (row g, token 2·tig), d[1] (g, 2·tig + 1), d[2] (g + 8, 2·tig), d[3].
        acc[i][j][0] = FoldTerm(acc[i][j][0], dw0, dx[j].x, d[0]);
        acc[i][j][1] = FoldTerm(acc[i][j][1], dw0, dx[j].y, d[1]);
        acc[i][j][2] = FoldTerm(acc[i][j][2], dw1, dx[j].x, d[2]);
        acc[i][j][3] = FoldTerm(acc[i][j][3], dw1, dx[j].y, d[3]);
      }
    }
  }
}

template <int BM, int BN, int WM, int WN, int STAGES, int kMinBlocks>
__global__ void __launch_bounds__(32 * WM * WN, kMinBlocks) MatMulImmaQ8_0Kernel(MatVecArgs a) {
  using C = ImmaTile<BM, BN, WM, WN, STAGES>;
  constexpr int MT = C::kMt, NT = C::kNt;
  extern __shared__ __align__(16) uint8_t imma_smem[];
  const int warp = threadIdx.x >> 5;
  const int wm0 = (warp % WM) * (BM / WM);
  const int wn0 = (warp / WM) * (BN / WN);
  TileSrc src;
  src.tok0 = blockIdx.x * BN;
  src.row0 = blockIdx.y * BM;
  src.x_off = a.rows_per_group > 0 ? uint64_t(src.row0 / a.rows_per_group) * a.x_group_bytes : 0;
  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i) {
#pragma unroll
    for (int j = 0; j < NT; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    }
  }
  const int n_stages = a.n / kStageValues;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < n_stages) LoadStage<BM, BN, WM, WN, STAGES>(a, src, imma_smem + s * C::kStageBytes, s);
    CpAsyncCommit();
  }
  for (int s = 0; s < n_stages; ++s) {
    CpAsyncWait<STAGES - 2>();  // stage s has landed (this thread's copies) …
    __syncthreads();            // … everyone's, and stage s - 1's buffer is free again
    const int next = s + STAGES - 1;
    if (next < n_stages) {
      LoadStage<BM, BN, WM, WN, STAGES>(a, src, imma_smem + (next % STAGES) * C::kStageBytes, next);
    }
    CpAsyncCommit();
    ComputeStage<BM, BN, WM, WN, STAGES>(imma_smem + (s % STAGES) * C::kStageBytes, wm0, wn0, acc);
  }
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2, tig = lane & 3;
#pragma unroll
  for (int i = 0; i < MT; ++i) {
    const int row = src.row0 + wm0 + 16 * i + g;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int tok = src.tok0 + wn0 + 8 * j + 2 * tig;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = row + 8 * (e >> 1);
        const int t = tok + (e & 1);
        if (r < a.rows && t < a.n_tokens) a.y[uint64_t(t) * a.y_row_floats + r] = acc[i][j][e];
      }
    }
  }
}

template <int BM, int BN, int WM, int WN, int STAGES, int kMinBlocks>
bool LaunchTile(CudaBackend::State& s, const MatVecArgs& a) {
  using C = ImmaTile<BM, BN, WM, WN, STAGES>;
  if (a.rows_per_group > 0 && a.rows_per_group % BM != 0) return false;
  auto* kernel = MatMulImmaQ8_0Kernel<BM, BN, WM, WN, STAGES, kMinBlocks>;
  static const cudaError_t raised = AllowSharedMemory(kernel, C::kSmem);
  if (raised != cudaSuccess) return false;
  const dim3 grid(CeilDiv(a.n_tokens, BN), CeilDiv(a.rows, BM));
  s.Launch(kernel, grid, dim3(C::kThreads), unsigned(C::kSmem), a);
  return true;
}

bool ImmaShapeOk(const MatVecArgs& a) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return a.tiles == nullptr && a.rows > 0 && a.n_tokens > 0 && a.n % kStageValues == 0 &&
         a.row_bytes == uint64_t(a.n / 32) * 34 && aligned(a.w) && aligned(a.x) &&
         a.x_row_bytes % 16 == 0 && a.x_group_bytes % 16 == 0 &&
         a.x_row_bytes >= uint64_t(a.n) + uint64_t(a.n / 32) * 4;
}

// Batches of at most kCudaImmaFewTokens tokens: the prefill tiles (128 rows a CTA) leave
// most SMs idle on every Flash matrix but q_b and the head (kv: 4 CTAs, out_b: 32 at 16
// tokens; docs/PERFORMANCE.md "Batched decode steps"), and fill a quarter of their 64
// tokens at 16. These tiles are one warp wide in tokens, BN the batch rounded up to 16 / 32 /
// 64, and 32 or 64 rows tall, with four stages in flight. The shape never changes a bit.
template <int BM, int WM, int STAGES, int kMinBlocks>
bool LaunchFewTokens(CudaBackend::State& s, const MatVecArgs& a) {
  if (a.n_tokens <= 16) return LaunchTile<BM, 16, WM, 1, STAGES, kMinBlocks>(s, a);
  if (a.n_tokens <= 32) return LaunchTile<BM, 32, WM, 1, STAGES, kMinBlocks>(s, a);
  return LaunchTile<BM, 64, WM, 1, STAGES, kMinBlocks>(s, a);
}

}  // namespace

bool LaunchMatMulImmaQ8_0(CudaBackend::State& s, int variant, const MatVecArgs& a) {
  if (!ImmaShapeOk(a)) return false;
  if (s.imma_few > 0 && a.n_tokens <= kCudaImmaFewTokens) {
    switch (s.imma_few) {
      case 1:  // 32 rows, two warps
        if (LaunchFewTokens<32, 2, 4, 4>(s, a)) return true;
        break;
      case 2:  // 64 rows, four warps: the default (docs/PERFORMANCE.md, "Narrow tensor-core tiles")
        if (LaunchFewTokens<64, 4, 4, 2>(s, a)) return true;
        break;
      case 3:  // 32 rows and tiles of 16 tokens at any batch (weights re-read from L2)
        if (LaunchTile<32, 16, 2, 1, 4, 4>(s, a)) return true;
        break;
      default:
        break;
    }
  }
  switch (variant) {
    case 1:  // warps of 32 rows × 32 tokens, two CTAs per SM
    case 4:  // (the same; the experts differ, ImmaMoePairs)
      return LaunchTile<128, 64, 4, 2, 2, 2>(s, a);
    case 2:  // warps of 64 rows × 32 tokens, one CTA per SM, three stages
      return LaunchTile<128, 128, 2, 4, 3, 1>(s, a);
    case 3:  // 64 rows × 128 tokens per CTA (weights re-read less often than activations)
      return LaunchTile<64, 128, 2, 4, 2, 2>(s, a);
    default:
      return false;
  }
}

}  // namespace flashkv::cuda
