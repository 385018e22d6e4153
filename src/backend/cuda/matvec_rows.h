// Host-side entry point of the dense Q8_0 kernel for a step of a few decode rows from
// different sessions (issue #18: 2–31 rows, matvec_rows.cu). Internal to backend/cuda/.
#pragma once

#include "backend/cuda/matvec_launch.h"

namespace flashkv::cuda {

// Plain batches of 2 … DenseRowsMaxTokens() tokens × Q8_0 weights: each block stages a tile of
// weight rows once for every token and forms each token's block terms and block-order fold
// from it, the one-token tile kernel's (MatVecTileKernel), so every row keeps the bits of its
// token alone.
inline constexpr int kDenseRowsMaxTokens = 31;
// kDenseRowsMaxTokens, FLASHKV_CUDA_DENSE_ROWS_MAX overriding it (read once; 0 turns the
// kernel off: the 8-token warp kernel takes these batches, as before).
int DenseRowsMaxTokens();
// False when the kernel does not take the launch (tile mode, one token, more tokens than the
// bound, rows too long for a tile): the caller's other kernels do.
bool LaunchMatVecRowsQ8_0(CudaBackend::State& s, const MatVecArgs& a);

}  // namespace flashkv::cuda
