// CudaBackend's coarse ops: the fused kernels (fused/launch.h) when the switch is on and the
// shapes fit, else the Backend defaults over the fine ops.
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

void CudaBackend::NormRope(const NormRopeArgs& a) {
  if (!s_->fused || !cuda::LaunchFusedNormRope(*s_, a)) Backend::NormRope(a);
}

void CudaBackend::MoeBlock(const MoeBlockArgs& a) {
  if (!s_->fused || !cuda::LaunchFusedMoeBlock(*s_, a)) Backend::MoeBlock(a);
}

}  // namespace flashkv
