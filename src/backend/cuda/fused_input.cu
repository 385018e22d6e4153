// The fused SublayerInput of a one-token step (fused_launch.h), two kernels instead of
// HcNorm, the mix product, HcSplit, RmsNorm and a quantizer + a product per projection:
// - SublayerInputKernel, one block per HC mix row: the flattened streams' RMS sum
//   (HcNormKernel's tree, hc_dev.cuh), the row's product with the normalised streams
//   (MatVecSplitKernel's order, each normalised value formed where it is read, as
//   __fmul_rn(x, scale) — the value HcNormKernel stores), then in the last block
//   (fused_sync.cuh) the Sinkhorn split, post and comb, the stream sum u, RMSNorm(u) · norm
//   with RmsNormKernel's tree, and xn quantized to Q8_0 with act_quant.cuh's quantizer;
// - ProjectSetKernel: every Q8_0 projection of that row in one launch, each output row as
//   MatVecKernel's one-token path forms it (WarpRowDotQ8, staged).
#include "backend/cuda/act_quant.cuh"
#include "backend/cuda/fused_launch.h"
#include "backend/cuda/fused_sync.cuh"
#include "backend/cuda/hc_dev.cuh"
#include "backend/cuda/matvec.cuh"
#include "backend/cuda/matvec_launch.h"
#include "backend/cuda/norm_rope_dev.cuh"

namespace flashkv::cuda {
namespace {

// A multiple of 32 that divides kHcNormThreads, at least kSplitWarps warps and at least every
// RmsNormThreads(n).
constexpr int kInputThreads = kSplitWarps * 32;
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

template <DType TF>
__global__ void __launch_bounds__(kInputThreads) SublayerInputKernel(InputArgs a) {
  extern __shared__ float row[];  // [n_embd]: u, then xn
  __shared__ double dsum[32];
  __shared__ float part[kSplitWarps][1];
  __shared__ float mix[(2 + kMaxHc) * kMaxHc];
  __shared__ float split[(2 + kMaxHc) * kMaxHc];
  const int n = a.n_hc;
  const int hc_dim = n * a.n_embd;

  // mix[r] = fn[r] · RMS_1(x_hc).
  const float scale = RmsScale(HcNormSumSquares(a.x_hc, hc_dim, dsum), hc_dim, a.hc_norm_eps);
  const float* xf[1] = {a.x_hc};
  const float m = SplitRowDotsF32<TF, 1>(a.fn + uint64_t(blockIdx.x) * a.fn_row_bytes, xf, 1,
                                         hc_dim, a.iq2_grid, part, ScaleXMap{scale});
  if (threadIdx.x == 0) a.mix[blockIdx.x] = m;
  if (!ArriveLast(a.counter, gridDim.x)) return;

  // pre, post, comb (HcSplitKernel).
  const int n_mix = (2 + n) * n;
  for (int i = threadIdx.x; i < n_mix; i += blockDim.x) mix[i] = __ldcg(a.mix + i);
  __syncthreads();
  if (n * n <= 32) {
    if (threadIdx.x < 32) {
      SplitSinkhornWarp(mix, a.hc_scale, a.hc_base, n, a.iters, a.hc_eps, split);
    }
  } else if (threadIdx.x == 0) {
    SplitSinkhorn(mix, a.hc_scale, a.hc_base, n, a.iters, a.hc_eps, split);
  }
  __syncthreads();
  for (int k = threadIdx.x; k < n + n * n; k += blockDim.x) {
    if (k < n) {
      a.post[k] = split[n + k];
    } else {
      a.comb[k - n] = split[2 * n + (k - n)];
    }
  }
  for (int d = threadIdx.x; d < a.n_embd; d += blockDim.x) {
    const float v = HcStreamSum(a.x_hc, split, n, a.n_embd, d);
    row[d] = v;
    a.u[d] = v;
  }
  __syncthreads();

  // xn = RMSNorm(u) · norm with RmsNormKernel's tree: its RmsNormThreads(n_embd) threads'
  // partial sums, the other warps' zero (as the lanes past its warps are in BlockSumD).
  const int rt = RmsNormThreads(a.n_embd);
  double ss = 0.0;
  if (int(threadIdx.x) < rt) {
    for (int i = threadIdx.x; i < a.n_embd; i += rt) ss = __fma_rn(double(row[i]), row[i], ss);
  }
  const float rs = RmsScale(BlockSumD(ss, dsum), a.n_embd, a.eps);
  for (int i = threadIdx.x; i < a.n_embd; i += blockDim.x) {
    const float v = RmsNormed(row[i], rs, a.norm, i);
    row[i] = v;
    a.xn[i] = v;
  }
  __syncthreads();
  if (a.xq != nullptr) {
    QuantizeRowByWarps(row, a.xq, a.n_embd, false, threadIdx.x >> 5, kInputThreads / 32);
  }
}

constexpr int kProjectWarps = 4;  // MatVecKernel's warps per block

struct ProjectSetArgs {
  const uint8_t* w[kMaxInputProjections];
  uint64_t row_bytes[kMaxInputProjections];
  float* y[kMaxInputProjections];
  int rows[kMaxInputProjections];
  int first_block[kMaxInputProjections + 1];
  int n_proj;
  const uint8_t* x;  // the Q8_0 row of xn
  int n;
  const uint64_t* iq2_grid;
};

__global__ void __launch_bounds__(kProjectWarps * 32) ProjectSetKernel(ProjectSetArgs a) {
  __shared__ __align__(16) uint8_t stage[kProjectWarps * kQ8_0StageBytes];
  const int warp = threadIdx.x >> 5;
  int p = 0;
  while (p + 1 < a.n_proj && int(blockIdx.x) >= a.first_block[p + 1]) ++p;
  const int r = (int(blockIdx.x) - a.first_block[p]) * kProjectWarps + warp;
  if (r >= a.rows[p]) return;
  const uint8_t* wrow[1] = {a.w[p] + uint64_t(r) * a.row_bytes[p]};
  const uint8_t* xb[1] = {a.x};
  float out[1];
  WarpRowDotQ8<DType::kQ8_0, 1, 1>(wrow, xb, 1, a.n, nullptr, a.iq2_grid, out,
                                   stage + warp * kQ8_0StageBytes);
  if ((threadIdx.x & 31) == 0) a.y[p][r] = out[0];
}

template <DType TF>
void LaunchInput(CudaBackend::State& s, int mix, unsigned smem, const InputArgs& k,
                 uint64_t bytes) {
  s.Launch(SublayerInputKernel<TF>, dim3(mix), dim3(kInputThreads), smem, k, bytes);
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

  // Projections the set kernel takes: Q8_0 weights over the whole row, q8 activations.
  int mask = 0;
  ProjectSetArgs ps{};
  uint64_t ps_bytes = 0;
  int blocks = 0;
  for (int i = 0; i < a.n_proj; ++i) {
    const Weight& w = *a.proj[i].w;
    if (a.aq != ActQuantMode::kQ8 || w.type != DType::kQ8_0 || w.ne[0] != uint64_t(p.n_embd) ||
        p.n_embd % 32 != 0 || w.ne[1] == 0) {
      continue;
    }
    const int j = ps.n_proj++;
    ps.w[j] = w.data.get();
    ps.row_bytes[j] = w.row_bytes;
    ps.y[j] = a.proj[i].y.get();
    ps.rows[j] = int(w.ne[1]);
    ps.first_block[j] = blocks;
    blocks += int(CeilDiv(w.ne[1], kProjectWarps));
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
  const unsigned smem = unsigned(sizeof(float) * p.n_embd);
  const uint64_t fn_bytes = fn.matrix_bytes();
  switch (fn.type) {
    case DType::kF16:
      LaunchInput<DType::kF16>(s, mix, smem, k, fn_bytes);
      break;
    case DType::kBF16:
      LaunchInput<DType::kBF16>(s, mix, smem, k, fn_bytes);
      break;
    default:
      LaunchInput<DType::kF32>(s, mix, smem, k, fn_bytes);
      break;
  }
  if (ps.n_proj > 0) {
    ps.x = xq;
    ps.n = p.n_embd;
    ps.iq2_grid = s.iq2_grid;
    s.Launch(ProjectSetKernel, dim3(blocks), dim3(kProjectWarps * 32), 0, ps, ps_bytes);
  }
  return mask;
}

}  // namespace flashkv::cuda
