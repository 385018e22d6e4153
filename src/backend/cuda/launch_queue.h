// LaunchQueue: records kernel launches of one stream and issues them at the next flush,
// either one by one or, when the same sequence of launch shapes has been flushed before,
// as a replay of a cached CUDA graph whose changed kernel arguments are patched in place.
// A decode step (embed, 43 layers, head) is such a repeating sequence: its shapes depend
// only on n_tokens = 1 and on which compressor windows close, so a few graphs cover every
// step. Must not: reorder launches or launch anything the caller did not record.
//
// Every kernel takes exactly one by-value argument struct, so a record is the function,
// the launch shape and the struct's bytes.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace flashkv::cuda {

inline constexpr size_t kMaxKernelArgBytes = 384;

struct LaunchRecord {
  const void* func = nullptr;
  dim3 grid;
  dim3 block;
  unsigned smem = 0;
  unsigned arg_bytes = 0;
  uint64_t bytes = 0;    // weight bytes read (profile figures only; not part of the shape)
  bool overlap = false;  // may start before its predecessor ends (programmatic dependent launch)
  alignas(16) std::array<uint8_t, kMaxKernelArgBytes> args;
};

// One kernel's summed profile.
struct KernelTiming {
  std::string name;
  uint64_t launches = 0;
  double ms = 0;
  uint64_t bytes = 0;  // weight bytes the launches read (where the launch site said)
};

class LaunchQueue {
 public:
  // overlap: launches recorded with the overlap flag start as programmatic dependents of
  // their predecessor (FLASHKV_CUDA_PDL=0 turns it off; profiling launches them plainly).
  LaunchQueue(cudaStream_t stream, bool graphs, bool overlap)
      : stream_(stream), graphs_(graphs), overlap_(overlap) {}
  ~LaunchQueue();
  LaunchQueue(const LaunchQueue&) = delete;
  LaunchQueue& operator=(const LaunchQueue&) = delete;

  template <typename A>
  // overlap: the kernel follows device/pdl.cuh's rules and may be launched as a programmatic
  // dependent of the previous launch (when the queue's overlap switch is on).
  void Launch(void (*kernel)(A), dim3 grid, dim3 block, unsigned smem, const A& args,
              uint64_t bytes = 0, bool overlap = false) {
    static_assert(sizeof(A) <= kMaxKernelArgBytes, "kernel argument struct too large");
    static_assert(std::is_trivially_copyable_v<A>, "kernel arguments must be trivially copyable");
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
    LaunchRecord& r = pending_.emplace_back();
    r.func = reinterpret_cast<const void*>(kernel);
    r.grid = grid;
    r.block = block;
    r.smem = smem;
    r.arg_bytes = sizeof(A);
    r.bytes = bytes;
    r.overlap = overlap && overlap_;
    std::memcpy(r.args.data(), &args, sizeof(A));
  }

  // Issues everything recorded; returns the first CUDA error seen (cudaSuccess if none)
  // and, for a failed launch, describes it in `failed` (kernel name and shape).
  cudaError_t Flush(std::string* failed = nullptr);

  bool overlap() const { return overlap_; }
  void SetOverlap(bool on) { overlap_ = on; }  // for launches recorded from now on
  uint64_t graph_launches() const { return graph_launches_; }
  uint64_t direct_launches() const { return direct_launches_; }

  // Profiling (benchmarks): every launch is timed with events, graphs are off, and the
  // time is summed per kernel. Report: one line per kernel, most time first.
  void SetProfiling(bool on);
  std::string ProfileReport(bool reset);
  std::vector<KernelTiming> Timings(bool reset);  // most time first

 private:
  struct Graph {
    cudaGraph_t graph = nullptr;  // kept: exec-node updates name nodes of this graph
    cudaGraphExec_t exec = nullptr;
    std::vector<cudaGraphNode_t> nodes;
    std::vector<LaunchRecord> records;  // the arguments the exec graph holds now
    uint64_t last_use = 0;
  };

  uint64_t Signature() const;
  bool SameShapes(const Graph& g) const;
  cudaError_t LaunchDirect(std::string* failed);
  cudaError_t BuildGraph(Graph& g);
  cudaError_t Replay(Graph& g);
  void DropGraph(Graph& g);

  cudaStream_t stream_;
  bool graphs_;
  bool overlap_;
  std::vector<LaunchRecord> pending_;
  std::unordered_map<uint64_t, Graph> graphs_by_sig_;
  std::unordered_map<uint64_t, int> seen_;
  uint64_t flushes_ = 0;
  bool profile_ = false;
  std::vector<cudaEvent_t> events_;
  struct KernelTime {
    uint64_t launches = 0;
    double ms = 0;
    uint64_t bytes = 0;
  };
  std::unordered_map<const void*, KernelTime> times_;
  uint64_t graph_launches_ = 0;
  uint64_t direct_launches_ = 0;
};

}  // namespace flashkv::cuda
