// CudaBackend's coarse ops: the fused kernels (fused/launch.h) when the switch is on and the
// shapes fit, else the Backend defaults over the fine ops.
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_state.h"
#include "backend/cuda/fused/launch.h"

namespace flashkv {

void CudaBackend::SublayerInput(const SublayerInputArgs& a) {
  const int launched = s_->fused ? cuda::LaunchFusedSublayerInput(*s_, a) : -1;
  if (launched < 0) return Backend::SublayerInput(a);
  for (int i = 0; i < a.n_proj; ++i) {
    if (((launched >> i) & 1) == 0) MatMul(*a.proj[i].w, a.xn, a.n_tokens, a.proj[i].y, a.aq);
  }
}

void CudaBackend::FinishRowsBatch(const NormRopeArgs* rows, int n, bool hadamard_fp4) {
  // Decode rows (0 or 1 closed row a session) run in launches whose shape depends only on
  // how many sessions the step has, so a step of the same sessions replays its graph
  // whichever windows close; a prefill chunk's rows (or anything else) run as before.
  if (!s_->fused || !s_->finish_batch) return Backend::FinishRowsBatch(rows, n, hadamard_fp4);
  std::vector<const NormRopeArgs*> joined;
  const NormRopeArgs* first = nullptr;
  for (int i = 0; i < n; ++i) {
    const NormRopeArgs& a = rows[i];
    if (first == nullptr && a.n_rows <= 1 && cuda::FinishRowsJoin(a, a, hadamard_fp4)) {
      first = &a;
    }
    if (first != nullptr && cuda::FinishRowsJoin(*first, a, hadamard_fp4)) {
      joined.push_back(&a);
    } else {
      Backend::FinishRowsBatch(&a, 1, hadamard_fp4);
    }
  }
  cuda::LaunchFinishRows(*s_, joined.data(), int(joined.size()), hadamard_fp4);
}

void CudaBackend::NormRope(const NormRopeArgs& a) {
  if (!s_->fused || !cuda::LaunchFusedNormRope(*s_, a)) Backend::NormRope(a);
}

void CudaBackend::MoeBlock(const MoeBlockArgs& a) {
  if (!s_->fused || !cuda::LaunchFusedMoeBlock(*s_, a)) Backend::MoeBlock(a);
}

}  // namespace flashkv
