// Host entry points of the fused kernels behind the coarse ops (fused/sublayer_input.cu,
// fused/norm_rope.cu, fused/moe_block.cu), called by fused/coarse_ops.cpp when the fused switch is
// on. Each checks that the op's shapes and types fit its kernels and launches nothing when they do
// not, so the caller can run the Backend default instead; what it launches gives every output the
// bits of the fine ops' kernels (docs/CUDA.md "How to add a fusion"). Internal to backend/cuda/.
#pragma once

#include "backend/backend.h"
#include "backend/cuda/cuda_state.h"

namespace flashkv::cuda {

// Ranges of State::sync_counters (fused/sync.cuh), one per fused step.
inline constexpr int kSyncInput = 0;    // SublayerInput: 1
inline constexpr int kSyncRoute = 1;    // MoeBlock routing: 1
inline constexpr int kSyncGateUp = 32;  // MoeBlock gate/up: one per slot (<= 33)
inline constexpr int kSyncDown = 128;   // MoeBlock down: one per group of output rows
inline constexpr int kSyncCounters = 8192;

// A one-token SublayerInput: HC_pre, RMSNorm and the quantization of the normalised input
// in one kernel, the Q8_0 projections (q8) in one more. Returns a bit mask of the
// projections launched (the caller runs the others as MatMul on a.xn), or -1 when nothing
// was launched.
int LaunchFusedSublayerInput(CudaBackend::State& s, const SublayerInputArgs& a);
// NormRope of any number of rows, one kernel.
bool LaunchFusedNormRope(CudaBackend::State& s, const NormRopeArgs& a);
// Whether entry `a` of a FinishRowsBatch runs in `first`'s launch: at most one row of one head
// at pos0, the fused NormRope's shapes, and every launch-wide field equal to first's.
bool FinishRowsJoin(const NormRopeArgs& first, const NormRopeArgs& a, bool hadamard);
// The joining entries of a FinishRowsBatch (rows[0] first), a block each, in launches of a
// fixed shape for a given count.
void LaunchFinishRows(CudaBackend::State& s, const NormRopeArgs* const* rows, int n, bool hadamard);
// A one-token MoeBlock in three kernels: router + routing + input quantization; expert and
// shared gate/up + SwiGLU + mid quantization; every down product + slot sum + shared sum +
// HC_post.
bool LaunchFusedMoeBlock(CudaBackend::State& s, const MoeBlockArgs& a);

}  // namespace flashkv::cuda
