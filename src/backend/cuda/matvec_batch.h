// Host-side entry points of the batched decode-row products (matvec_batch.cu): a step of
// 2–31 decode rows from different sessions (issue #18). Each keeps the one-token kernels'
// terms and fold per row, so the bits do not depend on the batch. Internal to backend/cuda/.
#pragma once

#include "backend/cuda/matvec_launch.h"

namespace flashkv::cuda {

// Plain Q8_0 × Q8_0 products of 2 … kMatVecBatchMaxTokens rows (from 32 the tensor-core
// kernel takes the shapes it fits first): false for other types, tile mode and shapes it does
// not take (odd blocks a row, unaligned rows), which keep the warp kernels.
inline constexpr int kMatVecBatchMaxTokens = 64;
bool LaunchMatVecBatch(CudaBackend::State& s, DType type, const MatVecArgs& a);

// Routed experts of batches of 2 … MoeGroupMaxTokens() tokens in expert tiles of up to 8
// pairs: each block stages its expert's rows once for the tile's pairs (gate/up with the
// SwiGLU and route weight; down). False for types without tile kernels.
inline constexpr int kMoeGroupMaxTokens = 31;
// kMoeGroupMaxTokens, FLASHKV_CUDA_MOE_GROUP_MAX overriding it (read once); 0 when
// FLASHKV_CUDA_BATCH=0 turns the batched kernels off.
int MoeGroupMaxTokens();
bool LaunchMoeGroupGateUp(CudaBackend::State& s, DType type, const GateUpArgs& g);
bool LaunchMoeGroupDown(CudaBackend::State& s, DType type, const MatVecArgs& a);

}  // namespace flashkv::cuda
