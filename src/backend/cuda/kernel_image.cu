// Which code the device will run: cudaFuncGetAttributes on a kernel of this library fails
// when the build holds neither machine code for the device's architecture nor PTX it can
// compile (a default sm_90 build on an A100 or an RTX 4090), which would otherwise surface as
// "no kernel image" at the first launch deep inside a model load.
#include "backend/cuda/cuda_launchers.h"
#include "backend/cuda/device/arch.cuh"

namespace flashkv::cuda {
namespace {

__global__ void ImageProbeKernel() {}

__global__ void HopperFeaturesKernel(int* out) {
  *out = FLASHKV_HOPPER_FEATURES;
}

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

// The device runs whatever code the build holds for it; only running a kernel tells whether
// that is sm_90a code (an H100 with a build of 90a-real) or not (compute_90 PTX, another
// architecture's machine code).
cudaError_t HopperFeatures(bool* on) {
  int* flag = nullptr;
  cudaError_t e = cudaMalloc(&flag, sizeof(int));
  if (e != cudaSuccess) return e;
  int host = 0;
  HopperFeaturesKernel<<<1, 1>>>(flag);
  if ((e = cudaGetLastError()) == cudaSuccess) {
    e = cudaMemcpy(&host, flag, sizeof(int), cudaMemcpyDeviceToHost);
  }
  const cudaError_t freed = cudaFree(flag);
  if (e == cudaSuccess) e = freed;
  if (e == cudaSuccess) *on = host != 0;
  return e;
}

}  // namespace flashkv::cuda
