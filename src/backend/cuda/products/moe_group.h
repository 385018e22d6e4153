// Host-side entry points of the grouped expert kernels (products/moe_group.cu) for a step of a few
// decode rows from different sessions (issue #18): each keeps the one-token tile kernels'
// terms and fold per pair, so the bits do not depend on the batch. Internal to backend/cuda/.
#pragma once

#include "backend/cuda/products/launch.h"

namespace flashkv::cuda {

// Routed experts of batches of 2 … State::moe_group_max tokens in expert tiles of up to 8
// pairs: each block stages its expert's rows once for the tile's pairs (gate/up with the
// SwiGLU and route weight; down). False for types without tile kernels (Q8_0, Q2_K and
// IQ2_XXS have them) or rows too long for a tile.
// (State::moe_group_max, CudaBackendOptions::moe_group_max: 0 turns the grouped kernels off,
// then the token-parallel and tensor-core kernels take every batch.)
bool LaunchMoeGroupGateUp(CudaBackend::State& s, DType type, const GateUpArgs& g);
bool LaunchMoeGroupDown(CudaBackend::State& s, DType type, const MatVecArgs& a);

}  // namespace flashkv::cuda
