// GatherExperts (backend.h ExpertGather): the routed experts a small step chose that live in
// host memory, copied to device scratch before their products run. Two kernels, both with
// fixed grids so a captured graph replays them: a one-block plan (the layer's tables copied to
// out_tables, then each distinct uncached choice given a scratch slot, in the order the router
// wrote them) and the copy (one job per slot and matrix, 16-byte loads where every address
// and size allows, bytes otherwise). Why a gather: a kernel loading 16 bytes a thread on every
// SM reads pinned host memory about as fast as the copy engine, twice as fast as the fused
// expert kernels' own in-place reads (the figures: docs/PERFORMANCE.md "Routed experts in
// host memory", step 3).
#include <algorithm>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device/common.cuh"
#include "backend/cuda/products/expert_gather.h"

namespace flashkv {
namespace cuda {
namespace {

constexpr int kPlanThreads = 256;
constexpr int kCopyThreads = 512;
// Blocks per (slot, matrix): 16 · 512 threads keep the host link's bandwidth of loads in
// flight for one layer's six experts (more or fewer were no faster: docs/PERFORMANCE.md
// "Routed experts in host memory", step 3).
constexpr int kCopyBlocks = 16;

struct GatherArgs {
  const uint8_t* const* tables;  // [3][n_expert]
  const uint8_t** out_tables;    // [3][n_expert]
  int32_t* plan;                 // [1 + slots]
  const int32_t* selected;       // [n]
  int n;
  int n_expert;
  int slots;
  const uint8_t* device_lo;
  const uint8_t* device_hi;
  uint8_t* scratch;
  uint64_t slot_bytes;
  uint64_t part_offset[3];
  uint64_t part_bytes[3];
};

__global__ void __launch_bounds__(kPlanThreads) GatherPlanKernel(GatherArgs a) {
  const int entries = 3 * a.n_expert;
  for (int i = int(threadIdx.x); i < entries; i += kPlanThreads) a.out_tables[i] = a.tables[i];
  __syncthreads();  // the copies above are visible to thread 0 (same block)
  if (threadIdx.x != 0) return;
  int jobs = 0;
  for (int j = 0; j < a.n; ++j) {
    const int e = a.selected[j];
    if (e < 0 || e >= a.n_expert) continue;
    const uint8_t* p = a.tables[e];
    if (p >= a.device_lo && p < a.device_hi) continue;  // cached on the device
    if (a.out_tables[e] != p) continue;                 // chosen twice: already has a slot
    if (jobs == a.slots) continue;                      // no room: read in place
    uint8_t* base = a.scratch + uint64_t(jobs) * a.slot_bytes;
    for (int m = 0; m < 3; ++m) a.out_tables[m * a.n_expert + e] = base + a.part_offset[m];
    a.plan[1 + jobs] = e;
    ++jobs;
  }
  a.plan[0] = jobs;
}

// grid (kCopyBlocks, slots used, 3 matrices).
__global__ void __launch_bounds__(kCopyThreads) GatherCopyKernel(GatherArgs a) {
  const int job = int(blockIdx.y);
  if (job >= a.plan[0]) return;
  const int m = int(blockIdx.z);
  const int e = a.plan[1 + job];
  const uint8_t* src = a.tables[m * a.n_expert + e];
  uint8_t* dst = a.scratch + uint64_t(job) * a.slot_bytes + a.part_offset[m];
  const uint64_t bytes = a.part_bytes[m];
  const uint64_t stride = uint64_t(gridDim.x) * kCopyThreads;
  uint64_t i = uint64_t(blockIdx.x) * kCopyThreads + threadIdx.x;
  if (((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) | bytes) & 15) == 0) {
    const int4* s = reinterpret_cast<const int4*>(src);
    int4* d = reinterpret_cast<int4*>(dst);
    const uint64_t n = bytes / 16;
    // Four loads in flight per thread before their stores: the host link's latency is long.
    for (; i + 3 * stride < n; i += 4 * stride) {
      const int4 v0 = s[i], v1 = s[i + stride], v2 = s[i + 2 * stride], v3 = s[i + 3 * stride];
      d[i] = v0;
      d[i + stride] = v1;
      d[i + 2 * stride] = v2;
      d[i + 3 * stride] = v3;
    }
    for (; i < n; i += stride) d[i] = s[i];
  } else {
    for (; i < bytes; i += stride) dst[i] = src[i];
  }
}

}  // namespace

bool LaunchExpertGather(CudaBackend::State& s, const ExpertGather& g, const int32_t* selected,
                        int n) {
  if (n <= 0 || g.slots <= 0 || g.n_expert <= 0 || !g.tables || !g.out_tables || !g.plan ||
      !g.scratch) {
    return false;
  }
  GatherArgs a{};
  a.tables = g.tables.get();
  a.out_tables = g.out_tables.get();
  a.plan = g.plan.get();
  a.selected = selected;
  a.n = n;
  a.n_expert = g.n_expert;
  a.slots = g.slots;
  a.device_lo = g.device_lo;
  a.device_hi = g.device_hi;
  a.scratch = g.scratch.get();
  a.slot_bytes = g.slot_bytes;
  uint64_t bytes = 0;
  for (int m = 0; m < 3; ++m) {
    a.part_offset[m] = g.part_offset[m];
    a.part_bytes[m] = g.part_bytes[m];
    bytes += g.part_bytes[m];
  }
  const int jobs = std::min(g.slots, n);
  s.Launch(GatherPlanKernel, dim3(1), dim3(kPlanThreads), 0, a);
  s.Launch(GatherCopyKernel, dim3(kCopyBlocks, unsigned(jobs), 3), dim3(kCopyThreads), 0, a,
           bytes * uint64_t(jobs));
  return true;
}

}  // namespace cuda

bool CudaBackend::GatherExperts(const ExpertGather& g, DevPtr<const int32_t> selected, int n) {
  return cuda::LaunchExpertGather(*s_, g, selected.get(), n);
}

}  // namespace flashkv
