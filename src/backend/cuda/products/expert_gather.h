// The launch behind CudaBackend::GatherExperts (products/expert_gather.cu), also called by the
// fused one-token MoeBlock between its routing and expert kernels (fused/moe_block.cu). Internal to
// backend/cuda/.
#pragma once

#include "backend/backend.h"
#include "backend/cuda/cuda_state.h"

namespace flashkv::cuda {

// Queues the plan and copy kernels of `g` for the n ids at `selected` (device memory);
// false, with nothing queued, when g has no room or tables.
bool LaunchExpertGather(CudaBackend::State& s, const ExpertGather& g, const int32_t* selected,
                        int n);

}  // namespace flashkv::cuda
