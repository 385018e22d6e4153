// The fused SublayerInput of a one-token step (fused/launch.h), two kernels instead of
// HcNorm, the mix product, HcSplit, RmsNorm and a quantizer + a product per projection:
// - SublayerInputKernel, one block per HC mix row: the flattened streams' RMS sum
//   (HcNormKernel's tree, device/hc.cuh), the row's product with the normalised streams
//   (MatVecSplitKernel's order, each normalised value formed where it is read, as
//   __fmul_rn(x, scale) — the value HcNormKernel stores), then in the last block
//   (fused/sync.cuh) the Sinkhorn split, post and comb, the stream sum u, RMSNorm(u) · norm
//   with RmsNormKernel's tree, and xn quantized to Q8_0 with device/act_quant.cuh's quantizer;
// - ProjectSetKernel: every Q8_0 projection of that row in one launch, a block per tile of
//   rows (device/matvec_tile.cuh), each output row with MatVecKernel's one-token bits.
#include <algorithm>

#include "backend/cuda/device/act_quant.cuh"
#include "backend/cuda/device/hc.cuh"
#include "backend/cuda/device/imma_ptx.cuh"
#include "backend/cuda/device/matvec.cuh"
#include "backend/cuda/device/matvec_tile.cuh"
#include "backend/cuda/device/norm_rope.cuh"
#include "backend/cuda/fused/launch.h"
#include "backend/cuda/fused/sync.cuh"
#include "backend/cuda/products/launch.h"

namespace flashkv::cuda {
namespace {

// A multiple of 32 that divides kHcNormThreads, at least kSplitWarps warps and at least every
// RmsNormThreads(n).
constexpr int kInputThreads = kSplitWarps * 32;
constexpr int kInputWarps = kInputThreads / 32;
static_assert(kHcNormThreads % kInputThreads == 0 && kInputThreads >= 256);
constexpr int kMaxInputEmbd = 12288;  // the last block keeps a row of n_embd floats

struct InputArgs {
  const float* x_hc;  // [n_hc·n_embd]
  const uint8_t* fn;  // [mix, hc_dim]
  uint64_t fn_row_bytes;
  const float* hc_scale;  // [3]
  const float* hc_base;   // [mix]
  float* mix;             // [mix] scratch
  float* u;               // [n_embd]
  float* post;            // [n_hc]
  float* comb;            // [n_hc·n_hc]
  float* xn;              // [n_embd]
  const float* norm;      // [n_embd] or null
  uint8_t* xq;            // the Q8_0 row of xn, or null
  unsigned* counter;
  const uint64_t* iq2_grid;
  int n_hc;
  int n_embd;
  int iters;
  float hc_norm_eps;  // the flattened streams' RMS
  float hc_eps;       // pre / comb and Sinkhorn
  float eps;          // the sublayer norm
};

// Dynamic shared memory: the streams [hc_dim floats], the block's fn row, then [n_embd] (u,
// then xn) and, with a norm, its weights [n_embd].
__host__ __device__ inline unsigned InputFnOffset(int hc_dim) {
  return 4u * unsigned(hc_dim);
}
__host__ __device__ inline unsigned InputRowOffset(int hc_dim, uint64_t fn_row_bytes) {
  return InputFnOffset(hc_dim) + unsigned(fn_row_bytes);
}

template <DType TF>
__global__ void __launch_bounds__(kInputThreads) SublayerInputKernel(InputArgs a) {
  PdlTrigger();  // launched without the overlap flag: ProjectSetKernel's blocks may start
  extern __shared__ __align__(16) uint8_t input_smem[];
  __shared__ double dsum[32];
  __shared__ float part[kSplitWarps][1];
  __shared__ float mix[(2 + kMaxHc) * kMaxHc];
  __shared__ float split[(2 + kMaxHc) * kMaxHc];
  __shared__ float hc_base[(2 + kMaxHc) * kMaxHc];
  __shared__ float hc_scale[3];
  __shared__ float pre[kMaxHc];
  const int n = a.n_hc;
  const int hc_dim = n * a.n_embd;
  float* xs = reinterpret_cast<float*>(input_smem);
  uint8_t* fns = input_smem + InputFnOffset(hc_dim);
  float* row = reinterpret_cast<float*>(input_smem + InputRowOffset(hc_dim, a.fn_row_bytes));

  // The streams and this block's fn row into shared memory, every load in flight at once
  // (the sums below then wait on one round trip instead of a chain of them).
  {
    const uint4* xsrc = reinterpret_cast<const uint4*>(a.x_hc);
    for (int c = threadIdx.x; c < hc_dim / 4; c += kInputThreads) {
      CpAsync16(SmemAddr(xs + 4 * c), xsrc + c);
    }
    const uint4* fsrc =
        reinterpret_cast<const uint4*>(a.fn + uint64_t(blockIdx.x) * a.fn_row_bytes);
    for (int c = threadIdx.x; c < int(a.fn_row_bytes / 16); c += kInputThreads) {
      CpAsync16(SmemAddr(fns + 16 * c), fsrc + c);
    }
    CpAsyncCommit();
    CpAsyncWait<0>();
    __syncthreads();
  }

  // mix[r] = fn[r] · RMS_1(x_hc).
  const float scale = RmsScale(HcNormSumSquares(xs, hc_dim, dsum), hc_dim, a.hc_norm_eps);
  const float* xf[1] = {xs};
  const float m = SplitRowDotsF32<TF, 1, ScaleXMap, false>(fns, xf, 1, hc_dim, a.iq2_grid, part,
                                                           ScaleXMap{scale});
  if (threadIdx.x == 0) a.mix[blockIdx.x] = m;
  if (!ArriveLast(a.counter, gridDim.x)) return;

  // The last block: the split (pre, post, comb: HcSplitKernel), u, xn and its Q8_0 row. Only
  // the comb needs the Sinkhorn's 20 dependent passes, and nothing this launch computes reads
  // it, so warp 0 runs the Sinkhorn while warps 1..7 form the pre weights themselves (the
  // same operations, device/hc.cuh HcPreWeight), u, RMSNorm(u) and the quantized row.
  // Everything the warps read here is in shared memory before they start: the mix, the HC
  // scale and base, and the norm weights (copied asynchronously by the warps that read them,
  // arriving while u is formed).
  const int n_mix = (2 + n) * n;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  float* norm = a.norm != nullptr ? row + a.n_embd : nullptr;
  if (warp > 0 && norm != nullptr) {
    for (int i = threadIdx.x - 32; i < a.n_embd; i += kInputThreads - 32) {
      CpAsync4(SmemAddr(norm + i), a.norm + i);
    }
    CpAsyncCommit();
  }
  for (int i = threadIdx.x; i < n_mix; i += blockDim.x) {
    mix[i] = __ldcg(a.mix + i);
    hc_base[i] = a.hc_base[i];
  }
  if (threadIdx.x < 3) hc_scale[threadIdx.x] = a.hc_scale[threadIdx.x];
  __syncthreads();
  if (warp == 0) {
    if (n * n <= 32) {
      SplitSinkhornWarp(mix, hc_scale, hc_base, n, a.iters, a.hc_eps, split);
    } else if (lane == 0) {
      SplitSinkhorn(mix, hc_scale, hc_base, n, a.iters, a.hc_eps, split);
    }
    __syncwarp();
    for (int k = lane; k < n + n * n; k += 32) {
      if (k < n) {
        a.post[k] = split[n + k];
      } else {
        a.comb[k - n] = split[2 * n + (k - n)];
      }
    }
    return;
  }
  constexpr int kRest = kInputThreads - 32;  // warps 1..7
  const int t = threadIdx.x - 32;
  if (t < n) pre[t] = HcPreWeight(mix, hc_scale, hc_base, t, a.hc_eps);
  GroupBarrier(1, kRest);
  for (int d = t; d < a.n_embd; d += kRest) {
    const float v = HcStreamSum(xs, pre, n, a.n_embd, d);
    row[d] = v;
    a.u[d] = v;
  }
  GroupBarrier(1, kRest);

  // xn = RMSNorm(u) · norm with RmsNormKernel's tree: the partial sums of its
  // RmsNormThreads(n_embd) threads in kInputWarps warps of 32 lanes (the warps past them
  // summing zero, as BlockSumD's do), each such warp's sum formed by one of warps 1..7 with
  // its own lanes as that warp's lanes, then the warps' sums in warp order.
  const int rt = RmsNormThreads(a.n_embd);
  for (int vw = warp - 1; vw < kInputWarps; vw += kInputWarps - 1) {
    const int vt = vw * 32 + lane;
    double ss = 0.0;
    if (vt < rt) {
      for (int i = vt; i < a.n_embd; i += rt) ss = __fma_rn(double(row[i]), row[i], ss);
    }
    ss = WarpSumD(ss);
    if (lane == 0) dsum[vw] = ss;
  }
  if (norm != nullptr) CpAsyncWait<0>();
  GroupBarrier(1, kRest);
  const float rs = RmsScale(WarpSumD(lane < kInputWarps ? dsum[lane] : 0.0), a.n_embd, a.eps);
  if (a.xq != nullptr) {
    // Each Q8_0 block's 32 values normalised and quantized by one warp, from registers.
    for (int b = warp - 1; b < a.n_embd / 32; b += kInputWarps - 1) {
      const int i = b * 32 + lane;
      const float v = RmsNormed(row[i], rs, norm, i);
      a.xn[i] = v;
      QuantizeQ8_0ValueWarp(v, a.xq, a.n_embd, b);
    }
  } else {
    for (int i = t; i < a.n_embd; i += kRest) a.xn[i] = RmsNormed(row[i], rs, norm, i);
  }
}

struct ProjectSetArgs {
  const uint8_t* w[kMaxInputProjections];
  uint64_t row_bytes[kMaxInputProjections];
  float* y[kMaxInputProjections];
  int rows[kMaxInputProjections];
  int tile_rows[kMaxInputProjections];
  int first_block[kMaxInputProjections + 1];  // first tile of each projection; then the count
  int n_proj;
  unsigned buf_bytes;  // one tile buffer
  const uint8_t* x;    // the Q8_0 row of xn
  int n;
  const uint64_t* iq2_grid;
};

// Tiles of every projection in one grid (device/matvec_tile.cuh: MatVecKernel's one-token bits).
__global__ void __launch_bounds__(kTileThreads, kTileMinBlocks) ProjectSetKernel(ProjectSetArgs a) {
  extern __shared__ __align__(16) uint8_t tile_smem[];
  int p_hint = 0;  // the tiles a block takes only grow
  TileLoop<DType::kQ8_0, 1>(
      a.first_block[a.n_proj], a.n, tile_smem, a.buf_bytes, nullptr, a.iq2_grid,
      [&](int t) {
        int p = p_hint;
        while (p + 1 < a.n_proj && t >= a.first_block[p + 1]) ++p;
        p_hint = p;
        const int row0 = (t - a.first_block[p]) * a.tile_rows[p];
        return TileJob<1>{{a.w[p] + uint64_t(row0) * a.row_bytes[p]},
                          row0,
                          min(a.tile_rows[p], a.rows[p] - row0),
                          int(a.row_bytes[p]),
                          TileX{a.x},
                          p};
      },
      [&](const TileJob<1>& j, const float(&out)[1]) {
        if (int(threadIdx.x) < j.rows) a.y[j.tag][j.row0 + threadIdx.x] = out[0];
      });
}

// The most dynamic shared memory SublayerInputKernel asks for (Flash: 64 KiB of streams,
// a 32 KiB F16 row, 16 KiB of row and 16 KiB of norm weights).
constexpr int kMaxInputSmem = 160 * 1024;

template <DType TF>
bool LaunchInput(CudaBackend::State& s, int mix, unsigned smem, const InputArgs& k,
                 uint64_t bytes) {
  static const cudaError_t raised = AllowSharedMemory(SublayerInputKernel<TF>, kMaxInputSmem);
  if (raised != cudaSuccess && smem > 48 * 1024) return false;
  s.Launch(SublayerInputKernel<TF>, dim3(mix), dim3(kInputThreads), smem, k, bytes);
  return true;
}

}  // namespace

int LaunchFusedSublayerInput(CudaBackend::State& s, const SublayerInputArgs& a) {
  const HcParams& p = a.hc;
  const Weight& fn = *a.hc_fn;
  if (a.n_tokens != 1 || p.n_hc < 1 || p.n_hc > kMaxHc || p.n_embd > kMaxInputEmbd) return -1;
  const int hc_dim = p.n_hc * p.n_embd;
  const int mix = (2 + p.n_hc) * p.n_hc;
  if (fn.ne[0] != uint64_t(hc_dim) || fn.ne[1] != uint64_t(mix) || mix >= kSplitBelowRows) {
    return -1;
  }
  const int unit = fn.type == DType::kF32 ? 4 : 8;
  if ((fn.type != DType::kF16 && fn.type != DType::kBF16 && fn.type != DType::kF32) ||
      hc_dim % unit != 0) {
    return -1;
  }
  if (a.norm != nullptr && a.norm->type != DType::kF32) return -1;
  // The streams and the fn rows are copied in 16-byte pieces.
  const unsigned smem = InputRowOffset(hc_dim, fn.row_bytes) +
                        unsigned(sizeof(float) * p.n_embd) * (a.norm != nullptr ? 2 : 1);
  if (reinterpret_cast<uintptr_t>(a.x_hc.get()) % 16 != 0 || hc_dim % 4 != 0 ||
      reinterpret_cast<uintptr_t>(fn.data.get()) % 16 != 0 || fn.row_bytes % 16 != 0 ||
      smem > unsigned(kMaxInputSmem)) {
    return -1;
  }

  // Projections the set kernel takes: Q8_0 weights over the whole row, q8 activations.
  int mask = 0;
  ProjectSetArgs ps{};
  uint64_t ps_bytes = 0;
  int blocks = 0;
  unsigned ps_smem = 0;
  for (int i = 0; i < a.n_proj; ++i) {
    const Weight& w = *a.proj[i].w;
    const int tile_rows = TileRowsFor(w.row_bytes, 1, s.tile_bytes);
    if (a.aq != ActQuantMode::kQ8 || w.type != DType::kQ8_0 || w.ne[0] != uint64_t(p.n_embd) ||
        p.n_embd % 32 != 0 || w.ne[1] == 0 || tile_rows == 0) {
      continue;
    }
    const int j = ps.n_proj++;
    ps.w[j] = w.data.get();
    ps.row_bytes[j] = w.row_bytes;
    ps.y[j] = a.proj[i].y.get();
    ps.rows[j] = int(w.ne[1]);
    ps.tile_rows[j] = tile_rows;
    ps.first_block[j] = blocks;
    blocks += int(CeilDiv(w.ne[1], tile_rows));
    ps_smem = std::max(ps_smem, TileSmemBytes(w.row_bytes, 1, tile_rows, p.n_embd / 32));
    ps_bytes += w.matrix_bytes();
    mask |= 1 << i;
  }
  ps.first_block[ps.n_proj] = blocks;

  auto* mix_out = static_cast<float*>(s.Scratch(CudaScratch::kFusedMix, sizeof(float) * mix));
  uint8_t* xq = nullptr;
  if (ps.n_proj > 0) {
    xq = static_cast<uint8_t*>(
        s.Scratch(CudaScratch::kFusedInputQ, Q8ActRowBytes(ActQuant::kQ8_0, p.n_embd)));
    if (xq == nullptr) return -1;
  }
  if (mix_out == nullptr) return -1;

  InputArgs k{};
  k.x_hc = a.x_hc.get();
  k.fn = fn.data.get();
  k.fn_row_bytes = fn.row_bytes;
  k.hc_scale = reinterpret_cast<const float*>(a.hc_scale->data.get());
  k.hc_base = reinterpret_cast<const float*>(a.hc_base->data.get());
  k.mix = mix_out;
  k.u = a.u.get();
  k.post = a.post.get();
  k.comb = a.comb.get();
  k.xn = a.xn.get();
  k.norm = a.norm != nullptr ? reinterpret_cast<const float*>(a.norm->data.get()) : nullptr;
  k.xq = xq;
  k.counter = s.sync_counters + kSyncInput;
  k.iq2_grid = s.iq2_grid;
  k.n_hc = p.n_hc;
  k.n_embd = p.n_embd;
  k.iters = p.sinkhorn_iters;
  k.hc_norm_eps = p.norm_eps;
  k.hc_eps = p.hc_eps;
  k.eps = a.eps;
  const uint64_t fn_bytes = fn.matrix_bytes();
  bool launched = false;
  switch (fn.type) {
    case DType::kF16:
      launched = LaunchInput<DType::kF16>(s, mix, smem, k, fn_bytes);
      break;
    case DType::kBF16:
      launched = LaunchInput<DType::kBF16>(s, mix, smem, k, fn_bytes);
      break;
    default:
      launched = LaunchInput<DType::kF32>(s, mix, smem, k, fn_bytes);
      break;
  }
  if (!launched) return -1;
  if (ps.n_proj > 0) {
    ps.x = xq;
    ps.n = p.n_embd;
    ps.iq2_grid = s.iq2_grid;
    PreferSharedForTiles(ProjectSetKernel);
    ps.buf_bytes = ps_smem;
    bool loops = false;
    const int grid = TileGrid(blocks, s.prop.multiProcessorCount, s.tile_blocks_per_sm, &loops);
    s.LaunchOverlapped(ProjectSetKernel, dim3(grid), dim3(kTileThreads),
                       loops ? 2 * ps_smem : ps_smem, ps, ps_bytes);
  }
  return mask;
}

}  // namespace flashkv::cuda
