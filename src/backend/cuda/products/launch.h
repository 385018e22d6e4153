// Host-side entry points of the weight-product kernels (products/matmul.cu), shared by the ops
// that project activations: MatMul, MatMulGrouped, MoeExperts, HcPre/HcHead.
// Internal to backend/cuda/.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_state.h"
#include "tensor/dot.h"

namespace flashkv::cuda {

// One launch of weight rows against activation rows. Plain mode (tiles == nullptr): token
// t reads x + t·x_row_bytes (+ the group slice) and writes y + t·y_row_floats. Tile mode
// (expert products): tile j = tiles[3j .. 3j+2] = (expert, start, count) names `count`
// entries pairs[start …]; entry p reads x row p / pair_div and writes y row p.
struct MatVecArgs {
  const uint8_t* w = nullptr;  // [experts, rows, row_bytes]
  // Tile mode over an expert stack held as a table (Weight::experts): expert e's matrix is
  // w_experts[e] and `w` is unused (ExpertMatrix, device/common.cuh).
  const uint8_t* const* w_experts = nullptr;
  uint64_t row_bytes = 0;
  uint64_t expert_bytes = 0;
  int rows = 0;  // output rows
  int n = 0;     // values per weight row
  const uint8_t* x = nullptr;
  uint64_t x_row_bytes = 0;
  int n_tokens = 0;            // plain mode
  int rows_per_group = 0;      // grouped: row r reads slice r / rows_per_group (0: none)
  uint64_t x_group_bytes = 0;  // bytes between slices of one token
  float* y = nullptr;
  uint64_t y_row_floats = 0;
  const int32_t* tiles = nullptr;
  const int32_t* pairs = nullptr;
  int pair_div = 1;
  int n_tiles = 0;  // tile mode: grid size (tiles past the real ones have count 0)
  int tile_nt = 8;  // tile mode: most entries per tile (1 or 8)
  const uint64_t* iq2_grid = nullptr;
  uint64_t weight_bytes = 0;  // weight bytes the launch reads (profile figures only)
};

// Expert gate/up: mid[p, r] = silu(min(g, λ)) · clamp(u, ±λ) · route_w[p] with g, u the
// gate and up rows r of the tile's expert against x row p / pair_div.
struct GateUpArgs {
  MatVecArgs mv;  // w = gate; y = mid [pairs, rows]
  const uint8_t* w_up = nullptr;
  const uint8_t* const* up_experts = nullptr;  // as mv.w_experts, for the up stack
  const float* route_w = nullptr;              // [pairs]
  float clamp = 0.0f;
};

// Which activation blocks a weight type takes in q8 mode (none for F32/F16/BF16).
ActQuant Q8ActFor(DType wtype);
// Bytes of one quantized activation row of n values.
uint64_t Q8ActRowBytes(ActQuant q, int n);

// Quantizes rows [n_rows, n] (row stride n floats) into `out` (n_rows × Q8ActRowBytes).
void LaunchQuantizeRows(CudaBackend::State& s, ActQuant q, const float* x, int n_rows, int n,
                        uint8_t* out);
// y = W x with fp32 (q8 = false) or quantized (q8 = true) activations. Returns false for
// a type/shape the kernels do not cover (the caller records the error).
bool LaunchMatVec(CudaBackend::State& s, DType type, bool q8, const MatVecArgs& a);
bool LaunchGateUp(CudaBackend::State& s, DType type, bool q8, const GateUpArgs& a);

// fp32-activation products split each row over 8 warps below this many rows
// (MatVecSplitKernel), else over one warp: a property of the weight's shape, never of the
// batch, so the float order stays fixed.
inline constexpr int kSplitBelowRows = 1024;

// Plain batches of F16 / BF16 / F32 weights × fp32 activations of at least this many tokens
// take the tiled kernel (products/matvec_tiled.cu), with the bits of the kernels above; false for
// tile mode, grouped projections, short batches and other types.
inline constexpr int kMatVecTiledMinTokens = 32;
bool LaunchMatVecTiled(CudaBackend::State& s, DType type, const MatVecArgs& a);
// The fast float path (State::fast_terms > 0): plain batches of kFastMinTokens tokens or more
// of F16 / BF16 weights on the TF32 tensor cores (products/matmul_fast.cu), within the fast
// path's tolerance, not the bits above; false where the path is off or the shape (rows of
// a multiple of 32 values, 16-byte aligned rows) does not fit.
bool LaunchMatMulFast(CudaBackend::State& s, DType type, const MatVecArgs& a);

// The int8 tensor-core kernel for Q8_0 weights × Q8_0 activations in plain mode
// (products/matmul_imma.cu): same bits as the kernels above. `variant` picks the tile shape
// (1..kImmaVariants; 4 is 1's shape with the experts in the tiles of 32 pairs of before, for
// benchmarks); false when the variant or the shape (rows of a multiple of 256 values,
// 16-byte aligned rows, grouped slices of whole tiles) does not fit.
inline constexpr int kImmaVariants = 4;
bool LaunchMatMulImmaQ8_0(CudaBackend::State& s, int variant, const MatVecArgs& a);
// Pairs per expert tile of the tensor-core expert kernels under tensor-core variant
// `variant` (> 0) for n_pairs (token, expert) pairs over n_expert experts: 8 (the narrow
// tile) while the experts average fewer than `narrow_below` pairs (decode batches: a
// 64-row step routes 1.5 a expert, and a tile of 32 decodes its weights for one or two),
// 64 (each decoded weight serves twice the pairs, twice the activations staged per MMA) once
// they average `wide_from` pairs or more, else 32; always 32 under variant 4 (benchmarks).
// Below 32 pairs most experts fill one 32-pair tile and a 64-pair one only adds empty slots.
// The Q2_K down decode is cheap and its activations dominate, so down widens only from 128
// (the figures: docs/PERFORMANCE.md "Prefill: where issue #13 ends").
inline constexpr int kImmaNarrowPairs = 8;
inline constexpr int kImmaGateUpWideFrom = 32;
inline constexpr int kImmaDownWideFrom = 128;
inline int ImmaMoePairs(int variant, int n_pairs, int n_expert, int wide_from, int narrow_below) {
  if (variant == 4) return 32;
  if (int64_t(n_pairs) < int64_t(narrow_below) * n_expert) return kImmaNarrowPairs;
  return n_pairs >= wide_from * n_expert ? 64 : 32;
}
// The tile sizes the tensor-core expert kernels take.
inline bool ImmaMoeTile(int tile_nt) {
  return tile_nt == kImmaNarrowPairs || tile_nt == 32 || tile_nt == 64;
}
// Whether expert tiles of tile_nt pairs go to the tensor cores: 32 and 64, and the narrow
// tiles while they are switched on (State::moe_narrow > 0; tiles of 8 are also the warp
// kernels' size).
inline bool ImmaTilesOn(const CudaBackend::State& s, int tile_nt) {
  return ImmaMoeTile(tile_nt) && (tile_nt != kImmaNarrowPairs || s.moe_narrow > 0);
}
// Expert gate/up (IQ2_XXS, tiles of 8, 32 or 64 pairs) on the tensor cores (products/moe_imma.cu),
// with GateUpTPKernel's bits; false for shapes it does not take.
bool LaunchGateUpImmaIq2(CudaBackend::State& s, const GateUpArgs& g);
// Expert down (Q2_K, tiles of 8, 32 or 64 pairs) on the tensor cores, MatVecTPKernel's bits.
bool LaunchDownImmaQ2K(CudaBackend::State& s, const MatVecArgs& a);

}  // namespace flashkv::cuda
