// Which instructions the code being compiled may use beyond the common path (docs/CUDA.md
// "Which GPUs get which kernels"). FLASHKV_HOPPER_FEATURES is 1 in device code compiled for
// sm_90a — Hopper's arch-specific instructions (wgmma, TMA tensor copies, setmaxnreg), which
// exist only there and are not forward-compatible — and 0 everywhere else (other
// architectures, the compute_90 PTX newer GPUs compile, the host pass). A kernel that uses them
// keeps today's path in the #else branch; the host learns which one the device runs from
// HopperFeatures (kernel_image.cu), never from the build flags alone.
#pragma once

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FLASHKV_HOPPER_FEATURES 1
#else
#define FLASHKV_HOPPER_FEATURES 0
#endif
