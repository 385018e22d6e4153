// CudaBackend::State: the CUDA objects behind a CudaBackend — device, stream, launch queue,
// pinned staging buffers for host transfers, growable device scratch, placed weights — and
// the sticky error. Internal to backend/cuda/ (includes the CUDA runtime).
// Must not: format messages with fmt in .cu files (nvcc rejects fmt's consteval checks);
// errors from kernels' host side go through Fail(), defined in a .cpp.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/launch_queue.h"

namespace flashkv {

// Scratch slots: each op that needs device temporaries owns one, grown to the largest size
// seen and then reused (so decode steps never allocate and graph arguments stay stable).
enum class CudaScratch : int {
  kActQuant,      // MatMul/MatMulGrouped: quantized activations
  kHcFlat,        // HcPre/HcHead: normalised streams [n_tokens, hc_dim]
  kHcMix,         // HcPre/HcHead: mix projections [n_tokens, mix]
  kIndexScores,   // IndexerTopK: [n_tokens, n_vis]
  kAttnPartial,   // Attention: per row-chunk partial softmax states
  kAttnTable,     // AttentionBatch: the sessions' windows, positions and rows
  kMoeXq,         // MoeExperts: quantized inputs
  kMoeMid,        // MoeExperts: [n_tokens·n_used, n_ff] mids
  kMoeMidQ,       // MoeExperts: quantized mids
  kMoeDown,       // MoeExperts: [n_tokens·n_used, n_embd] down projections per slot
  kMoeTiles,      // MoeExperts: expert-sorted pair list and tile table
  kFusedMix,      // fused SublayerInput: HC mix [mix]
  kFusedInputQ,   // fused SublayerInput: the normalised input, quantized
  kFusedMoeXq,    // fused MoeBlock: the input quantized for the experts and the shared expert
  kFusedMoeMid,   // fused MoeBlock: mids [n_used, n_ff], then their quantized rows
  kFusedMoeDown,  // fused MoeBlock: down products per slot [n_used + 1, n_embd]
  kFastPartial,   // MatMul on the fast path: k slices' partial sums [slices, n_tokens, rows]
  kCount
};

struct CudaBackend::State {
  int device = 0;
  cudaDeviceProp prop{};
  cudaStream_t stream = nullptr;
  std::unique_ptr<cuda::LaunchQueue> queue;

  // Pinned staging for pageable host memory: kStagingBuffers chunks of kStagingBytes,
  // filled and drained alternately so the copy engine and the host memcpy overlap.
  static constexpr size_t kStagingBytes = size_t(16) << 20;
  static constexpr int kStagingBuffers = 2;
  std::array<void*, kStagingBuffers> staging{};
  std::array<cudaEvent_t, kStagingBuffers> staging_done{};

  std::array<void*, size_t(CudaScratch::kCount)> scratch{};
  std::array<size_t, size_t(CudaScratch::kCount)> scratch_bytes{};

  // ReadManyAsync: device → pinned host copies on their own stream, ordered after the
  // main stream's work at submission by an event; each ticket's completion event is shared
  // by whoever waits for it (any thread), and destroyed with the last holder.
  struct AsyncCopy {
    cudaEvent_t done = nullptr;
    ~AsyncCopy();
  };
  cudaStream_t copy_stream = nullptr;
  std::mutex async_mu;
  std::map<uint64_t, std::shared_ptr<AsyncCopy>> async_copies;
  uint64_t next_ticket = 1;
  // MarkOps / UploadAfter: events by ticket, and the uploads' own stream (made on first use).
  std::map<uint64_t, cudaEvent_t> upload_events;
  cudaStream_t upload_stream = nullptr;

  std::vector<void*> weight_allocs;    // freed with the backend
  const uint64_t* iq2_grid = nullptr;  // device copy of kIq2xxsGrid [256]

  // The settings: CudaBackendOptions as CudaOptionsFromEnvironment resolved them at creation
  // (their meaning is documented there); CudaBackend's Set* switches change some of them
  // between launches. Kernels' host code reads them here, never the environment.
  // Prefill q8 products on the int8 tensor cores: 0 off (dp4a kernels), else the tile
  // variant (CudaBackendOptions::imma).
  int imma = 1;
  int imma_min_tokens = kCudaImmaMinTokens;  // plain batches from this size
  int imma_few = kCudaImmaFew;               // their narrow tiles up to kCudaImmaFewTokens
  // Many-token kernels for prefill chunks (CudaBackendOptions::tiled).
  bool tiled_prefill = true;
  // Fused kernels for the coarse ops (CudaBackendOptions::fused).
  bool fused = true;
  // The device runs sm_90a code (cuda::HopperFeatures at start-up; device/arch.cuh).
  bool hopper_features = false;
  // The one-token tile kernels' weight bytes per block and looping blocks per SM
  // (CudaBackendOptions::tile_bytes, tile_blocks_per_sm; device/matvec_tile.cuh).
  uint64_t tile_bytes = kCudaTileBytes;
  int tile_blocks_per_sm = kCudaTileBlocksPerSm;
  // The largest batch whose routed experts take the grouped tiles (CudaBackendOptions::
  // moe_group_max; products/moe_group.h).
  int moe_group_max = kCudaMoeGroupMaxTokens;
  // Average pairs per expert below which the tensor-core expert tiles hold 8 pairs
  // (CudaBackendOptions::moe_narrow; products/launch.h ImmaMoePairs).
  int moe_narrow = kCudaMoeNarrowBelow;
  // Whether the tensor-core gate/up kernel may keep copies of the IQ2 grid (SetMoeKernels; a
  // test's switch).
  bool moe_grid_copies = true;
  // The decode sessions' closed rows in FinishRowsKernel launches (CudaBackendOptions::
  // finish_batch; fused/norm_rope.cu).
  bool finish_batch = true;
  // QuantizeQ8_0Kernel's strided row form (CudaBackendOptions::quant_rows; products/matmul.cu).
  bool quant_rows = true;
  // The float path (Backend::SetFloatPath): 0 exact; 1 or 2 fast, the F16/BF16 products of
  // prefill chunks on the TF32 tensor cores with each activation taken as that many TF32
  // terms (products/matmul_fast.cu; 2 is kFast's, 1 a benchmark's switch, SetFastTerms).
  int fast_terms = 0;
  // On the fast path, whether the tiled indexer scores take the tensor cores too
  // (ops/indexer.cu; docs/CUDA.md "Numerics: exact and fast" has what it measured: the same
  // scores and selections as the exact kernel, a third of its time). A benchmark's switch
  // besides (CudaBackend::SetFastIndexer, flashkv_bench_cuda --fast-indexer 0).
  bool fast_indexer = true;
  // Not a setting: a benchmark's switch (SetTiledIndexer; flashkv_bench_cuda --tiled-compare
  // documents it). With tiled_prefill, whether the indexer scores take their tiled kernel.
  bool tiled_indexer = true;

  // Arrival counters of the fused kernels' last-block steps (fused/sync.cuh): zeroed at
  // creation, every kernel leaves its own at zero.
  unsigned* sync_counters = nullptr;

  std::mutex error_mu;
  std::string error;  // first failure, reported by the next Read/Write/Synchronize

  // Records a failure (keeps the first).
  void Fail(const std::string& what);
  void FailCuda(const char* what, cudaError_t e);
  // Device scratch of at least `bytes` for `slot` (flushes and waits before regrowing).
  void* Scratch(CudaScratch slot, size_t bytes);
  // Issues the recorded launches; records a launch error.
  void Flush();

  // `bytes`: the weight bytes the launch reads, for the profile's GB/s (0: not a product).
  template <typename A>
  void Launch(void (*kernel)(A), dim3 grid, dim3 block, unsigned smem, const A& args,
              uint64_t bytes = 0) {
    queue->Launch(kernel, grid, block, smem, args, bytes);
  }
  // A launch that may start while its predecessor still runs (programmatic dependent launch):
  // only for kernels written for it (device/pdl.cuh: PdlWait in every block before reading the
  // predecessor's outputs).
  template <typename A>
  void LaunchOverlapped(void (*kernel)(A), dim3 grid, dim3 block, unsigned smem, const A& args,
                        uint64_t bytes = 0) {
    queue->Launch(kernel, grid, block, smem, args, bytes, /*overlap=*/true);
  }
};

}  // namespace flashkv
