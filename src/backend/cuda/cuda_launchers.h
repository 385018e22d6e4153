// Host entry points into kernels that the host-compiled parts of the CUDA backend need
// (cuda_backend.cpp cannot launch kernels itself). Internal to backend/cuda/.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_state.h"
#include "tensor/dtype.h"

namespace flashkv::cuda {

// Fills `rows` rows of `type` (ne0 values each, row_bytes apart) at dst with valid random
// blocks derived from `seed`: values of order `scale`, finite half scales.
void LaunchRandomFill(CudaBackend::State& s, uint8_t* dst, DType type, uint64_t ne0, uint64_t rows,
                      uint64_t row_bytes, uint64_t seed, float scale);

// The architecture of the machine code the device runs (binaryVersion: 90 for sm_90) and the
// PTX version it came from; an error when this build has no code the device can run.
cudaError_t KernelImage(int* binary_version, int* ptx_version);
// Whether the device runs this build's sm_90a code (device/arch.cuh's FLASHKV_HOPPER_FEATURES
// in the code it runs). Launches one tiny kernel and waits for it: for start-up only.
cudaError_t HopperFeatures(bool* on);

}  // namespace flashkv::cuda
