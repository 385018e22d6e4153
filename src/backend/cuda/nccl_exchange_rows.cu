// The row gather / scatter kernels of NcclRowExchange: a plain copy of 32-bit words, so the
// moved rows keep their bits.
#include "backend/cuda/nccl_exchange_rows.h"

namespace flashkv::cuda {
namespace {

// dst row i ← src row rows[i] (gather), or dst row rows[i] ← src row i (scatter).
__global__ void MoveRowsKernel(const float* src, float* dst, const int32_t* rows, size_t row_floats,
                               bool scatter) {
  const size_t i = blockIdx.x;
  const size_t from = scatter ? i : size_t(rows[i]);
  const size_t to = scatter ? size_t(rows[i]) : i;
  for (size_t j = threadIdx.x; j < row_floats; j += blockDim.x) {
    dst[to * row_floats + j] = src[from * row_floats + j];
  }
}

}  // namespace

cudaError_t LaunchMoveRows(const float* src, float* dst, const int32_t* rows, size_t n_rows,
                           size_t row_floats, bool scatter, cudaStream_t stream) {
  if (n_rows == 0) return cudaSuccess;
  MoveRowsKernel<<<unsigned(n_rows), 256, 0, stream>>>(src, dst, rows, row_floats, scatter);
  return cudaGetLastError();
}

}  // namespace flashkv::cuda
