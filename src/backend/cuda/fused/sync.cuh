// The one grid-wide step the fused kernels use: the last block of a group to finish does the
// group's remaining work (a reduction in fixed order, a quantization, a tiny serial step).
// Each block writes its part, then arrives on a counter; the block whose arrival completes
// the count reads every part (through L2, __ldcg) and resets the counter for the next
// launch. Which block is last varies from run to run, but the work it does reads only the
// parts and folds them in an order fixed by the shape, so the bits do not depend on it.
// Counters live in CudaBackend::State::sync_counters (zeroed at creation), one fixed range
// per fused step (fused/launch.h) so no two kernels share one. Must not: be used where blocks of a
// group could wait for each other (only the last block continues, nobody waits).
#pragma once

#include "backend/cuda/device/common.cuh"
#include "backend/cuda/fused/launch.h"

namespace flashkv::cuda {

// A barrier for the `threads` threads (a multiple of 32) of the block that call it with the
// same id (1..15; id 0 is __syncthreads): a block whose warps split into groups doing different
// work (fused/sublayer_input.cu's last block) synchronises a group without the others.
__device__ __forceinline__ void GroupBarrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Called once by every thread of every block of the group, after the block's writes of its
// part. True in the block that arrived last (of `expected`); its later reads of other
// blocks' parts must go through L2 (__ldcg).
__device__ __forceinline__ bool ArriveLast(unsigned* counter, unsigned expected) {
  __shared__ bool last;
  __threadfence();  // this thread's part is visible device-wide before the block arrives
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(counter, 1u) == expected - 1;
    if (last) atomicExch(counter, 0u);  // every block has arrived: ready for the next launch
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

}  // namespace flashkv::cuda
