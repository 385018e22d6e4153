// The Backend interface: device memory, host<->device Read/Write, weight placement, and
// the op list of the DeepSeek V4 forward pass. The model (src/model/) is written once
// against this; the CPU backend implements it in src/backend/cpu/, CUDA later.
// Must not: own policy. Kernels never see layer indices, numerics modes or model names;
// they get shapes, pointers and plain numeric parameters.
//
// Design rules that let a GPU backend run a whole decode step without host round trips
// (and capture it in a graph):
// - every shape, count and offset an op needs is computable on the host from positions
//   (pos0, n_tokens) and the model shape;
// - data-dependent choices (expert top-k, indexer top-k) are produced and consumed on the
//   device side: RouterSelect/IndexerTopK write index buffers that MoeExperts/Attention read;
// - ops return nothing; a device error is sticky and reported by the next Read/Synchronize.
//
// Batching contract (chunked prefill must equal token-by-token decode bit for bit): for
// every op, the value computed for token i of a batch depends only on token i's inputs and
// on state written before the batch, in the same float operation order as for a batch of
// one. Tokens are independent rows; sequential dependencies (compressor frontier) are
// walked in token order inside the op.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "backend/device_ptr.h"
#include "backend/rope_params.h"
#include "tensor/dtype.h"
#include "util/status.h"

namespace flashkv {

// Which float arithmetic the many-token products take (docs/CUDA.md "Numerics: exact and
// fast"). kExact: every float sum in the order the CPU backend uses, so a chunked prefill
// equals token-by-token decode bit for bit. kFast: batches of kFastMinTokens rows or more
// (prefill chunks, batched decode steps of that many sessions) may take tensor-core kernels
// whose sums run in the tensor cores' order, within the tolerance docs/CUDA.md states;
// smaller steps keep the exact kernels. A backend without fast kernels refuses kFast
// (Backend::SetFloatPath).
enum class FloatPath { kExact, kFast };
inline constexpr int kFastMinTokens = 32;

// How matmul inputs are fed to quantized weights. kQ8 is ds4's CPU scheme: Q8_0 per 32
// for Q8_0 weights, Q8_K per 256 for k-quant/IQ experts; F16/F32 weights always take fp32.
enum class ActQuantMode { kOff, kQ8 };

// A weight tensor placed on the device. GGML layout: ne[0] is the contiguous input
// dimension, ne[1] rows (outputs), ne[2] experts (3-D expert stacks), unused dims = 1.
struct Weight {
  std::string name;
  DType type = DType::kF32;
  std::array<uint64_t, 3> ne = {1, 1, 1};
  uint64_t row_bytes = 0;  // bytes of one ne[0]-row
  DevPtr<const uint8_t> data;
  // A 3-D expert stack whose experts are not one block (routed experts kept in host memory
  // behind a device cache, model/expert_cache.h): a backend array of ne[2] addresses, expert
  // e's matrix at experts[e]; `data` is then null. Every kernel that takes an expert stack
  // reads through it when set, so the bytes, not the code, decide where an expert lives.
  DevPtr<const uint8_t* const> experts;

  bool present() const { return static_cast<bool>(data) || static_cast<bool>(experts); }
  uint64_t in_dim() const { return ne[0]; }
  uint64_t out_dim() const { return ne[1]; }
  // Bytes of one [ne[1], ne[0]] matrix (one expert of a 3-D stack).
  uint64_t matrix_bytes() const { return row_bytes * ne[1]; }
};

// Where a weight's bytes come from on the host (the GGUF mapping).
struct WeightSource {
  std::string name;
  DType type;
  std::array<uint64_t, 3> ne;
  const uint8_t* host_data;
  uint64_t nbytes;
};

// Hyper-connection constants (docs/DS4_MODEL.md §3).
struct HcParams {
  int n_hc;            // streams
  int n_embd;          // width of one stream
  int sinkhorn_iters;  // T
  float norm_eps;      // eps of the unweighted RMSNorm over the flattened streams
  float hc_eps;        // eps added to pre / comb and inside Sinkhorn
};

// Compressor frontier update (docs/DS4_MODEL.md §4.4). Rows: state holds [c·ratio, c·d_c] in ds4's
// layout; with overlap, rows 0..ratio-1 are the previous window, ratio..2·ratio-1 the open
// one; without, rows 0..ratio-1 are the open window. Scores are stored with ape added.
struct CompressorArgs {
  DevPtr<const float> kv;     // [n_tokens, c·d_c] this chunk's kv projections
  DevPtr<const float> score;  // [n_tokens, c·d_c] this chunk's gate projections (no ape)
  const Weight* ape;          // [c·d_c, ratio] position bias (F16/F32)
  DevPtr<float> state_kv;     // [c·ratio, c·d_c]
  DevPtr<float> state_score;  // [c·ratio, c·d_c]
  DevPtr<float> rows;         // [cap, d_c] compressed rows; row w = window w
  int64_t pos0;               // absolute position of token 0 of the chunk
  int n_tokens;
  int ratio;
  bool overlap;  // c = 2 (CSA) or 1 (HCA)
  int d_c;
};

// Lightning indexer selection (docs/DS4_MODEL.md §4.5).
struct IndexerArgs {
  DevPtr<const float> q;        // [n_tokens, n_heads, dim] rotated (and QAT'd) queries
  DevPtr<const float> weights;  // [n_tokens, n_heads] head weight projections
  float weight_scale;           // multiplies every head weight ((n_heads·dim)^-1/2)
  DevPtr<const float> rows;     // [n_rows, dim] indexer compressed rows
  DevPtr<int32_t> selected;     // [n_tokens, top_k] out: ascending row ids, -1 padded
  int64_t pos0;
  int n_tokens;
  int n_heads;
  int dim;
  int ratio;
  int top_k;
};

// Sink attention over the raw window, compressed rows and a sink logit (docs/DS4_MODEL.md §4.3).
struct AttentionArgs {
  DevPtr<const float> q;           // [n_tokens, n_head, head_dim]
  DevPtr<const float> kv_new;      // [n_tokens, head_dim] this chunk's raw rows
  DevPtr<const float> ring;        // [n_swa, head_dim] raw rows of earlier positions;
                                   //   position p lives in slot p % n_swa
  DevPtr<const float> comp_rows;   // [*, head_dim] compressed rows (may be null if ratio 0)
  DevPtr<const int32_t> selected;  // [n_tokens, top_k] indexer choice; null = all visible
  const Weight* sinks;             // [n_head] F32
  DevPtr<float> out;               // [n_tokens, n_head, head_dim]
  int64_t pos0;
  int n_tokens;
  int n_head;
  int head_dim;
  int n_swa;
  int ratio;    // 0: no compressed rows
  int top_k;    // width of `selected`
  float scale;  // 1/sqrt(head_dim)
};

// One session's window store of a step (StoreWindowRows' arguments but the shape).
struct WindowStoreArgs {
  DevPtr<const float> kv_new;  // [n_tokens, head_dim]
  int64_t pos0;
  int n_tokens;
  DevPtr<float> ring;  // [n_swa, head_dim]
};

// Expert routing (docs/DS4_MODEL.md §5 steps 1-3).
struct RouterArgs {
  DevPtr<const float> logits;    // [n_tokens, n_expert] router projections
  const Weight* bias;            // [n_expert] selection-only bias, or null
  const Weight* tid2eid;         // [n_used, n_vocab] I32 hash table, or null (top-k)
  DevPtr<const int32_t> tokens;  // [n_tokens] input ids (hash routing)
  DevPtr<int32_t> selected;      // [n_tokens, n_used] out
  DevPtr<float> weights;         // [n_tokens, n_used] out: normalised × scale
  int n_tokens;
  int n_expert;
  int n_used;
  float weight_scale;  // routed scaling factor ρ
};

// Routed experts (docs/DS4_MODEL.md §5 steps 4-5, without the shared expert).
struct MoeArgs {
  DevPtr<const float> x;           // [n_tokens, n_embd]
  DevPtr<const int32_t> selected;  // [n_tokens, n_used]
  DevPtr<const float> weights;     // [n_tokens, n_used]
  const Weight* gate;              // [n_embd, n_ff, n_expert]
  const Weight* up;                // [n_embd, n_ff, n_expert]
  const Weight* down;              // [n_ff, n_embd, n_expert]
  DevPtr<float> out;               // [n_tokens, n_embd]
  int n_tokens;
  int n_used;
  float clamp;  // SwiGLU limit λ (<= 0: none)
  ActQuantMode act_quant;
};

// ---- coarse ops: argument blocks ---------------------------------------------------
// Chains of the fine ops below that a backend may run as fewer, larger kernels (see the
// Backend section "coarse ops" and docs/CUDA.md "How to add a fusion").

// One projection of a sublayer's normalised input: y = W xn.
struct InputProjection {
  const Weight* w = nullptr;
  DevPtr<float> y;  // [n_tokens, w->ne[1]]
};
inline constexpr int kMaxInputProjections = 4;

// SublayerInput: u, post, comb = HC_pre(x_hc); xn = RMSNorm(u) · norm; y_i = W_i xn.
struct SublayerInputArgs {
  DevPtr<const float> x_hc;  // [n_tokens, n_hc·n_embd]
  int n_tokens = 0;
  const Weight* hc_fn = nullptr;  // HcPre's fn, scale and base
  const Weight* hc_scale = nullptr;
  const Weight* hc_base = nullptr;
  HcParams hc{};
  const Weight* norm = nullptr;  // [n_embd] F32
  float eps = 0;
  DevPtr<float> u;     // [n_tokens, n_embd]
  DevPtr<float> post;  // [n_tokens, n_hc]
  DevPtr<float> comb;  // [n_tokens, n_hc·n_hc]
  DevPtr<float> xn;    // [n_tokens, n_embd]
  std::array<InputProjection, kMaxInputProjections> proj{};
  int n_proj = 0;
  ActQuantMode aq = ActQuantMode::kOff;
};

// NormRope, in place on x [n_rows, n_heads, head_dim], per (row, head): RMSNorm (· weight),
// RoPE at position pos0 + r·pos_step (or positions[r]), the FP8 round trip of dims
// [0, fp8_prefix) (0: none), then F16 rounding of the whole head (f16_round).
struct NormRopeArgs {
  DevPtr<float> x;
  int n_rows = 0;
  int n_heads = 1;
  int head_dim = 0;
  const Weight* weight = nullptr;  // [head_dim] F32, or null
  float eps = 0;
  RopeParams rope{};
  int64_t pos0 = 0;
  int64_t pos_step = 1;
  // [n_rows] each row's own position (the rows of several sessions of one step), used
  // instead of pos0 + r·pos_step when set.
  DevPtr<const int64_t> positions;
  int fp8_prefix = 0;
  bool f16_round = false;
};

// Routed experts in host memory (model/expert_cache.h), small steps: after routing, the
// chosen experts whose gate-table entries point outside [device_lo, device_hi) are copied
// into `scratch` (slots of slot_bytes, parts at part_offset) and the experts' products read
// `out_tables`, where those entries point at the copies (the rest as in `tables`). A GPU
// copies with every SM at about the host link's rate — 50 GB/s on the H100's PCIe Gen5,
// where the product kernels' own reads across it reach 25 (docs/PERFORMANCE.md "Decode
// misses gathered"). The same bytes are read: the same bits. More distinct misses than
// `slots` are read in place.
struct ExpertGather {
  DevPtr<const uint8_t* const> tables;  // [3][n_expert] the layer's gate, up, down entries
  DevPtr<const uint8_t*> out_tables;    // [3][n_expert] rewritten by each gather
  DevPtr<int32_t> plan;                 // [1 + slots] scratch: how many, then which experts
  const uint8_t* device_lo = nullptr;   // entries in [device_lo, device_hi) are on the device
  const uint8_t* device_hi = nullptr;
  DevPtr<uint8_t> scratch;
  int slots = 0;
  int n_expert = 0;
  uint64_t slot_bytes = 0;
  uint64_t part_offset[3] = {0, 0, 0};  // gate, up, down within a slot
  uint64_t part_bytes[3] = {0, 0, 0};   // one expert's matrix of each
};

// MoeBlock: the FFN after its input (docs/DS4_MODEL.md §5). logits = W_router x; the
// router's choice (RouterSelect) into selected / weights; routed = the chosen experts
// (MoeExperts); the shared expert's gate / up / mid; f = routed + W2_s mid; then
// out = HC_post(x_hc, f, post, comb).
struct MoeBlockArgs {
  DevPtr<const float> x;  // [n_tokens, n_embd] the normalised FFN input
  int n_tokens = 0;
  ActQuantMode aq = ActQuantMode::kOff;
  // Routing (RouterArgs): bias and tid2eid may be null.
  const Weight* router = nullptr;  // [n_embd, n_expert]
  const Weight* router_bias = nullptr;
  const Weight* tid2eid = nullptr;
  DevPtr<const int32_t> tokens;  // [n_tokens] input ids (hash routing)
  DevPtr<float> logits;          // [n_tokens, n_expert]
  DevPtr<int32_t> selected;      // [n_tokens, n_used]
  DevPtr<float> weights;         // [n_tokens, n_used]
  int n_used = 0;
  float weight_scale = 1;
  // Routed experts (MoeArgs).
  const Weight* gate = nullptr;  // [n_embd, n_ff, n_expert]
  const Weight* up = nullptr;
  const Weight* down = nullptr;  // [n_ff, n_embd, n_expert]
  float clamp = 0;               // SwiGLU limit λ, routed and shared
  DevPtr<float> routed;          // [n_tokens, n_embd]
  // Shared expert.
  const Weight* shared_gate = nullptr;  // [n_embd, n_ff_shared]
  const Weight* shared_up = nullptr;
  const Weight* shared_down = nullptr;  // [n_ff_shared, n_embd]
  DevPtr<float> shared_gate_out;        // [n_tokens, n_ff_shared]
  DevPtr<float> shared_up_out;          // [n_tokens, n_ff_shared]
  DevPtr<float> shared_mid;             // [n_tokens, n_ff_shared]
  DevPtr<float> f;                      // [n_tokens, n_embd] routed + shared
  // HC_post.
  DevPtr<const float> x_hc;  // [n_tokens, n_hc·n_embd]
  DevPtr<const float> post;  // [n_tokens, n_hc]
  DevPtr<const float> comb;  // [n_tokens, n_hc·n_hc]
  HcParams hc{};
  DevPtr<float> out;  // [n_tokens, n_hc·n_embd], must not alias x_hc
  // Copy the chosen experts from host memory first (GatherExperts); null: read in place.
  const ExpertGather* gather = nullptr;
};

// A device range and a host range of the same size (ReadMany / WriteMany).
struct HostCopy {
  DevPtr<void> device;
  void* host;
  size_t bytes;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // The float path of the ops queued after the call (FloatPath). The default takes kExact
  // only: a backend with fast kernels overrides it, and every other one says so.
  virtual Status SetFloatPath(FloatPath path);

  // ---- memory --------------------------------------------------------------------
  // Zero-filled allocation.
  virtual Expected<DeviceBuffer> Alloc(size_t bytes) = 0;
  // Called by DeviceBuffer's destructor only.
  virtual void FreeBuffer(void* data) = 0;
  virtual Status Write(DevPtr<void> dst, const void* src, size_t bytes) = 0;
  virtual Status Read(DevPtr<const void> src, void* dst, size_t bytes) = 0;
  // Many transfers in one call, so a GPU backend can pipeline them through pinned staging
  // (a snapshot moves a few hundred sections). The defaults loop over Read / Write.
  virtual Status ReadMany(const HostCopy* copies, size_t n);
  virtual Status WriteMany(const HostCopy* copies, size_t n);
  // Copies device ranges to host memory without making the caller wait: the copies see
  // every op queued before the call and run while later ops execute, so the device ranges
  // must not be written by those later ops (a snapshot copies only rows that decoding
  // never rewrites) and the host ranges must stay valid until the copies are waited for.
  // Returns a ticket for WaitCopies (never 0). A GPU backend copies asynchronously only
  // into page-locked memory (PinHost) and synchronously otherwise; the CPU backend copies
  // on a background thread. The default copies synchronously (ReadMany).
  virtual Expected<uint64_t> ReadManyAsync(const HostCopy* copies, size_t n);
  // Blocks until the copies of `ticket` are done, and reports their error. Any thread may
  // call it; waiting for a ticket that was already waited for returns at once.
  virtual Status WaitCopies(uint64_t ticket);
  // Waits for queued ops; reports a sticky device error.
  virtual Status Synchronize() = 0;
  // Page-locks the host range [p, p + bytes) so that transfers to and from it go straight
  // to the copy engine (a GPU backend's Read/Write/ReadMany/WriteMany then skip their
  // staging copies); until UnpinHost(p), which must come before the memory is freed. The
  // defaults do nothing: a backend whose memory is the host's moves bytes with memcpy. An
  // error leaves the range usable, only slower.
  virtual Status PinHost(void* p, size_t bytes);
  virtual void UnpinHost(void* p);
  // The address at which kernels read the host range [p, p + bytes) in place (a GPU reads
  // it across the host link, page-locked and mapped read-only; the CPU backend returns p).
  // Undone by UnmapHost(p) before the memory goes. Used for routed experts that stay in
  // host memory (model/expert_cache.h). Unsupported where the device cannot read host
  // memory; an error leaves nothing mapped.
  virtual Expected<DevPtr<const uint8_t>> MapHost(const void* p, size_t bytes);
  virtual void UnmapHost(const void* p);
  // Whether kernels can read ordinary pageable host memory — a file's shared mapping whose
  // pages the kernel may evict and read back from disk — at its own address, with nothing
  // page-locked: a backend whose memory is the host's always; a GPU where the driver gives
  // it pageable memory access (HMM, or ATS on coherent hosts). The expert cache reads the
  // GGUF's routed experts that way when host RAM cannot hold them page-locked
  // (model/expert_cache.h, ExpertCacheOptions::pageable_host).
  virtual bool ReadsPageableHost() const { return true; }
  // Uploads beside the ops (the expert cache's prefill staging, model/expert_cache.h).
  // MarkOps: a point in the op stream, after every op queued so far (a ticket, never 0).
  // UploadAfter: host → device copies (host ranges page-locked: MapHost or PinHost) that start
  // once the ops before mark `after` are done (0: at once) and overlap later ops; nothing
  // queued before WaitUpload(ticket) may read the device ranges. WaitUpload: ops queued after
  // it wait, on the device, for that upload. Each ticket is used once. The defaults copy at
  // once in op order (WriteMany), which is the same for a backend that runs ops as called.
  virtual Expected<uint64_t> MarkOps();
  virtual Expected<uint64_t> UploadAfter(uint64_t after, const HostCopy* copies, size_t n);
  virtual Status WaitUpload(uint64_t ticket);
  // Free and total bytes of the memory Alloc draws from, when it is the backend's own (a
  // GPU's); nullopt when the backend allocates host memory.
  struct MemoryInfo {
    uint64_t free_bytes = 0;
    uint64_t total_bytes = 0;
  };
  virtual std::optional<MemoryInfo> DeviceMemory() const;
  // Places a weight on the device. The CPU backend uses the host bytes in place (they
  // must outlive the backend's use of the Weight).
  virtual Expected<Weight> PlaceWeight(const WeightSource& src) = 0;
  // A weight whose bytes the backend generates itself (for random-weight models such as
  // `--model random:flash`, whose 81 GB file would not fit a disk): valid blocks of `type`
  // (every scale finite; quant codes uniform random bits; float values uniform in
  // [-scale, scale)), a pure function of (type, ne, fill_seed, scale) that every backend
  // computes bit for bit the same. The backend owns the bytes until it is destroyed.
  // Types: F32, F16, BF16, Q8_0, Q2_K, Q4_K, IQ2_XXS; ne[0] a multiple of the block size.
  virtual Expected<Weight> RandomWeight(const std::string& name, DType type,
                                        std::array<uint64_t, 3> ne, uint64_t fill_seed,
                                        float scale) = 0;

  // ---- elementwise / small ---------------------------------------------------------
  // dst[i] = value for i < n.
  virtual void Fill(DevPtr<float> dst, float value, size_t n) = 0;
  virtual void Copy(DevPtr<const float> src, DevPtr<float> dst, size_t n) = 0;
  // out[i] = a[i] + b[i]; out may alias a or b.
  virtual void Add(DevPtr<const float> a, DevPtr<const float> b, DevPtr<float> out, size_t n) = 0;
  // out[t, s, :] = dequant(table row tokens[t]) for s < n_copies. table: [n_embd, n_vocab].
  // out: [n_tokens, n_copies, n_embd]. Token ids are checked by the caller.
  virtual void EmbedRows(const Weight& table, DevPtr<const int32_t> tokens, int n_tokens,
                         int n_copies, DevPtr<float> out) = 0;
  // out = silu(min(gate, λ)) · clamp(up, −λ, λ), n values; λ <= 0 disables clamping.
  virtual void SwiGlu(DevPtr<const float> gate, DevPtr<const float> up, DevPtr<float> out, size_t n,
                      float clamp) = 0;

  // ---- projections -----------------------------------------------------------------
  // y[t, :] = W x[t, :]. x: [n_tokens, w.ne[0]], y: [n_tokens, w.ne[1]].
  virtual void MatMul(const Weight& w, DevPtr<const float> x, int n_tokens, DevPtr<float> y,
                      ActQuantMode aq) = 0;
  // Block-diagonal grouped projection: W is [in_g, n_groups·r]; group j maps
  // x[t, j·in_g : (j+1)·in_g] with rows j·r … (j+1)·r−1. x: [n_tokens, n_groups·in_g],
  // y: [n_tokens, n_groups·r].
  virtual void MatMulGrouped(const Weight& w, DevPtr<const float> x, int n_tokens, int n_groups,
                             DevPtr<float> y, ActQuantMode aq) = 0;

  // ---- norms, rope, numerics simulation --------------------------------------------
  // out[r, :] = x[r, :] / sqrt(mean(x[r, :]²) + eps) (· weight if given, F32 [n]).
  // The sum of squares is accumulated in double (ds4). out may alias x.
  virtual void RmsNorm(DevPtr<const float> x, int n_rows, int n, const Weight* weight, float eps,
                       DevPtr<float> out) = 0;
  // Interleaved RoPE on the trailing rope.n_rot channels of each [head_dim] head, angles
  // as rope_params.h defines them. x: [n_rows, n_heads, head_dim]; row r sits at position
  // pos0 + r·pos_step; inverse rotates by −angle.
  virtual void Rope(DevPtr<float> x, int n_rows, int n_heads, int head_dim, const RopeParams& rope,
                    int64_t pos0, int64_t pos_step, bool inverse) = 0;
  // Rope with row r at positions[r] ([n_rows] on the device): the rows of several sessions of
  // one step in one call, each row with the values Rope gives it at its position.
  virtual void RopeAt(DevPtr<float> x, int n_rows, int n_heads, int head_dim,
                      const RopeParams& rope, DevPtr<const int64_t> positions, bool inverse) = 0;
  // FP8 E4M3 round trip of x[r, 0:n_prefix] in 64-wide blocks with a power-of-two scale
  // (ds4 / official KV simulation). x: [n_rows, row_dim].
  virtual void Fp8RoundTrip(DevPtr<float> x, int n_rows, int row_dim, int n_prefix) = 0;
  // Walsh–Hadamard over each row (row_dim a power of two), scaled 1/sqrt(row_dim), then an
  // FP4 e2m1 round trip in 32-blocks with a power-of-two scale (indexer QAT).
  virtual void HadamardFp4(DevPtr<float> x, int n_rows, int row_dim) = 0;
  // x[i] = f32(f16(x[i])) for i < n (round to nearest even).
  virtual void F16Round(DevPtr<float> x, size_t n) = 0;

  // ---- hyper-connections -----------------------------------------------------------
  // HC_pre (docs/DS4_MODEL.md §3): from x_hc [n_tokens, n_hc·n_embd] computes the sublayer input
  // u [n_tokens, n_embd], post [n_tokens, n_hc] and comb [n_tokens, n_hc·n_hc] (row j =
  // source stream, column k = destination). fn: [n_hc·n_embd, (2+n_hc)·n_hc]; scale [3];
  // base [(2+n_hc)·n_hc].
  virtual void HcPre(DevPtr<const float> x_hc, int n_tokens, const Weight& fn, const Weight& scale,
                     const Weight& base, const HcParams& p, DevPtr<float> u, DevPtr<float> post,
                     DevPtr<float> comb) = 0;
  // HC_post: out[k] = post_k · f + Σ_j comb[j,k] · x_hc[j]. out must not alias x_hc.
  virtual void HcPost(DevPtr<const float> x_hc, DevPtr<const float> f, DevPtr<const float> post,
                      DevPtr<const float> comb, int n_tokens, const HcParams& p,
                      DevPtr<float> out) = 0;
  // HC_head: y = Σ_j (σ(scale·(fn·μ)_j + base_j) + hc_eps) · x_hc[j]. fn: [n_hc·n_embd,
  // n_hc]; scale [1]; base [n_hc]. y: [n_tokens, n_embd].
  virtual void HcHead(DevPtr<const float> x_hc, int n_tokens, const Weight& fn, const Weight& scale,
                      const Weight& base, const HcParams& p, DevPtr<float> y) = 0;

  // ---- attention pieces ------------------------------------------------------------
  // Feeds a chunk's kv/score projections through the compressor frontier in token order
  // and writes the pooled (un-normalised) row of every window the chunk closes to
  // rows[w], w = window index. Normalisation, RoPE and rounding of those rows are
  // separate ops run by the caller on the host-computable range of new rows.
  virtual void CompressorUpdate(const CompressorArgs& a) = 0;
  // The compressor updates of several sessions' chunks of one step (distinct states), each
  // with the values CompressorUpdate(args[i]) gives it; a backend may run them together.
  virtual void CompressorUpdateBatch(const CompressorArgs* args, int n) {
    for (int i = 0; i < n; ++i) CompressorUpdate(args[i]);
  }
  // Scores visible indexer rows for every token and writes its top-k row ids (lowest id
  // wins ties), ascending; a token that sees <= top_k rows selects all of them.
  virtual void IndexerTopK(const IndexerArgs& a) = 0;
  // One softmax per (token, head) over the visible raw rows (oldest first), then the
  // visible compressed rows (ascending), plus the sink logit in the denominator.
  virtual void Attention(const AttentionArgs& a) = 0;
  // The attention of several sessions' chunks of one step (Model::ForwardBatch), each with
  // the values Attention(args[i]) gives it; a backend may run them together. Default: in
  // order. (A pointer and a count: the CUDA sources are C++17.)
  virtual void AttentionBatch(const AttentionArgs* args, int n) {
    for (int i = 0; i < n; ++i) Attention(args[i]);
  }
  // Stores a chunk's raw rows into the window ring: row i (position pos0 + i) goes to
  // slot (pos0 + i) % n_swa; only the last n_swa positions are written.
  virtual void StoreWindowRows(DevPtr<const float> kv_new, int64_t pos0, int n_tokens, int n_swa,
                               int head_dim, DevPtr<float> ring) = 0;
  // The window stores of several sessions' chunks of one step (distinct rings), each as
  // StoreWindowRows would do it; a backend may run them together.
  virtual void StoreWindowRowsBatch(const WindowStoreArgs* args, int n, int n_swa, int head_dim) {
    for (int i = 0; i < n; ++i) {
      const WindowStoreArgs& a = args[i];
      StoreWindowRows(a.kv_new, a.pos0, a.n_tokens, n_swa, head_dim, a.ring);
    }
  }

  // The rows several sessions' compressors closed in one step (model/compressor.cpp
  // FinishRows): for each entry NormRope(rows[i]) (n_rows may be 0), then with `hadamard_fp4`
  // HadamardFp4 and F16Round of its rows (official numerics' indexer rows). The entries share
  // all but x, n_rows and pos0. A backend may run them together; the default runs them in
  // order, entry by entry.
  virtual void FinishRowsBatch(const NormRopeArgs* rows, int n, bool hadamard_fp4);

  // ---- mixture of experts ----------------------------------------------------------
  virtual void RouterSelect(const RouterArgs& a) = 0;
  virtual void MoeExperts(const MoeArgs& a) = 0;
  // counts[selected[i]] += 1 for i < n (the routing frequency an expert cache keeps,
  // model/expert_cache.h); ids outside [0, n_expert) are not counted.
  // The default reads both back, counts on the host and writes the counts (the order of
  // ops is kept); a GPU backend runs it as a kernel.
  virtual void CountRoutes(DevPtr<const int32_t> selected, int n, int n_expert,
                           DevPtr<uint32_t> counts);
  // ExpertGather for the n ids in `selected` (after the router wrote them): true when the
  // copies and g.out_tables are queued, so the experts' products may read out_tables. The
  // default returns false: a backend whose memory is the host's reads the experts in place.
  virtual bool GatherExperts(const ExpertGather& g, DevPtr<const int32_t> selected, int n);

  // ---- coarse ops (fusion points) ----------------------------------------------------
  // Each is a fixed chain of the fine ops above. The defaults (backend/coarse_ops.cpp) run
  // exactly that chain, so a backend that does not fuse computes what it computed before;
  // one that overrides an op runs it as fewer, larger kernels and must leave every output
  // buffer the chain writes with the bits its own fine ops would give (the chain is the
  // reference, and the batching contract holds for it). Scratch that only the fine ops see
  // (quantized activations) is the backend's. The model calls these, never the chain.
  //
  // HC_pre → RMSNorm → the projections of the normalised input (attention: q_a and kv).
  virtual void SublayerInput(const SublayerInputArgs& a);
  // RMSNorm → RoPE → FP8 → F16 of head rows (queries, raw KV rows, compressed rows).
  virtual void NormRope(const NormRopeArgs& a);
  // Router → routed experts → shared expert → sum → HC_post (the FFN after its input).
  virtual void MoeBlock(const MoeBlockArgs& a);

 protected:
  // RandomWeight's argument check, shared by the implementations: a supported type, ne[0]
  // a whole number of blocks, no zero dimension. Errors name the weight.
  static Status CheckRandomWeight(const std::string& name, DType type,
                                  const std::array<uint64_t, 3>& ne);
};

}  // namespace flashkv
