// CpuBackend: the Backend on host memory. Weights are used in place from the GGUF
// mapping; ops run on a ThreadPool passed in (rows, tokens or heads are split across
// threads, never the accumulation inside one output, so results do not depend on the
// thread count). One op per file in this folder (op_*.cpp). Float operation orders follow
// ds4's CPU reference where they matter (RMSNorm sums in double, Sinkhorn, compressor
// pooling, sink attention, router), because ds4's logits are a reference.
// Must not: own policy (numerics modes, layer structure) — see backend.h.
//
// Scratch: ops that need temporaries use buffers owned by the backend that grow to the
// largest size seen and are then reused, so the per-token path does not allocate once a
// context has run one chunk of its largest size. Not thread-safe: one forward pass at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/async_copier.h"
#include "util/thread_pool.h"

namespace flashkv {

class CpuBackend : public Backend {
 public:
  // `pool` must outlive the backend; null runs everything on the calling thread.
  explicit CpuBackend(ThreadPool* pool) : pool_(pool) {}

  std::string_view name() const override { return "cpu"; }
  ThreadPool* pool() const { return pool_; }

  Expected<DeviceBuffer> Alloc(size_t bytes) override;
  void FreeBuffer(void* data) override;
  Status Write(DevPtr<void> dst, const void* src, size_t bytes) override;
  Status Read(DevPtr<const void> src, void* dst, size_t bytes) override;
  Status Synchronize() override { return Status::Ok(); }
  // On a background thread (cpu/async_copier.h).
  Expected<uint64_t> ReadManyAsync(const HostCopy* copies, size_t n) override;
  Status WaitCopies(uint64_t ticket) override;
  Expected<Weight> PlaceWeight(const WeightSource& src) override;
  // Host twin of the CUDA generator, bit for bit (cpu_random_weight.cpp).
  Expected<Weight> RandomWeight(const std::string& name, DType type, std::array<uint64_t, 3> ne,
                                uint64_t fill_seed, float scale) override;

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
  void IndexerTopK(const IndexerArgs& a) override;
  void Attention(const AttentionArgs& a) override;
  void StoreWindowRows(DevPtr<const float> kv_new, int64_t pos0, int n_tokens, int n_swa,
                       int head_dim, DevPtr<float> ring) override;

  void RouterSelect(const RouterArgs& a) override;
  void MoeExperts(const MoeArgs& a) override;

 private:
  // Runs fn(begin, end, thread) over [0, n) on the pool (or inline), at least `grain`
  // items each; thread < n_threads().
  template <typename Fn>
  void Parallel(size_t n, size_t grain, const Fn& fn);
  // HcPre/HcHead shared step: flat = RMS_1(x) [n_tokens, hc_dim], mix = flat · fnᵀ.
  void HcProject(const float* x, int n_tokens, int hc_dim, float eps, const Weight& fn, float* flat,
                 float* mix);
  int n_threads() const { return pool_ ? pool_->size() : 1; }
  // A scratch byte buffer that grows to `bytes` and keeps its storage.
  static uint8_t* Grow(std::vector<uint8_t>& buf, size_t bytes);

  ThreadPool* pool_;
  AsyncCopier copier_;
  // The bytes of every RandomWeight, freed with the backend.
  std::vector<DeviceBuffer> random_weights_;
  // Scratch, see the header comment. Grouped by the op that owns it.
  std::vector<uint8_t> grouped_out_;  // MatMulGrouped: one group's outputs [n_tokens, r]
  std::vector<uint8_t> act_q_;        // MatMul / MatMulGrouped: quantized activations
  std::vector<uint8_t> hc_flat_;      // HcPre / HcHead: normalised streams [n_tokens, hc_dim]
  std::vector<uint8_t> hc_mix_;       // HcPre / HcHead: projections [n_tokens, mix]
  std::vector<uint8_t> scores_;       // IndexerTopK: [n_rows]; Attention: per thread rows
  std::vector<uint8_t> topk_;         // IndexerTopK: [top_k] heap
  std::vector<uint8_t> idx_heads_;    // IndexerTopK: [n_heads] query pointers
  std::vector<uint8_t> idx_dots_;     // IndexerTopK: per thread [n_heads] dots
  std::vector<uint8_t> attn_rows_;    // Attention: per thread visible row pointers
  std::vector<uint8_t> moe_xq_;       // MoeExperts: [n_tokens] input rows as the dots take them
  std::vector<uint8_t> moe_mid_;      // MoeExperts: [n_tokens, n_used, n_ff]
  std::vector<uint8_t> moe_midq_;     // MoeExperts: mids as the down dots take them
  std::vector<uint8_t> moe_first_;    // MoeExperts: [n_expert + 1] slot ranges per expert
  std::vector<uint8_t> moe_order_;    // MoeExperts: [n_slots] slots grouped by expert
  std::vector<uint8_t> moe_fill_;     // MoeExperts: [n_expert] counting-sort cursors
  std::vector<uint8_t> moe_gather_;   // MoeExperts: one expert's activation rows
  std::vector<uint8_t> moe_gate_;     // MoeExperts: gate and up outputs of one expert
  std::vector<uint8_t> moe_down_;     // MoeExperts: down outputs of one expert, one slot
};

}  // namespace flashkv
