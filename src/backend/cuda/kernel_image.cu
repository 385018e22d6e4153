// Which code the device will run: cudaFuncGetAttributes on a kernel of this library fails
// when the build holds neither machine code for the device's architecture nor PTX it can
// compile (a default sm_90 build on an A100 or an RTX 4090), which would otherwise surface as
// "no kernel image" at the first launch deep inside a model load.
#include "backend/cuda/cuda_launchers.h"

namespace flashkv::cuda {
namespace {

__global__ void ImageProbeKernel() {}

}  // namespace

cudaError_t KernelImage(int* binary_version, int* ptx_version) {
  cudaFuncAttributes attr{};
  const cudaError_t e = cudaFuncGetAttributes(&attr, ImageProbeKernel);
  if (e == cudaSuccess) {
    *binary_version = attr.binaryVersion;
    *ptx_version = attr.ptxVersion;
  }
  return e;
}

}  // namespace flashkv::cuda
