// The fused MoeBlock of a one-token step (fused/launch.h): three kernels instead of 17 (the
// router product, RouterKernel, the input quantizer, TileBuild, GateUp, the mid quantizer, the
// down product, SlotSum, two shared quantizers + products, SwiGlu, the shared mid quantizer +
// down product, Add, HcPost). With one token every (token, slot) pair is its own tile, so the
// experts are read straight from the routing, and each value is formed by the device code
// that forms it in the unfused kernels:
// - MoeRouteKernel, one block per expert: the router row (MatVecSplitKernel's order), a share
//   of the input's quantization for the experts (Q8_K) and the shared expert (Q8_0); the last
//   block routes the token (device/router.cuh).
// - MoeGateUpKernel, grid (row groups, slots + 1): gate and up rows of the chosen expert (slot
//   < n_used, WarpRowDotQ8 as GateUpKernel) or of the shared expert (the last slot, as two
//   MatVecKernel rows), SwiGLU (· the route weight for the experts); the last block of a slot
//   quantizes its mid row for the down product.
// - MoeDownKernel, grid (row groups, slots + 1): each slot's down row; the last block of a
//   row group sums the slots in slot order (SlotSumKernel), adds the shared expert's (Add)
//   and writes HC_post (HcPostKernel) for its rows.
#include <algorithm>

#include "backend/cuda/device/act_quant.cuh"
#include "backend/cuda/device/hc.cuh"
#include "backend/cuda/device/matvec.cuh"
#include "backend/cuda/device/matvec_tile.cuh"
#include "backend/cuda/device/router.cuh"
#include "backend/cuda/fused/launch.h"
#include "backend/cuda/fused/sync.cuh"
#include "backend/cuda/products/expert_gather.h"
#include "backend/cuda/products/launch.h"

namespace flashkv::cuda {
namespace {

// ---- routing ---------------------------------------------------------------------------
struct RouteArgs {
  const float* x;  // [n_embd] the normalised input
  const uint8_t* router;
  uint64_t router_row_bytes;
  float* logits;  // [n_expert]
  RouteParams p;
  const int32_t* token;  // [1]
  int32_t* selected;     // [n_used]
  float* weights;        // [n_used]
  uint8_t* xq_experts;   // x as the experts' gate/up take it (Q8_K)
  uint8_t* xq_shared;    // x as the shared gate/up take it (Q8_0)
  unsigned* counter;
  const uint64_t* iq2_grid;
  int n_embd;
};

template <DType TR>
__global__ void __launch_bounds__(kSplitWarps * 32) MoeRouteKernel(RouteArgs a) {
  PdlTrigger();  // launched without the overlap flag: MoeGateUpKernel's blocks may start
  extern __shared__ float sm[];  // [n_expert] logits, then RouteToken's [2 · n_expert]
  __shared__ float part[kSplitWarps][1];
  const int warp = threadIdx.x >> 5;
  const float* xf[1] = {a.x};
  const float logit = SplitRowDotsF32<TR, 1>(a.router + uint64_t(blockIdx.x) * a.router_row_bytes,
                                             xf, 1, a.n_embd, a.iq2_grid, part);
  if (threadIdx.x == 0) a.logits[blockIdx.x] = logit;

  // This block's share of the quantization: blocks of both rows, one per warp.
  const int n_k = a.n_embd / 256;
  const int n_0 = a.n_embd / 32;
  for (int u = blockIdx.x * kSplitWarps + warp; u < n_k + n_0; u += gridDim.x * kSplitWarps) {
    if (u < n_k) {
      QuantizeQ8_KBlockWarp(a.x + 256 * u, a.xq_experts, a.n_embd, u);
    } else {
      QuantizeQ8_0BlockWarp(a.x + 32 * (u - n_k), a.xq_shared, a.n_embd, u - n_k);
    }
  }
  if (!ArriveLast(a.counter, gridDim.x)) return;

  float* logits = sm;
  for (int e = threadIdx.x; e < a.p.n_expert; e += blockDim.x) logits[e] = __ldcg(a.logits + e);
  __syncthreads();
  RouteToken(a.p, logits, a.token, a.selected, a.weights, sm + a.p.n_expert);
}

// ---- gate / up -------------------------------------------------------------------------
struct GateUpArgs2 {
  const uint8_t* gate;  // [n_expert, n_ff, row_bytes]
  const uint8_t* up;
  const uint8_t* const* gate_experts;  // tables instead of gate / up (Weight::experts)
  const uint8_t* const* up_experts;
  uint64_t row_bytes;
  uint64_t expert_bytes;
  const uint8_t* sh_gate;  // [n_ff_shared, sh_row_bytes]
  const uint8_t* sh_up;
  uint64_t sh_row_bytes;
  const uint8_t* xq_experts;
  const uint8_t* xq_shared;
  const int32_t* selected;  // [n_used]
  const float* weights;     // [n_used]
  float* mid;               // [n_used, n_ff]
  float* sh_gate_out;       // [n_ff_shared]
  float* sh_up_out;
  float* sh_mid;
  uint8_t* midq;     // [n_used, mid_row_bytes] (Q8_K)
  uint8_t* sh_midq;  // the shared mid's Q8_0 row
  uint64_t mid_row_bytes;
  unsigned* counters;  // [n_used + 1]
  const uint64_t* iq2_grid;
  int n_embd;
  int n_ff;
  int n_ff_shared;
  int n_expert;
  int n_used;
  int tiles;  // tiles of tile_rows rows per expert slot
  int tile_rows;
  int sh_tiles;
  int sh_tile_rows;
  float clamp;
};

// Blocks [0, n_used · tiles) take the experts' tiles (slot-major), the next sh_tiles the shared
// expert's; each a tile of gate and up rows (device/matvec_tile.cuh).
// (Two tile types in one kernel: with kTileMinBlocks' registers it would spill.)
template <DType TE, DType TS>
__global__ void __launch_bounds__(kTileThreads, kTileMinBlocks - 2) MoeGateUpKernel(GateUpArgs2 a) {
  extern __shared__ __align__(16) uint8_t smem[];  // the tile; then the last block's mid row
  __shared__ uint64_t grid_smem[kIq2TableEntries];
  const int warp = threadIdx.x >> 5;
  const int expert_blocks = a.n_used * a.tiles;
  const bool shared = int(blockIdx.x) >= expert_blocks;
  const int slot = shared ? a.n_used : int(blockIdx.x) / a.tiles;
  const int tile = shared ? int(blockIdx.x) - expert_blocks : int(blockIdx.x) % a.tiles;
  const int rows = shared ? a.n_ff_shared : a.n_ff;
  const int tile_rows = shared ? a.sh_tile_rows : a.tile_rows;
  const int row0 = tile * tile_rows;
  const int nr = min(tile_rows, rows - row0);
  float gu[2];
  if (!shared) {
    // The routing is the predecessor's (MoeRouteKernel): wait before the expert's address.
    // The shared expert's weights start copying before TileRowDots' wait (device/pdl.cuh).
    PdlWait();
    int e = a.selected[slot];
    if (e < 0 || e >= a.n_expert) e = 0;  // TileBuildKernel's rule
    const uint64_t off = uint64_t(row0) * a.row_bytes;
    const uint8_t* w[2] = {ExpertMatrix(a.gate, a.gate_experts, e, a.expert_bytes) + off,
                           ExpertMatrix(a.up, a.up_experts, e, a.expert_bytes) + off};
    TileRowDots<TE, 2>(w, nr, int(a.row_bytes), a.n_embd, TileX{a.xq_experts}, smem, grid_smem,
                       a.iq2_grid, gu);
    if (int(threadIdx.x) < nr) {
      a.mid[uint64_t(slot) * a.n_ff + row0 + threadIdx.x] =
          __fmul_rn(ClampedSwiGlu(gu[0], gu[1], a.clamp), a.weights[slot]);
    }
  } else {
    const uint64_t off = uint64_t(row0) * a.sh_row_bytes;
    const uint8_t* w[2] = {a.sh_gate + off, a.sh_up + off};
    TileRowDots<TS, 2>(w, nr, int(a.sh_row_bytes), a.n_embd, TileX{a.xq_shared}, smem, grid_smem,
                       a.iq2_grid, gu);
    if (int(threadIdx.x) < nr) {
      const int r = row0 + threadIdx.x;
      a.sh_gate_out[r] = gu[0];
      a.sh_up_out[r] = gu[1];
      a.sh_mid[r] = ClampedSwiGlu(gu[0], gu[1], a.clamp);
    }
  }
  if (!ArriveLast(a.counters + slot, shared ? a.sh_tiles : a.tiles)) return;

  float* mids = reinterpret_cast<float*>(smem);
  const float* src = shared ? a.sh_mid : a.mid + uint64_t(slot) * a.n_ff;
  for (int i = threadIdx.x; i < rows; i += blockDim.x) mids[i] = __ldcg(src + i);
  __syncthreads();
  if (shared) {
    QuantizeRowByWarps(mids, a.sh_midq, rows, false, warp, kTileThreads / 32);
  } else {
    QuantizeRowByWarps(mids, a.midq + uint64_t(slot) * a.mid_row_bytes, rows, true, warp,
                       kTileThreads / 32);
  }
}

// ---- down, slot sum, shared sum, HC_post ----------------------------------------------------
struct DownArgs {
  const uint8_t* down;                 // [n_expert, n_embd, row_bytes]
  const uint8_t* const* down_experts;  // a table instead of down (Weight::experts)
  uint64_t row_bytes;
  uint64_t expert_bytes;
  const uint8_t* sh_down;  // [n_embd, sh_row_bytes]
  uint64_t sh_row_bytes;
  const uint8_t* midq;  // [n_used, mid_row_bytes]
  uint64_t mid_row_bytes;
  const uint8_t* sh_midq;
  const int32_t* selected;  // [n_used]
  float* part;              // [n_used + 1, n_embd]
  float* routed;            // [n_embd]
  float* f;                 // [n_embd]
  const float* x_hc;        // [n_hc, n_embd]
  const float* post;        // [n_hc]
  const float* comb;        // [n_hc·n_hc]
  float* out;               // [n_hc, n_embd]
  unsigned* counters;       // [row groups]
  const uint64_t* iq2_grid;
  int n_embd;
  int n_ff;
  int n_ff_shared;
  int n_expert;
  int n_used;
  int n_hc;
  int tile_rows;  // rows per row group, every slot
};

// grid (row groups of tile_rows rows, slots + 1): a tile of each slot's down rows
// (device/matvec_tile.cuh); the last block of a row group finishes its rows.
template <DType TD, DType TSD>
__global__ void __launch_bounds__(kTileThreads, kTileMinBlocks) MoeDownKernel(DownArgs a) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int slot = blockIdx.y;
  const bool shared = slot == a.n_used;
  const int row0 = blockIdx.x * a.tile_rows;
  const int nr = min(a.tile_rows, a.n_embd - row0);
  float y[1];
  if (!shared) {
    // The routing is two launches back (MoeRouteKernel, then MoeGateUpKernel, which triggers
    // only after its own wait): complete before this grid starts, so the experts' weights
    // start copying before TileRowDots' wait (device/pdl.cuh).
    int e = a.selected[slot];
    if (e < 0 || e >= a.n_expert) e = 0;
    const uint8_t* w[1] = {ExpertMatrix(a.down, a.down_experts, e, a.expert_bytes) +
                           uint64_t(row0) * a.row_bytes};
    TileRowDots<TD, 1>(w, nr, int(a.row_bytes), a.n_ff,
                       TileX{a.midq + uint64_t(slot) * a.mid_row_bytes}, smem, nullptr, a.iq2_grid,
                       y);
  } else {
    const uint8_t* w[1] = {a.sh_down + uint64_t(row0) * a.sh_row_bytes};
    TileRowDots<TSD, 1>(w, nr, int(a.sh_row_bytes), a.n_ff_shared, TileX{a.sh_midq}, smem, nullptr,
                        a.iq2_grid, y);
  }
  if (int(threadIdx.x) < nr) a.part[uint64_t(slot) * a.n_embd + row0 + threadIdx.x] = y[0];
  if (!ArriveLast(a.counters + blockIdx.x, gridDim.y)) return;

  // Thread (row, stream): the routed sum in slot order, + the shared expert, HC_post.
  const int rr = threadIdx.x / a.n_hc;
  const int k = threadIdx.x % a.n_hc;
  const int d = row0 + rr;
  if (rr >= nr) return;
  float routed = 0.0f;
  for (int s = 0; s < a.n_used; ++s) {
    routed = __fadd_rn(routed, __ldcg(a.part + uint64_t(s) * a.n_embd + d));
  }
  const float f = __fadd_rn(routed, __ldcg(a.part + uint64_t(a.n_used) * a.n_embd + d));
  if (k == 0) {
    a.routed[d] = routed;
    a.f[d] = f;
  }
  a.out[uint64_t(k) * a.n_embd + d] =
      HcPostValue(a.x_hc, f, a.post, a.comb, a.n_hc, a.n_embd, k, d);
}

bool FloatType(DType t) {
  return t == DType::kF16 || t == DType::kBF16 || t == DType::kF32;
}

}  // namespace

bool LaunchFusedMoeBlock(CudaBackend::State& s, const MoeBlockArgs& a) {
  if (a.n_tokens != 1 || a.aq != ActQuantMode::kQ8) return false;
  const Weight& router = *a.router;
  const Weight& gate = *a.gate;
  const Weight& up = *a.up;
  const Weight& down = *a.down;
  const Weight& sg = *a.shared_gate;
  const Weight& su = *a.shared_up;
  const Weight& sd = *a.shared_down;
  const int D = a.hc.n_embd;
  const int E = int(router.ne[1]);
  const int F = int(gate.ne[1]);
  const int Fs = int(sg.ne[1]);
  const int k = a.n_used;
  // The Flash / ds4 type mix: F16 (BF16, F32) router, IQ2_XXS gate/up, Q2_K down, Q8_0 shared.
  if (!FloatType(router.type) || E >= kSplitBelowRows || router.ne[0] != uint64_t(D)) return false;
  if (gate.type != DType::kIQ2_XXS || up.type != gate.type || up.row_bytes != gate.row_bytes ||
      down.type != DType::kQ2_K || sg.type != DType::kQ8_0 || su.type != DType::kQ8_0 ||
      sd.type != DType::kQ8_0) {
    return false;
  }
  if (gate.ne[0] != uint64_t(D) || gate.ne[2] != uint64_t(E) || up.ne != gate.ne ||
      down.ne[0] != uint64_t(F) || down.ne[1] != uint64_t(D) || down.ne[2] != uint64_t(E) ||
      sg.ne[0] != uint64_t(D) || su.ne != sg.ne || sd.ne[0] != uint64_t(Fs) ||
      sd.ne[1] != uint64_t(D)) {
    return false;
  }
  // Tiles (device/matvec_tile.cuh): gate/up rows of the experts and of the shared expert; the down
  // products share one row partition (the slot sum runs per row group), as large as the
  // shared expert's longer rows allow.
  const int ge_rows = TileRowsFor(gate.row_bytes, 2, s.tile_bytes);
  const int gs_rows = TileRowsFor(sg.row_bytes, 2, s.tile_bytes);
  const int dn_rows =
      std::min({TileRowsFor(down.row_bytes, 1, s.tile_bytes),
                sd.row_bytes <= kTileMaxBytes ? int(kTileMaxBytes / sd.row_bytes) : 0,
                kTileThreads / std::max(a.hc.n_hc, 1)});
  if (ge_rows == 0 || gs_rows == 0 || dn_rows <= 0 || dn_rows * a.hc.n_hc > kTileThreads) {
    return false;
  }
  if (D % 256 != 0 || F % 256 != 0 || Fs % 32 != 0 || k < 1 || k > kMaxExpertsUsed ||
      a.hc.n_hc < 1 || a.hc.n_hc > kMaxHc || kSyncDown + int(CeilDiv(D, dn_rows)) > kSyncCounters ||
      size_t(std::max(F, Fs)) * sizeof(float) > 48 * 1024 ||
      size_t(3 * E) * sizeof(float) > 48 * 1024) {
    return false;
  }
  if (a.router_bias != nullptr && a.router_bias->type != DType::kF32) return false;

  const uint64_t xk_bytes = Q8ActRowBytes(ActQuant::kQ8_K, D);
  const uint64_t x0_bytes = Q8ActRowBytes(ActQuant::kQ8_0, D);
  const uint64_t mid_row = Q8ActRowBytes(ActQuant::kQ8_K, F);
  const uint64_t sh_mid_row = Q8ActRowBytes(ActQuant::kQ8_0, Fs);
  auto* xq = static_cast<uint8_t*>(s.Scratch(CudaScratch::kFusedMoeXq, xk_bytes + x0_bytes));
  auto* mid_mem = static_cast<uint8_t*>(s.Scratch(
      CudaScratch::kFusedMoeMid, sizeof(float) * size_t(k) * F + mid_row * k + sh_mid_row));
  auto* part =
      static_cast<float*>(s.Scratch(CudaScratch::kFusedMoeDown, sizeof(float) * size_t(k + 1) * D));
  if (xq == nullptr || mid_mem == nullptr || part == nullptr) return false;
  float* mid = reinterpret_cast<float*>(mid_mem);
  uint8_t* midq = mid_mem + sizeof(float) * size_t(k) * F;  // 16-byte aligned: F % 256 == 0
  uint8_t* sh_midq = midq + mid_row * k;

  RouterArgs ra;
  ra.bias = a.router_bias;
  ra.tid2eid = a.tid2eid;
  ra.n_expert = E;
  ra.n_used = k;
  ra.weight_scale = a.weight_scale;
  RouteArgs rk{};
  rk.x = a.x.get();
  rk.router = router.data.get();
  rk.router_row_bytes = router.row_bytes;
  rk.logits = a.logits.get();
  rk.p = RouteParamsOf(ra);
  rk.token = a.tokens.get();
  rk.selected = a.selected.get();
  rk.weights = a.weights.get();
  rk.xq_experts = xq;
  rk.xq_shared = xq + xk_bytes;
  rk.counter = s.sync_counters + kSyncRoute;
  rk.iq2_grid = s.iq2_grid;
  rk.n_embd = D;
  const dim3 split_block(kSplitWarps * 32);
  const unsigned route_smem = unsigned(3 * sizeof(float) * E);
  switch (router.type) {
    case DType::kF16:
      s.Launch(MoeRouteKernel<DType::kF16>, dim3(E), split_block, route_smem, rk,
               router.matrix_bytes());
      break;
    case DType::kBF16:
      s.Launch(MoeRouteKernel<DType::kBF16>, dim3(E), split_block, route_smem, rk,
               router.matrix_bytes());
      break;
    default:
      s.Launch(MoeRouteKernel<DType::kF32>, dim3(E), split_block, route_smem, rk,
               router.matrix_bytes());
      break;
  }

  // Experts in host memory: the chosen uncached ones copied to the device first
  // (products/expert_gather.cu), read through the rewritten tables.
  const uint8_t* const* tables[3] = {gate.experts.get(), up.experts.get(), down.experts.get()};
  if (a.gather != nullptr && LaunchExpertGather(s, *a.gather, a.selected.get(), k)) {
    for (int m = 0; m < 3; ++m) tables[m] = a.gather->out_tables.get() + size_t(m) * E;
  }

  GateUpArgs2 g{};
  g.gate = gate.data.get();
  g.up = up.data.get();
  g.gate_experts = tables[0];
  g.up_experts = tables[1];
  g.row_bytes = gate.row_bytes;
  g.expert_bytes = gate.matrix_bytes();
  g.sh_gate = sg.data.get();
  g.sh_up = su.data.get();
  g.sh_row_bytes = sg.row_bytes;
  g.xq_experts = xq;
  g.xq_shared = xq + xk_bytes;
  g.selected = a.selected.get();
  g.weights = a.weights.get();
  g.mid = mid;
  g.sh_gate_out = a.shared_gate_out.get();
  g.sh_up_out = a.shared_up_out.get();
  g.sh_mid = a.shared_mid.get();
  g.midq = midq;
  g.sh_midq = sh_midq;
  g.mid_row_bytes = mid_row;
  g.counters = s.sync_counters + kSyncGateUp;
  g.iq2_grid = s.iq2_grid;
  g.n_embd = D;
  g.n_ff = F;
  g.n_ff_shared = Fs;
  g.n_expert = E;
  g.n_used = k;
  g.tile_rows = ge_rows;
  g.tiles = int(CeilDiv(F, ge_rows));
  g.sh_tile_rows = gs_rows;
  g.sh_tiles = int(CeilDiv(Fs, gs_rows));
  g.clamp = a.clamp;
  const uint64_t gu_bytes = 2 * (uint64_t(k) * gate.matrix_bytes() + sg.matrix_bytes());
  const unsigned gu_smem = std::max({TileSmemBytes(gate.row_bytes, 2, ge_rows, D / 256),
                                     TileSmemBytes(sg.row_bytes, 2, gs_rows, D / 32),
                                     unsigned(sizeof(float) * std::max(F, Fs))});
  PreferSharedForTiles(MoeGateUpKernel<DType::kIQ2_XXS, DType::kQ8_0>);
  s.LaunchOverlapped(MoeGateUpKernel<DType::kIQ2_XXS, DType::kQ8_0>, dim3(k * g.tiles + g.sh_tiles),
                     dim3(kTileThreads), gu_smem, g, gu_bytes);

  DownArgs dn{};
  dn.down = down.data.get();
  dn.down_experts = tables[2];
  dn.row_bytes = down.row_bytes;
  dn.expert_bytes = down.matrix_bytes();
  dn.sh_down = sd.data.get();
  dn.sh_row_bytes = sd.row_bytes;
  dn.midq = midq;
  dn.mid_row_bytes = mid_row;
  dn.sh_midq = sh_midq;
  dn.selected = a.selected.get();
  dn.part = part;
  dn.routed = a.routed.get();
  dn.f = a.f.get();
  dn.x_hc = a.x_hc.get();
  dn.post = a.post.get();
  dn.comb = a.comb.get();
  dn.out = a.out.get();
  dn.counters = s.sync_counters + kSyncDown;
  dn.iq2_grid = s.iq2_grid;
  dn.n_embd = D;
  dn.n_ff = F;
  dn.n_ff_shared = Fs;
  dn.n_expert = E;
  dn.n_used = k;
  dn.n_hc = a.hc.n_hc;
  dn.tile_rows = dn_rows;
  const uint64_t dn_bytes = uint64_t(k) * down.matrix_bytes() + sd.matrix_bytes();
  const unsigned dn_smem = std::max(TileSmemBytes(down.row_bytes, 1, dn_rows, F / 256),
                                    TileSmemBytes(sd.row_bytes, 1, dn_rows, Fs / 32));
  PreferSharedForTiles(MoeDownKernel<DType::kQ2_K, DType::kQ8_0>);
  s.LaunchOverlapped(MoeDownKernel<DType::kQ2_K, DType::kQ8_0>, dim3(CeilDiv(D, dn_rows), k + 1),
                     dim3(kTileThreads), dn_smem, dn, dn_bytes);
  return true;
}

}  // namespace flashkv::cuda
