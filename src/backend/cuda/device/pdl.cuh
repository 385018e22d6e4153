// Programmatic dependent launch, device side (docs/CUDA.md, "Launch queue and CUDA graphs").
// A kernel launched with LaunchQueue's overlap flag may start while its predecessor's last
// blocks still run: before PdlWait it may read only what was written two or more launches back
// — its weights (uploaded by copies, or filled by random-weight kernels, which never directly
// precede a product: its activations' producer does) or, say, the routing of the kernel before
// its predecessor — and it must call PdlWait in every block before it reads its predecessor's
// outputs or writes anything. A kernel calls PdlTrigger only after its own PdlWait (or,
// launched without the flag, anywhere: then its predecessors had finished when it started), so
// a kernel that starts early always finds everything two launches back complete and visible.
// Without the flag both are no-ops (griddepcontrol, sm_90).
#pragma once

namespace flashkv::cuda {

// Waits until the predecessor grid has completed and its writes are visible.
__device__ __forceinline__ void PdlWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel, when it was launched with the overlap flag, start its blocks (they
// then wait in PdlWait for this grid to complete).
__device__ __forceinline__ void PdlTrigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace flashkv::cuda
