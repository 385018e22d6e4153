// Expert routing of one token (docs/DS4_MODEL.md §5 steps 1-3), shared by RouterSelect
// (ops/moe.cu) and the fused MoeBlock (fused/moe_block.cu) so both choose the same experts with the
// same weight bits: probabilities sqrt(softplus(logit)) in parallel, then the top k by
// repeated warp argmax (largest value, lowest id on ties — the order ds4's insertion sort
// produces) or the token's hash-table row, then the weights normalised in slot order.
// Must not: launch anything.
#pragma once

#include "backend/backend.h"
#include "backend/cuda/device/common.cuh"

namespace flashkv::cuda {

inline constexpr int kMaxExpertsUsed = 32;

struct RouteParams {
  const float* bias;     // [n_expert] or null
  const int32_t* table;  // [n_vocab, n_used] or null
  int n_expert;
  int n_used;
  float weight_scale;
};

inline RouteParams RouteParamsOf(const RouterArgs& a) {
  return RouteParams{
      a.bias != nullptr ? reinterpret_cast<const float*>(a.bias->data.get()) : nullptr,
      a.tid2eid != nullptr ? reinterpret_cast<const int32_t*>(a.tid2eid->data.get()) : nullptr,
      a.n_expert, a.n_used, a.weight_scale};
}

// One token's routing by the calling block (every thread calls it; warp 0 chooses).
// logits: the token's [n_expert] projections; token: its id (read for hash routing only); probs: 2
// · n_expert floats of shared memory. Ends with a __syncthreads before the choice, after which only
// warp 0 works.
__device__ inline void RouteToken(const RouteParams& a, const float* logits, const int32_t* token,
                                  int32_t* sel, float* w, float* probs) {
  float* value = probs + a.n_expert;
  const int E = a.n_expert;
  const int k = a.n_used;
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    probs[e] = sqrtf(SoftplusStable(logits[e]));
    value[e] = __fadd_rn(probs[e], a.bias != nullptr ? a.bias[e] : 0.0f);
  }
  __syncthreads();
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  int32_t chosen[kMaxExpertsUsed];
  if (a.table != nullptr) {
    for (int s = 0; s < k; ++s) {
      const int32_t e = a.table[size_t(*token) * k + s];
      chosen[s] = e >= 0 && e < E ? e : 0;  // a bad table entry must not read out of bounds
    }
  } else {
    uint32_t taken = 0;  // bit i: lane's i-th candidate (expert lane + 32 i) already chosen
    for (int s = 0; s < k; ++s) {
      float best = -INFINITY;
      int best_e = 0x7fffffff;
      for (int i = 0, e = lane; e < E; ++i, e += 32) {
        if ((taken >> i) & 1u) continue;
        if (best_e == 0x7fffffff || value[e] > best) {
          best = value[e];
          best_e = e;
        }
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float ob = __shfl_xor_sync(kFullMask, best, o);
        const int oe = __shfl_xor_sync(kFullMask, best_e, o);
        if (oe != 0x7fffffff &&
            (best_e == 0x7fffffff || ob > best || (ob == best && oe < best_e))) {
          best = ob;
          best_e = oe;
        }
      }
      if (best_e == 0x7fffffff) best_e = 0;
      chosen[s] = best_e;
      if ((best_e & 31) == lane) taken |= 1u << (best_e >> 5);
    }
  }
  if (lane != 0) return;
  float sum = 0.0f;
  for (int s = 0; s < k; ++s) {
    sel[s] = chosen[s];
    w[s] = probs[chosen[s]];
    sum = __fadd_rn(sum, w[s]);
  }
  if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
  for (int s = 0; s < k; ++s) w[s] = __fmul_rn(__fdiv_rn(w[s], sum), a.weight_scale);
}

}  // namespace flashkv::cuda
