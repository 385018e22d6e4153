#include "backend/cuda/launch_queue.h"

#include <algorithm>
#include <cstdio>

namespace flashkv::cuda {
namespace {

// Graphs are kept for at most this many distinct launch sequences; decode needs a handful
// (which compressor windows close on the step), prefill chunks rarely repeat.
constexpr size_t kMaxGraphs = 24;
// A sequence becomes a graph on its second flush; shorter ones are not worth a graph.
constexpr int kSeenBeforeGraph = 2;
constexpr size_t kMinGraphLaunches = 8;

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

bool SameShape(const LaunchRecord& a, const LaunchRecord& b) {
  return a.func == b.func && a.grid.x == b.grid.x && a.grid.y == b.grid.y && a.grid.z == b.grid.z &&
         a.block.x == b.block.x && a.block.y == b.block.y && a.block.z == b.block.z &&
         a.smem == b.smem && a.arg_bytes == b.arg_bytes && a.overlap == b.overlap;
}

// A direct launch; with `overlap` as a programmatic dependent of the stream's previous kernel.
cudaError_t LaunchOne(const LaunchRecord& r, void** arg, bool overlap, cudaStream_t stream) {
  if (!overlap) return cudaLaunchKernel(r.func, r.grid, r.block, arg, r.smem, stream);
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = r.grid;
  cfg.blockDim = r.block;
  cfg.dynamicSmemBytes = r.smem;
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelExC(&cfg, r.func, arg);
}

cudaKernelNodeParams NodeParams(const LaunchRecord& r, void** arg_ptr) {
  cudaKernelNodeParams p{};
  p.func = const_cast<void*>(r.func);
  p.gridDim = r.grid;
  p.blockDim = r.block;
  p.sharedMemBytes = r.smem;
  p.kernelParams = arg_ptr;
  p.extra = nullptr;
  return p;
}

}  // namespace

LaunchQueue::~LaunchQueue() {
  for (auto& [sig, g] : graphs_by_sig_) DropGraph(g);
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

uint64_t LaunchQueue::Signature() const {
  uint64_t h = pending_.size();
  for (const LaunchRecord& r : pending_) {
    h = Mix(h, reinterpret_cast<uintptr_t>(r.func));
    h = Mix(h, (uint64_t(r.grid.x) << 32) | (uint64_t(r.grid.y) << 16) | r.grid.z);
    h = Mix(h, (uint64_t(r.block.x) << 32) | (uint64_t(r.block.y) << 16) | r.block.z);
    h = Mix(h, (uint64_t(r.smem) << 32) | (uint64_t(r.overlap) << 31) | r.arg_bytes);
  }
  return h;
}

bool LaunchQueue::SameShapes(const Graph& g) const {
  if (g.records.size() != pending_.size()) return false;
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (!SameShape(g.records[i], pending_[i])) return false;
  }
  return true;
}

std::string Describe(const LaunchRecord& r) {
  const char* name = nullptr;
  if (cudaFuncGetName(&name, r.func) != cudaSuccess || name == nullptr) name = "?";
  return std::string(name) + " grid (" + std::to_string(r.grid.x) + "," + std::to_string(r.grid.y) +
         "," + std::to_string(r.grid.z) + ") block " + std::to_string(r.block.x) + " smem " +
         std::to_string(r.smem);
}

cudaError_t LaunchQueue::LaunchDirect(std::string* failed) {
  cudaError_t first = cudaSuccess;
  if (profile_) {
    while (events_.size() < 2 * pending_.size()) {
      cudaEvent_t ev;
      if (cudaEventCreate(&ev) != cudaSuccess) break;
      events_.push_back(ev);
    }
  }
  const bool timing = profile_ && events_.size() >= 2 * pending_.size();
  for (size_t i = 0; i < pending_.size(); ++i) {
    LaunchRecord& r = pending_[i];
    void* arg = r.args.data();
    if (timing) cudaEventRecord(events_[2 * i], stream_);
    // Timed launches stay plain: the events between them would serialize them anyway.
    cudaError_t e = LaunchOne(r, &arg, r.overlap && !timing, stream_);
    if (timing) cudaEventRecord(events_[2 * i + 1], stream_);
    if (e != cudaSuccess && first == cudaSuccess) {
      first = e;
      if (failed != nullptr) *failed = Describe(r);
    }
    ++direct_launches_;
  }
  if (timing && !pending_.empty()) {
    cudaEventSynchronize(events_[2 * pending_.size() - 1]);
    for (size_t i = 0; i < pending_.size(); ++i) {
      float ms = 0;
      cudaEventElapsedTime(&ms, events_[2 * i], events_[2 * i + 1]);
      KernelTime& t = times_[pending_[i].func];
      ++t.launches;
      t.ms += ms;
      t.bytes += pending_[i].bytes;
    }
  }
  return first;
}

void LaunchQueue::SetProfiling(bool on) {
  profile_ = on;
  times_.clear();
}

std::vector<KernelTiming> LaunchQueue::Timings(bool reset) {
  std::vector<KernelTiming> v;
  for (const auto& [f, t] : times_) {
    const char* name = nullptr;
    if (cudaFuncGetName(&name, f) != cudaSuccess || name == nullptr) name = "?";
    v.push_back(KernelTiming{name, t.launches, t.ms, t.bytes});
  }
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.ms > b.ms; });
  if (reset) times_.clear();
  return v;
}

std::string LaunchQueue::ProfileReport(bool reset) {
  const std::vector<KernelTiming> v = Timings(reset);
  double total = 0;
  for (const KernelTiming& t : v) total += t.ms;
  std::string out = "kernel time " + std::to_string(total) + " ms\n";
  for (const KernelTiming& t : v) {
    char line[320];
    std::snprintf(line, sizeof(line), "  %9.3f ms %5.1f%% %7llu x  %.200s\n", t.ms,
                  total > 0 ? 100.0 * t.ms / total : 0.0, (unsigned long long)t.launches,
                  t.name.c_str());
    out += line;
  }
  return out;
}

void LaunchQueue::DropGraph(Graph& g) {
  if (g.exec != nullptr) cudaGraphExecDestroy(g.exec);
  if (g.graph != nullptr) cudaGraphDestroy(g.graph);
  g.exec = nullptr;
  g.graph = nullptr;
  g.nodes.clear();
  g.records.clear();
}

cudaError_t LaunchQueue::BuildGraph(Graph& g) {
  cudaGraph_t graph = nullptr;
  cudaError_t e = cudaGraphCreate(&graph, 0);
  if (e != cudaSuccess) return e;
  g.nodes.resize(pending_.size());
  for (size_t i = 0; i < pending_.size(); ++i) {
    void* arg = pending_[i].args.data();
    const cudaKernelNodeParams p = NodeParams(pending_[i], &arg);
    e = cudaGraphAddKernelNode(&g.nodes[i], graph, nullptr, 0, &p);
    if (e != cudaSuccess || i == 0) {
      if (e != cudaSuccess) break;
      continue;
    }
    // The chain's edge; an overlapped launch's starts when every block of its predecessor
    // has called PdlTrigger (or ended) instead of when the predecessor ends.
    cudaGraphEdgeData edge{};
    if (pending_[i].overlap) {
      edge.from_port = cudaGraphKernelNodePortProgrammatic;
      edge.type = cudaGraphDependencyTypeProgrammatic;
    }
    e = cudaGraphAddDependencies(graph, &g.nodes[i - 1], &g.nodes[i], &edge, 1);
    if (e != cudaSuccess) break;
  }
  if (e == cudaSuccess) e = cudaGraphInstantiate(&g.exec, graph, 0);
  if (e != cudaSuccess) {
    cudaGraphDestroy(graph);
    g.exec = nullptr;
    g.nodes.clear();
    return e;
  }
  g.graph = graph;
  g.records = pending_;
  return cudaSuccess;
}

cudaError_t LaunchQueue::Replay(Graph& g) {
  for (size_t i = 0; i < pending_.size(); ++i) {
    LaunchRecord& now = pending_[i];
    LaunchRecord& held = g.records[i];
    if (std::memcmp(now.args.data(), held.args.data(), now.arg_bytes) == 0) continue;
    void* arg = now.args.data();
    const cudaKernelNodeParams p = NodeParams(now, &arg);
    cudaError_t e = cudaGraphExecKernelNodeSetParams(g.exec, g.nodes[i], &p);
    if (e != cudaSuccess) return e;  // the caller relaunches directly
    std::memcpy(held.args.data(), now.args.data(), now.arg_bytes);
  }
  cudaError_t e = cudaGraphLaunch(g.exec, stream_);
  if (e == cudaSuccess) ++graph_launches_;
  return e;
}

cudaError_t LaunchQueue::Flush(std::string* failed) {
  if (pending_.empty()) return cudaSuccess;
  ++flushes_;
  cudaError_t e = cudaSuccess;
  if (!graphs_ || profile_ || pending_.size() < kMinGraphLaunches) {
    e = LaunchDirect(failed);
    pending_.clear();
    return e;
  }
  const uint64_t sig = Signature();
  auto it = graphs_by_sig_.find(sig);
  if (it != graphs_by_sig_.end() && SameShapes(it->second)) {
    it->second.last_use = flushes_;
    e = Replay(it->second);
    if (e != cudaSuccess) {  // drop the graph and fall back to direct launches
      cudaGetLastError();
      DropGraph(it->second);
      graphs_by_sig_.erase(it);
      e = LaunchDirect(failed);
    }
    pending_.clear();
    return e;
  }
  if (seen_.size() > 4096) seen_.clear();  // one-off prefill shapes must not pile up
  if (++seen_[sig] < kSeenBeforeGraph) {
    e = LaunchDirect(failed);
    pending_.clear();
    return e;
  }
  if (graphs_by_sig_.size() >= kMaxGraphs) {
    // Evict the least recently used graph.
    auto victim = graphs_by_sig_.begin();
    for (auto i = graphs_by_sig_.begin(); i != graphs_by_sig_.end(); ++i) {
      if (i->second.last_use < victim->second.last_use) victim = i;
    }
    DropGraph(victim->second);
    graphs_by_sig_.erase(victim);
  }
  if (it != graphs_by_sig_.end()) {  // hash collision with different shapes: rebuild
    DropGraph(it->second);
    graphs_by_sig_.erase(it);
  }
  Graph& g = graphs_by_sig_[sig];
  g.last_use = flushes_;
  e = BuildGraph(g);
  if (e != cudaSuccess) {
    cudaGetLastError();
    graphs_by_sig_.erase(sig);
    e = LaunchDirect(failed);
  } else {
    e = cudaGraphLaunch(g.exec, stream_);
    if (e == cudaSuccess) ++graph_launches_;
  }
  pending_.clear();
  return e;
}

}  // namespace flashkv::cuda
