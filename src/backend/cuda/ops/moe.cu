// RouterSelect and MoeExperts (docs/DS4_MODEL.md §5), following src/backend/cpu/op_router.cpp and
// op_moe.cpp. Routing runs one block per token (probabilities in parallel, then the
// top k by repeated warp argmax, which orders ties as ds4's insertion sort does). The experts run
// grouped: a one-block kernel sorts the (token, slot) pairs by expert and cuts each expert's list
// into tiles of up to 8 pairs (32 for the token-parallel kernels, 32 or 64 for the tensor-core
// ones), then the shared matvec kernels read each expert row once per tile — gate and up fused with
// the clamped SwiGLU and the route weight, the mids requantized, the down projection per pair — and
// a last kernel sums each token's slots in slot order. Every pair's values come from the same
// per-row arithmetic whatever tile it lands in, so batching and the order of pairs inside a tile
// cannot change a bit.
#include <algorithm>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device/common.cuh"
#include "backend/cuda/device/matvec_tp.cuh"
#include "backend/cuda/device/router.cuh"
#include "backend/cuda/products/launch.h"
#include "backend/cuda/products/moe_group.h"

namespace flashkv {
namespace cuda {
namespace {

struct RouterKernelArgs {
  const float* logits;  // [n_tokens, n_expert]
  RouteParams p;
  const int32_t* tokens;  // [n_tokens]
  int32_t* selected;      // [n_tokens, n_used]
  float* weights;         // [n_tokens, n_used]
};

// One block per token (device/router.cuh).
__global__ void RouterKernel(RouterKernelArgs a) {
  extern __shared__ float probs[];  // [2 · n_expert]
  const int t = blockIdx.x;
  RouteToken(a.p, a.logits + size_t(t) * a.p.n_expert, a.tokens + t,
             a.selected + size_t(t) * a.p.n_used, a.weights + size_t(t) * a.p.n_used, probs);
}

struct TileBuildArgs {
  const int32_t* selected;  // [n_pairs] expert of each (token, slot)
  int32_t* pairs;           // [n_pairs] out: pair ids grouped by expert
  int32_t* tiles;           // [max_tiles, 3] out: (expert, start, count)
  int n_pairs;
  int n_expert;
  int tile_nt;
  int max_tiles;
};

// One block: counting sort of pairs by expert, then each expert's run cut into tiles.
__global__ void TileBuildKernel(TileBuildArgs a) {
  extern __shared__ int sm[];
  int* count = sm;
  int* offset = count + a.n_expert;
  int* cursor = offset + a.n_expert;
  int* tile_off = cursor + a.n_expert;
  __shared__ int total_tiles;
  for (int e = threadIdx.x; e < a.n_expert; e += blockDim.x) count[e] = cursor[e] = 0;
  __syncthreads();
  for (int p = threadIdx.x; p < a.n_pairs; p += blockDim.x) {
    int e = a.selected[p];
    if (e < 0 || e >= a.n_expert) e = 0;
    atomicAdd(&count[e], 1);
  }
  __syncthreads();
  // Exclusive scans of the counts and tile counts: thread e owns expert e (E <= 1024).
  {
    __shared__ int warp_tot[2][32];
    const int e = threadIdx.x;
    const int c = e < a.n_expert ? count[e] : 0;
    const int nt = (c + a.tile_nt - 1) / a.tile_nt;
    int ic = c, it = nt;
    const int lane = e & 31, warp = e >> 5;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int vc = __shfl_up_sync(kFullMask, ic, o);
      const int vt = __shfl_up_sync(kFullMask, it, o);
      if (lane >= o) {
        ic += vc;
        it += vt;
      }
    }
    if (lane == 31) {
      warp_tot[0][warp] = ic;
      warp_tot[1][warp] = it;
    }
    __syncthreads();
    int bc = 0, bt = 0;
    for (int w = 0; w < warp; ++w) {
      bc += warp_tot[0][w];
      bt += warp_tot[1][w];
    }
    if (e < a.n_expert) {
      offset[e] = bc + ic - c;
      tile_off[e] = bt + it - nt;
    }
    if (e == int(blockDim.x) - 1) total_tiles = bt + it;
  }
  __syncthreads();
  for (int p = threadIdx.x; p < a.n_pairs; p += blockDim.x) {
    int e = a.selected[p];
    if (e < 0 || e >= a.n_expert) e = 0;
    a.pairs[offset[e] + atomicAdd(&cursor[e], 1)] = p;
  }
  for (int e = threadIdx.x; e < a.n_expert; e += blockDim.x) {
    const int n_t = (count[e] + a.tile_nt - 1) / a.tile_nt;
    for (int j = 0; j < n_t; ++j) {
      int* tile = a.tiles + 3 * (tile_off[e] + j);
      tile[0] = e;
      tile[1] = offset[e] + j * a.tile_nt;
      tile[2] = min(a.tile_nt, count[e] - j * a.tile_nt);
    }
  }
  for (int j = total_tiles + threadIdx.x; j < a.max_tiles; j += blockDim.x) {
    a.tiles[3 * j] = 0;
    a.tiles[3 * j + 1] = 0;
    a.tiles[3 * j + 2] = 0;
  }
}

struct SlotSumArgs {
  const float* down;  // [n_tokens, n_used, n_embd]
  float* out;         // [n_tokens, n_embd]
  int n_tokens;
  int n_used;
  int n_embd;
};
__global__ void SlotSumKernel(SlotSumArgs a) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(a.n_tokens) * a.n_embd) return;
  const int64_t t = i / a.n_embd;
  const int d = int(i % a.n_embd);
  float acc = 0.0f;
  for (int s = 0; s < a.n_used; ++s) {
    acc = __fadd_rn(acc, a.down[(t * a.n_used + s) * a.n_embd + d]);
  }
  a.out[i] = acc;
}

struct CountRoutesArgs {
  const int32_t* selected;
  uint32_t* counts;
  int n;
  int n_expert;
};
__global__ void CountRoutesKernel(CountRoutesArgs a) {
  const int i = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x);
  if (i >= a.n) return;
  const int e = a.selected[i];
  if (e >= 0 && e < a.n_expert) atomicAdd(a.counts + e, 1u);
}

}  // namespace
}  // namespace cuda

void CudaBackend::CountRoutes(DevPtr<const int32_t> selected, int n, int n_expert,
                              DevPtr<uint32_t> counts) {
  if (n <= 0 || n_expert <= 0) return;
  s_->Launch(cuda::CountRoutesKernel, dim3(cuda::CeilDiv(n, 256)), dim3(256), 0,
             cuda::CountRoutesArgs{selected.get(), counts.get(), n, n_expert});
}

void CudaBackend::RouterSelect(const RouterArgs& a) {
  if (a.n_tokens <= 0) return;
  if (a.n_used > cuda::kMaxExpertsUsed) return s_->Fail("router: more than 32 experts per token");
  cuda::RouterKernelArgs k{a.logits.get(), cuda::RouteParamsOf(a), a.tokens.get(), a.selected.get(),
                           a.weights.get()};
  s_->Launch(cuda::RouterKernel, dim3(a.n_tokens), dim3(128),
             unsigned(2 * sizeof(float) * a.n_expert), k);
}

void CudaBackend::MoeExperts(const MoeArgs& a) {
  if (a.n_tokens <= 0) return;
  State& s = *s_;
  const Weight& gate = *a.gate;
  const Weight& up = *a.up;
  const Weight& down = *a.down;
  const int D = int(gate.ne[0]);
  const int F = int(gate.ne[1]);
  const int E = int(gate.ne[2]);
  const int k = a.n_used;
  const int n_pairs = a.n_tokens * k;
  const bool q8 = a.act_quant == ActQuantMode::kQ8;
  const ActQuant q_in = q8 ? cuda::Q8ActFor(gate.type) : ActQuant::kNone;
  const ActQuant q_mid = q8 ? cuda::Q8ActFor(down.type) : ActQuant::kNone;
  // Tiles: 1 pair when decoding; 32 for the token-parallel kernels when both weight types
  // have them (q8 Q8_0 / Q2_K / IQ2_XXS), else 8.
  auto tp_type = [](DType t) {
    return t == DType::kQ8_0 || t == DType::kQ2_K || t == DType::kIQ2_XXS;
  };
  // Gate/up (two rows per warp, the larger share of the work) in tiles of 32 for the
  // token-parallel kernel; the down projection keeps tiles of 8 (docs/CUDA.md, routed experts). The
  // tensor-core kernels (IQ2_XXS gate/up, Q2_K down) take tiles of 32 or 64 pairs
  // (ImmaMoePairs; 8 for decode batches); when both lists have one size they are one list. A few
  // decode rows (2 … s.moe_group_max): tiles of 8 for the kernels that read each expert tile once
  // for its pairs (products/moe_group.h); they fall back to the warp kernels.
  const int plain_nt = a.n_tokens == 1 ? 1 : 8;
  const bool group = q8 && a.n_tokens > 1 && a.n_tokens <= s.moe_group_max;
  const bool imma_gu = !group && s.imma > 0 && gate.type == DType::kIQ2_XXS;
  const bool imma_dn = !group && s.imma > 0 && a.n_tokens > 1 && down.type == DType::kQ2_K && q8;
  const int tile_nt =
      imma_dn ? cuda::ImmaMoePairs(s.imma, n_pairs, E, cuda::kImmaDownWideFrom, s.moe_narrow)
              : plain_nt;
  const int max_tiles = (n_pairs + tile_nt - 1) / tile_nt + std::min(E, n_pairs);
  const int gu_nt = !group && a.n_tokens > 1 && q8 && tp_type(gate.type)
                        ? (imma_gu ? cuda::ImmaMoePairs(s.imma, n_pairs, E,
                                                        cuda::kImmaGateUpWideFrom, s.moe_narrow)
                                   : cuda::kTpTokens)
                        : plain_nt;
  const int gu_max_tiles = (n_pairs + gu_nt - 1) / gu_nt + std::min(E, n_pairs);

  // Scratch: sorted pairs + tiles; quantized x; mids; quantized mids; per-pair down rows.
  auto* tile_mem = static_cast<int32_t*>(s.Scratch(
      CudaScratch::kMoeTiles,
      sizeof(int32_t) * (2 * size_t(n_pairs) + 3 * size_t(max_tiles) + 3 * size_t(gu_max_tiles))));
  auto* mid =
      static_cast<float*>(s.Scratch(CudaScratch::kMoeMid, sizeof(float) * size_t(n_pairs) * F));
  auto* down_out =
      static_cast<float*>(s.Scratch(CudaScratch::kMoeDown, sizeof(float) * size_t(n_pairs) * D));
  if (tile_mem == nullptr || mid == nullptr || down_out == nullptr) return;
  int32_t* pairs = tile_mem;
  int32_t* tiles = tile_mem + n_pairs;
  int32_t* gu_pairs = tiles + 3 * size_t(max_tiles);
  int32_t* gu_tiles = gu_pairs + n_pairs;

  const uint8_t* x = reinterpret_cast<const uint8_t*>(a.x.get());
  const uint64_t x_row = cuda::Q8ActRowBytes(q_in, D);
  if (q_in != ActQuant::kNone) {
    auto* xq = static_cast<uint8_t*>(s.Scratch(CudaScratch::kMoeXq, x_row * a.n_tokens));
    if (xq == nullptr) return;
    cuda::LaunchQuantizeRows(s, q_in, a.x.get(), a.n_tokens, D, xq);
    x = xq;
  }
  s.Launch(cuda::TileBuildKernel, dim3(1), dim3(1024), unsigned(4 * sizeof(int) * E),
           cuda::TileBuildArgs{a.selected.get(), pairs, tiles, n_pairs, E, tile_nt, max_tiles});
  if (gu_nt != tile_nt) {
    s.Launch(
        cuda::TileBuildKernel, dim3(1), dim3(1024), unsigned(4 * sizeof(int) * E),
        cuda::TileBuildArgs{a.selected.get(), gu_pairs, gu_tiles, n_pairs, E, gu_nt, gu_max_tiles});
  } else {
    gu_pairs = pairs;
    gu_tiles = tiles;
  }

  cuda::GateUpArgs gu;
  gu.mv.w = gate.data.get();
  gu.mv.w_experts = gate.experts.get();
  gu.mv.row_bytes = gate.row_bytes;
  gu.mv.expert_bytes = gate.matrix_bytes();
  gu.mv.rows = F;
  gu.mv.n = D;
  gu.mv.x = x;
  gu.mv.x_row_bytes = x_row;
  gu.mv.n_tokens = a.n_tokens;
  gu.mv.y = mid;
  gu.mv.y_row_floats = uint64_t(F);
  gu.mv.tiles = gu_tiles;
  gu.mv.pairs = gu_pairs;
  gu.mv.pair_div = k;
  gu.mv.n_tiles = gu_max_tiles;
  gu.mv.tile_nt = gu_nt;
  gu.mv.iq2_grid = s.iq2_grid;
  // Every chosen expert's rows once (at most n_expert of them).
  const uint64_t experts_read = uint64_t(std::min(E, n_pairs));
  gu.mv.weight_bytes = 2 * experts_read * gate.matrix_bytes();
  gu.w_up = up.data.get();
  gu.up_experts = up.experts.get();
  gu.route_w = a.weights.get();
  gu.clamp = a.clamp;
  if (up.type != gate.type || up.row_bytes != gate.row_bytes ||
      (!(group && cuda::LaunchMoeGroupGateUp(s, gate.type, gu)) &&
       !cuda::LaunchGateUp(s, gate.type, q_in != ActQuant::kNone, gu))) {
    return s.Fail("moe: no CUDA kernel for " + gate.name + " / " + up.name);
  }

  const uint8_t* mids = reinterpret_cast<const uint8_t*>(mid);
  const uint64_t mid_row = cuda::Q8ActRowBytes(q_mid, F);
  if (q_mid != ActQuant::kNone) {
    auto* midq = static_cast<uint8_t*>(s.Scratch(CudaScratch::kMoeMidQ, mid_row * n_pairs));
    if (midq == nullptr) return;
    cuda::LaunchQuantizeRows(s, q_mid, mid, n_pairs, F, midq);
    mids = midq;
  }
  cuda::MatVecArgs dn = gu.mv;
  dn.w = down.data.get();
  dn.w_experts = down.experts.get();
  dn.row_bytes = down.row_bytes;
  dn.expert_bytes = down.matrix_bytes();
  dn.rows = D;
  dn.n = F;
  dn.x = mids;
  dn.x_row_bytes = mid_row;
  dn.y = down_out;
  dn.y_row_floats = uint64_t(D);
  dn.pair_div = 1;
  dn.weight_bytes = experts_read * down.matrix_bytes();
  dn.tiles = tiles;
  dn.pairs = pairs;
  dn.n_tiles = max_tiles;
  dn.tile_nt = tile_nt;
  if (!(group && cuda::LaunchMoeGroupDown(s, down.type, dn)) &&
      !cuda::LaunchMatVec(s, down.type, q_mid != ActQuant::kNone, dn)) {
    return s.Fail("moe: no CUDA kernel for " + down.name);
  }
  const int64_t total = int64_t(a.n_tokens) * D;
  s.Launch(cuda::SlotSumKernel, dim3(cuda::CeilDiv(total, 256)), dim3(256), 0,
           cuda::SlotSumArgs{down_out, a.out.get(), a.n_tokens, k, D});
}

}  // namespace flashkv
