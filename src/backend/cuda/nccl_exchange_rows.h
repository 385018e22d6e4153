// Host entry of NcclRowExchange's kernels (nccl_exchange_rows.cu). Internal to backend/cuda/.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace flashkv::cuda {

// scatter false: dst row i = src row rows[i]; true: dst row rows[i] = src row i; for i <
// n_rows, rows of row_floats floats. Launched straight on `stream` (not through a
// LaunchQueue: the caller has flushed it, and NCCL calls sit between these launches).
cudaError_t LaunchMoveRows(const float* src, float* dst, const int32_t* rows, size_t n_rows,
                           size_t row_floats, bool scatter, cudaStream_t stream);

}  // namespace flashkv::cuda
