// CudaBackend: the Backend on one NVIDIA GPU (built for sm_90, H100/H200). Device buffers
// come from cudaMalloc; ops are kernels queued on one stream, so they run in call order
// and the host never waits except in Read, Write and Synchronize. Weights are copied to
// the device by PlaceWeight and owned by the backend until it is destroyed.
// Must not: own policy (numerics modes, layer structure) — see backend.h. This header is
// plain C++ (no CUDA headers) so the CLI and tests compile it with the host compiler.
//
// Exactness: every kernel computes an output with a float order fixed by the op's shape
// arguments, never by n_tokens, so chunked prefill equals token-by-token decode bit for bit
// (backend.h's batching contract). With ActQuantMode::kQ8 the quantized dot products
// (Q8_0, Q2_K, Q4_K, IQ2_XXS) reproduce ds4's CPU kernels bit for bit; everything else
// agrees with the CPU backend to rounding (docs/CUDA.md has the details).
//
// Launch queue: kernel launches are recorded and issued at the next host-visible point
// (Read, Write, Synchronize, Alloc, free). A recorded sequence whose launch shapes repeat
// (a decode step) is replayed as a CUDA graph, with only the changed kernel arguments
// updated, which removes per-launch overhead from decoding. FLASHKV_CUDA_GRAPHS=0 turns
// graphs off.
//
// Not thread-safe: one forward pass at a time, like CpuBackend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace flashkv {

// Every setting of the backend. A field left at -1 takes its FLASHKV_CUDA_* variable from the
// environment, else its default; an explicit value beats the variable. CudaBackend::Create
// resolves them once (CudaOptionsFromEnvironment); kernels read the result from the backend's
// state, never the environment.
struct CudaBackendOptions {
  int device = 0;
  // FLASHKV_CUDA_GRAPHS (default on): replay repeated launch sequences as CUDA graphs; 0 off;
  // 1 on.
  int graphs = -1;
  // Prefill q8 products on the int8 tensor cores (Q8_0 MatMul, IQ2_XXS / Q2_K experts; same
  // bits as the dp4a kernels): FLASHKV_CUDA_IMMA (default 1); 0 off; 1 the default Q8_0 tile
  // shape; 2..3 other Q8_0 tile shapes; 4 shape 1 with the experts in tiles of 32 pairs
  // instead of 64 (2..4 are compared by the benchmarks, bench/cuda/matmul_bench.cpp).
  int imma = -1;
  // Plain MatMul batches of at least this many tokens take the tensor-core kernel:
  // FLASHKV_CUDA_IMMA_MIN_TOKENS (default kCudaImmaMinTokens); at least 1.
  int imma_min_tokens = -1;
  // Tensor-core batches of at most kCudaImmaFewTokens tokens (decode steps of several
  // sessions, speculative verify steps) in narrow tiles, so that every matrix spreads over
  // the SMs (the tile shape never changes a bit): FLASHKV_CUDA_IMMA_FEW (default
  // kCudaImmaFew); 0 the prefill tile of the imma variant; 1..kCudaImmaFewVariants the
  // narrow shapes of products/matmul_imma.cu (compared by the benchmarks).
  int imma_few = -1;
  // Many-token kernels for attention, the indexer scores, the compressor and the F16/BF16
  // weight products in prefill chunks (same bits as the one-token kernels):
  // FLASHKV_CUDA_TILED (default on); 0 off; 1 on.
  int tiled = -1;
  // Fused kernels for the coarse ops (SublayerInput and MoeBlock of a one-token step,
  // NormRope of any chunk; same bits as the fine ops' kernels, docs/CUDA.md):
  // FLASHKV_CUDA_FUSED (default on); 0 off; 1 on.
  int fused = -1;
  // The one-token tile kernels as programmatic dependent launches (their weight copies start
  // while the previous kernel ends; same bits, docs/CUDA.md): FLASHKV_CUDA_PDL (default on);
  // 0 off; 1 on.
  int pdl = -1;
  // Weight bytes a block of the one-token tile kernels aims to hold (device/matvec_tile.cuh):
  // FLASHKV_CUDA_TILE_BYTES, kCudaTileMinBytes … kCudaTileMaxBytes (default kCudaTileBytes;
  // a value out of range takes the default). For measurements.
  int tile_bytes = -1;
  // Blocks per SM of the looping tile kernels, 0 a block per tile (no loop):
  // FLASHKV_CUDA_TILE_BLOCKS_PER_SM, 0 … 16 (default kCudaTileBlocksPerSm; a value out of
  // range takes the default). For measurements.
  int tile_blocks_per_sm = -1;
  // The largest batch whose routed experts take the grouped tile kernels (products/moe_group.h),
  // 0 none: FLASHKV_CUDA_MOE_GROUP_MAX (default kCudaMoeGroupMaxTokens; a negative value
  // takes the default).
  int moe_group_max = -1;
  // Tensor-core expert tiles of 8 pairs (products/moe_imma.cu) while the batch's pairs average
  // fewer than this many per expert, 0 never: FLASHKV_CUDA_MOE_NARROW (default
  // kCudaMoeNarrowBelow; a negative value takes the default).
  int moe_narrow = -1;
  // The closed compressor rows of a step's decode sessions in launches whose shape does not
  // depend on which sessions close a window (FinishRowsKernel; same bits, docs/CUDA.md):
  // FLASHKV_CUDA_FINISH_BATCH (default on; "0" off).
  int finish_batch = -1;
  // Q8_0 activations quantized by QuantizeQ8_0Kernel's strided row form (8 lanes a block, a
  // bounded grid; products/matmul.cu) instead of a warp per block: the same bits, 3× faster
  // in a prefill chunk (docs/PERFORMANCE.md "The activation quantizer and a fast float
  // path"): FLASHKV_CUDA_QUANT_ROWS (default on; "0" off).
  int quant_rows = -1;
};

// Plain MatMul batches of at least this many tokens take the tensor-core kernel (same bits
// at any size; from 9 rows it beats the 8-token warp kernel, which reads each weight row
// once per 8 rows: docs/PERFORMANCE.md "Batched decode steps: the per-session glue as few
// launches, and the tensor cores from 9 rows").
inline constexpr int kCudaImmaMinTokens = 9;
// The narrow tensor-core tiles (CudaBackendOptions::imma_few): batches up to this many tokens,
// and the default shape (64 rows: the fastest Q8_0 kernel time at 16 and 64 rows on the H100,
// docs/PERFORMANCE.md "Narrow tensor-core tiles for few-token batches").
inline constexpr int kCudaImmaFewTokens = 64;
inline constexpr int kCudaImmaFewVariants = 3;
inline constexpr int kCudaImmaFew = 2;
// The tile kernels' weight bytes per block: enough loads in flight per SM with the blocks
// that fit beside each other, small enough that short matrices still spread; the range
// FLASHKV_CUDA_TILE_BYTES may choose from (the largest keeps dynamic shared memory under
// the 48 KiB default).
inline constexpr int kCudaTileBytes = 16384;
inline constexpr int kCudaTileMinBytes = 4096;
inline constexpr int kCudaTileMaxBytes = 36 * 1024;
// A block per tile: the looping tile kernels measured slower (docs/PERFORMANCE.md "Decode with
// shared-memory-shaped tile reads").
inline constexpr int kCudaTileBlocksPerSm = 0;
// Batches of 2 … 31 rows take the grouped expert tiles; larger ones the token-parallel and
// tensor-core kernels.
inline constexpr int kCudaMoeGroupMaxTokens = 31;
// Expert tiles of 8 pairs on the tensor cores below this many pairs per expert on average (a
// decode step of R rows routes 6·R pairs over 256 experts, so 4 takes them up to R = 170,
// where the tiles of 32 hold one or two pairs; a 64-row step of 16 Flash layers on the H100
// 69.1 → 58.8 ms with FinishRowsKernel: docs/PERFORMANCE.md "Batched decode steps: the narrow
// expert tiles measured").
inline constexpr int kCudaMoeNarrowBelow = 4;
// FloatPath::kFast takes each fp32 activation of an F16/BF16 product as two TF32 terms
// (hi = tf32(x), lo = tf32(x - hi)): the weights are exact in TF32, so only the ~2^-22
// relative rest of each activation and the tensor cores' summation order differ from the
// exact kernels (products/matmul_fast.cu).
inline constexpr int kCudaFastTerms = 2;

// `options` with every field left at -1 resolved: from its FLASHKV_CUDA_* variable where that
// is set, else the default above. The only reader of those variables; an error for an
// unknown imma variant or imma_min_tokens below 1 (explicit or from the environment).
Expected<CudaBackendOptions> CudaOptionsFromEnvironment(CudaBackendOptions options);

// One kernel's summed time while profiling (CudaBackend::ProfileTimes).
struct CudaKernelTime {
  std::string name;
  uint64_t launches = 0;
  double ms = 0;
  uint64_t bytes = 0;  // weight bytes the launches read (products only; else 0)
};

class CudaBackend final : public Backend {
 public:
  // Opens the device and creates the stream; an error when no usable GPU is present.
  static Expected<std::unique_ptr<CudaBackend>> Create(const CudaBackendOptions& options = {});
  // Devices the driver reports (0 without a driver or GPU; `why` then says what the runtime
  // answered). Cheap: no context is created, so `--backend auto` can ask before choosing.
  static int DeviceCount(std::string* why = nullptr);
  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  // "NVIDIA H200, 132 SMs, 139.8 GiB, sm_90" — for logs and benchmark records.
  std::string DeviceDescription() const;
  // Whether the device runs this build's sm_90a code, where kernels may use Hopper's
  // arch-specific instructions (device/arch.cuh), and the FLASHKV_CUDA_ARCHS it was built with.
  bool hopper_features() const;
  static std::string_view BuildArchitectures();

  Expected<DeviceBuffer> Alloc(size_t bytes) override;
  void FreeBuffer(void* data) override;
  Status Write(DevPtr<void> dst, const void* src, size_t bytes) override;
  Status Read(DevPtr<const void> src, void* dst, size_t bytes) override;
  Status Synchronize() override;
  // Asynchronous into pinned host memory (a copy stream; see backend.h), else synchronous.
  Expected<uint64_t> ReadManyAsync(const HostCopy* copies, size_t n) override;
  Status WaitCopies(uint64_t ticket) override;
  // cudaHostRegister / cudaHostUnregister; DeviceMemory is cudaMemGetInfo.
  Status PinHost(void* p, size_t bytes) override;
  void UnpinHost(void* p) override;
  // cudaHostRegister (mapped; read-only where the device supports it, so a read-only file
  // mapping qualifies) and cudaHostGetDevicePointer: kernels read the range across PCIe.
  Expected<DevPtr<const uint8_t>> MapHost(const void* p, size_t bytes) override;
  void UnmapHost(const void* p) override;
  bool ReadsPageableHost() const override;
  // Events between the op stream and an upload stream of its own.
  Expected<uint64_t> MarkOps() override;
  Expected<uint64_t> UploadAfter(uint64_t after, const HostCopy* copies, size_t n) override;
  Status WaitUpload(uint64_t ticket) override;
  std::optional<MemoryInfo> DeviceMemory() const override;
  Expected<Weight> PlaceWeight(const WeightSource& src) override;

  // One pipelined pass through the pinned staging buffers for all the copies (host ranges
  // may be pageable; pinned ones of 1 MiB or more are copied directly).
  Status ReadMany(const HostCopy* copies, size_t n) override;
  Status WriteMany(const HostCopy* copies, size_t n) override;

  // Generated on the device (backend.h; the host twin is cpu/cpu_random_weight.cpp).
  Expected<Weight> RandomWeight(const std::string& name, DType type, std::array<uint64_t, 3> ne,
                                uint64_t fill_seed, float scale) override;
  // Launches recorded so far that ran through a CUDA graph (for tests and benchmarks).
  uint64_t graph_launches() const;
  uint64_t direct_launches() const;
  // Per-kernel timing for benchmarks (turns graphs off while on); the report lists kernels
  // by total time.
  void SetProfiling(bool on);
  std::string ProfileReport(bool reset);
  // The same figures as a list, most time first.
  std::vector<CudaKernelTime> ProfileTimes(bool reset);
  // The tensor-core switch (CudaBackendOptions::imma, 0 = off) and the batch size from
  // which it is used, for later launches, so tests and benchmarks compare the kernels in
  // one process; false for an unknown variant.
  bool SetImma(int variant, int min_tokens = kCudaImmaMinTokens);
  int imma() const;
  // The narrow tiles of batches up to kCudaImmaFewTokens (CudaBackendOptions::imma_few) for
  // later launches; false for an unknown shape.
  bool SetImmaFew(int few);
  // The routed experts' kernel choice for later launches: the largest batch of the grouped
  // tiles (CudaBackendOptions::moe_group_max, 0 none) and the narrow tensor-core tiles'
  // threshold (moe_narrow, 0 never); false for a negative value.
  // grid_copies false: the tensor-core gate/up kernel keeps one copy of the IQ2 grid, as it
  // does where the device's shared memory per block is too small for its copies
  // (products/moe_imma.cu), so tests reach that path on Hopper too.
  bool SetMoeKernels(int group_max, int narrow, bool grid_copies = true);
  // CudaBackendOptions::finish_batch for later launches (tests and benchmarks).
  void SetFinishBatch(bool on);
  // CudaBackendOptions::quant_rows for later launches (tests and benchmarks).
  void SetQuantRows(bool on);
  // FloatPath::kFast: prefill chunks' F16/BF16 products on the TF32 tensor cores
  // (products/matmul_fast.cu, docs/CUDA.md "Numerics: exact and fast").
  Status SetFloatPath(FloatPath path) override;
  // The fast path with each activation as `terms` TF32 values (2: kFast's; 1: one rounding
  // of each activation, for measurements) or 0 (exact); false outside 0..2.
  bool SetFastTerms(int terms);
  int fast_terms() const;
  // On the fast path, whether the indexer scores take the tensor cores as well
  // (State::fast_indexer, on by default; off only for tests and benchmarks).
  void SetFastIndexer(bool on);
  // The switch of CudaBackendOptions::tiled for later launches (tests and benchmarks).
  void SetTiledPrefill(bool on);
  bool tiled_prefill() const;
  // With the tiled kernels on, whether the indexer scores use theirs (benchmarks; default on).
  void SetTiledIndexer(bool on);
  // The switch of CudaBackendOptions::fused for later launches (tests and benchmarks).
  void SetFused(bool on);
  bool fused() const;
  // The switch of CudaBackendOptions::pdl for later launches (tests and benchmarks).
  void SetOverlappedLaunches(bool on);
  bool overlapped_launches() const;
  // Milliseconds of one device-to-device cudaMemcpy of `bytes`, the mean of `reps` after a
  // warm-up (the bandwidth reference of the decode microbenchmark).
  Expected<double> TimeDeviceCopy(size_t bytes, int reps);

  void Fill(DevPtr<float> dst, float value, size_t n) override;
  void Copy(DevPtr<const float> src, DevPtr<float> dst, size_t n) override;
  void Add(DevPtr<const float> a, DevPtr<const float> b, DevPtr<float> out, size_t n) override;
  void EmbedRows(const Weight& table, DevPtr<const int32_t> tokens, int n_tokens, int n_copies,
                 DevPtr<float> out) override;
  void SwiGlu(DevPtr<const float> gate, DevPtr<const float> up, DevPtr<float> out, size_t n,
              float clamp) override;

  void MatMul(const Weight& w, DevPtr<const float> x, int n_tokens, DevPtr<float> y,
              ActQuantMode aq) override;
  void MatMulGrouped(const Weight& w, DevPtr<const float> x, int n_tokens, int n_groups,
                     DevPtr<float> y, ActQuantMode aq) override;

  void RmsNorm(DevPtr<const float> x, int n_rows, int n, const Weight* weight, float eps,
               DevPtr<float> out) override;
  void Rope(DevPtr<float> x, int n_rows, int n_heads, int head_dim, const RopeParams& rope,
            int64_t pos0, int64_t pos_step, bool inverse) override;
  void RopeAt(DevPtr<float> x, int n_rows, int n_heads, int head_dim, const RopeParams& rope,
              DevPtr<const int64_t> positions, bool inverse) override;
  void Fp8RoundTrip(DevPtr<float> x, int n_rows, int row_dim, int n_prefix) override;
  void HadamardFp4(DevPtr<float> x, int n_rows, int row_dim) override;
  void F16Round(DevPtr<float> x, size_t n) override;

  void HcPre(DevPtr<const float> x_hc, int n_tokens, const Weight& fn, const Weight& scale,
             const Weight& base, const HcParams& p, DevPtr<float> u, DevPtr<float> post,
             DevPtr<float> comb) override;
  void HcPost(DevPtr<const float> x_hc, DevPtr<const float> f, DevPtr<const float> post,
              DevPtr<const float> comb, int n_tokens, const HcParams& p,
              DevPtr<float> out) override;
  void HcHead(DevPtr<const float> x_hc, int n_tokens, const Weight& fn, const Weight& scale,
              const Weight& base, const HcParams& p, DevPtr<float> y) override;

  void CompressorUpdate(const CompressorArgs& a) override;
  // One-token updates of several sessions in launches of up to 7 (ops/compressor.cu).
  void CompressorUpdateBatch(const CompressorArgs* args, int n) override;
  void IndexerTopK(const IndexerArgs& a) override;
  // The score matrix IndexerTopK selects from, [n_tokens, (pos0 + n_tokens) / ratio], by the
  // kernel IndexerTopK would choose; only tokens seeing more than top_k rows, and only their
  // visible rows, are written (tests hold the kernels to each other's bits).
  void IndexerScores(const IndexerArgs& a, DevPtr<float> scores);
  void Attention(const AttentionArgs& a) override;
  // Decode rows of several sessions in one launch pair (attention/batch.cu).
  void AttentionBatch(const AttentionArgs* args, int n) override;
  void StoreWindowRows(DevPtr<const float> kv_new, int64_t pos0, int n_tokens, int n_swa,
                       int head_dim, DevPtr<float> ring) override;
  // One-row stores of several sessions in launches of up to 23 (ops/elementwise.cu).
  void StoreWindowRowsBatch(const WindowStoreArgs* args, int n, int n_swa, int head_dim) override;
  void FinishRowsBatch(const NormRopeArgs* rows, int n, bool hadamard_fp4) override;

  void RouterSelect(const RouterArgs& a) override;
  void MoeExperts(const MoeArgs& a) override;
  void CountRoutes(DevPtr<const int32_t> selected, int n, int n_expert,
                   DevPtr<uint32_t> counts) override;
  bool GatherExperts(const ExpertGather& g, DevPtr<const int32_t> selected, int n) override;

  // Coarse ops: fused kernels when fused() and the shapes fit (fused/coarse_ops.cpp), else the
  // Backend defaults over the ops above.
  void SublayerInput(const SublayerInputArgs& a) override;
  void NormRope(const NormRopeArgs& a) override;
  void MoeBlock(const MoeBlockArgs& a) override;

  // Implementation state (CUDA types), defined in cuda_state.h.
  struct State;

 private:
  explicit CudaBackend(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

}  // namespace flashkv
