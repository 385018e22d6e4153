// flashkv_host_link_probe: how fast the device reads host memory, by each way flashkv could
// (docs/PERFORMANCE.md "Decode misses gathered", issue #28): the copy engine
// (cudaMemcpyAsync from page-locked memory, whole and in expert-sized pieces), a kernel that
// reads mapped host memory in place with every SM (16-byte loads, four in flight a thread),
// and a gather kernel that copies expert-sized pieces to device memory the way
// backend/cuda/products/expert_gather.cu does; then the host's own read rate with 1 to N threads
// (what computing cold experts on the CPU would stream at). Prints one line per figure.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

bool Ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "host_link_probe: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

__global__ void ReadKernel(const int4* __restrict__ p, size_t n, unsigned long long* sink) {
  unsigned long long s = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const int4 a = p[i], b = p[i + stride], c = p[i + 2 * stride], d = p[i + 3 * stride];
    s += unsigned(a.x) + unsigned(b.y) + unsigned(c.z) + unsigned(d.w);
  }
  for (; i < n; i += stride) s += unsigned(p[i].x);
  if (s == 42) atomicAdd(sink, s);  // never true for the bytes written below: keeps the loads
}

// blockIdx.y: the piece; `piece` int4s from src + offs[piece] to dst + piece · piece.
__global__ void GatherKernel(const int4* __restrict__ src, const size_t* offs, size_t piece,
                             int4* dst) {
  const int4* s = src + offs[blockIdx.y];
  int4* d = dst + size_t(blockIdx.y) * piece;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < piece; i += 4 * stride) {
    const int4 a = s[i], b = s[i + stride], c = s[i + 2 * stride], e = s[i + 3 * stride];
    d[i] = a;
    d[i + stride] = b;
    d[i + 2 * stride] = c;
    d[i + 3 * stride] = e;
  }
  for (; i < piece; i += stride) d[i] = s[i];
}

}  // namespace

int main() {
  constexpr size_t kBytes = size_t(1) << 30;
  constexpr size_t kPiece = size_t(7) << 20;  // about one DS4 Flash expert (gate + up + down)
  void* host = nullptr;
  if (!Ok(cudaHostAlloc(&host, kBytes, cudaHostAllocMapped), "cudaHostAlloc")) return 1;
  std::memset(host, 1, kBytes);
  void* dev = nullptr;
  unsigned long long* sink = nullptr;
  if (!Ok(cudaMalloc(&dev, kBytes), "cudaMalloc") || !Ok(cudaMalloc(&sink, 8), "cudaMalloc")) {
    return 1;
  }
  const int4* mapped = nullptr;
  if (!Ok(cudaHostGetDevicePointer((void**)&mapped, host, 0), "cudaHostGetDevicePointer")) return 1;
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  auto timed = [&](auto&& work) {
    work();  // warm
    cudaEventRecord(a);
    work();
    cudaEventRecord(b);
    float ms = 0;
    if (!Ok(cudaEventSynchronize(b), "run")) std::exit(1);
    cudaEventElapsedTime(&ms, a, b);
    return double(ms);
  };
  double ms = timed([&] { cudaMemcpyAsync(dev, host, kBytes, cudaMemcpyHostToDevice); });
  std::printf("copy engine, 1 GiB: %.1f GB/s\n", double(kBytes) / ms / 1e6);
  ms = timed([&] {
    for (int k = 0; k < 36; ++k) {
      cudaMemcpyAsync(static_cast<char*>(dev) + k * kPiece,
                      static_cast<char*>(host) + size_t(k * 29 % 140) * kPiece, kPiece,
                      cudaMemcpyHostToDevice);
    }
  });
  std::printf("copy engine, 36 pieces of 7 MiB: %.1f GB/s\n", 36.0 * kPiece / ms / 1e6);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  for (int per_sm : {1, 4}) {
    ms = timed([&] { ReadKernel<<<sms * per_sm, 256>>>(mapped, kBytes / 16, sink); });
    std::printf("kernel reads in place, %d blocks of 256: %.1f GB/s\n", sms * per_sm,
                double(kBytes) / ms / 1e6);
  }
  for (int pieces : {6, 36}) {
    std::vector<size_t> offs(static_cast<size_t>(pieces));
    for (int k = 0; k < pieces; ++k) offs[size_t(k)] = size_t(k * 37 % 140) * (kPiece / 16);
    size_t* d_offs = nullptr;
    if (!Ok(cudaMalloc(&d_offs, offs.size() * sizeof(size_t)), "cudaMalloc")) return 1;
    cudaMemcpy(d_offs, offs.data(), offs.size() * sizeof(size_t), cudaMemcpyHostToDevice);
    ms = timed([&] {
      GatherKernel<<<dim3(16, unsigned(pieces)), 512>>>(mapped, d_offs, kPiece / 16,
                                                        static_cast<int4*>(dev));
    });
    std::printf("gather kernel, %d pieces of 7 MiB: %.3f ms, %.1f GB/s\n", pieces, ms,
                double(pieces) * kPiece / ms / 1e6);
    cudaFree(d_offs);
  }
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  std::vector<unsigned> counts = {1, cpus / 4, cpus / 2, cpus};
  counts.erase(std::remove(counts.begin(), counts.end(), 0u), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  for (unsigned threads : counts) {
    std::atomic<unsigned long long> total{0};
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const auto* p = static_cast<const unsigned long long*>(host);
        const size_t n = kBytes / 8, lo = n * t / threads, hi = n * (t + 1) / threads;
        unsigned long long s = 0;
        for (int rep = 0; rep < 3; ++rep) {
          for (size_t i = lo; i + 3 < hi; i += 4) s += p[i] ^ p[i + 1] ^ p[i + 2] ^ p[i + 3];
        }
        total += s;
      });
    }
    for (std::thread& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("host reads, %u threads: %.1f GB/s\n", threads, 3.0 * kBytes / s / 1e9);
  }
  cudaFreeHost(host);
  cudaFree(dev);
  return 0;
}
