// AttentionBatch: the decode rows of a step's sessions (issue #18) in one launch of the
// partial kernel and one of the merge, instead of a pair per session and layer (each latency-bound:
// the grid of one token is ~40 blocks; docs/PERFORMANCE.md "Batched decode steps: per-kernel
// profile and the first batched kernels"). Each block rebuilds the
// AttnArgs that Attention() would have given its session — window ring, compressed rows,
// selection, position, chunk count, its own partial slice — and runs AttnPartialBlock /
// AttnMergeBlock, the one-token kernels' blocks, so every session's values are the bits of
// its own launch. What differs between sessions (ring, compressed rows, position, row, chunk
// count) is written to a device table by small kernels first (kernel arguments are limited
// to 384 bytes; launches keep the stream order and the launch graphs).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "backend/cuda/attention/blocks.cuh"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_state.h"

namespace flashkv {
namespace cuda {
namespace {

struct AttnSession {
  const float* ring;
  const float* comp;
  int64_t pos0;
  int row;  // the session's token row relative to the first session's
  int n_chunks;
};

inline constexpr int kTableEntries = 11;  // 8 + 8 + 352 bytes of arguments
struct AttnTableArgs {
  AttnSession* table;
  int first;
  int count;
  AttnSession e[kTableEntries];
};

__global__ void AttnTableKernel(AttnTableArgs a) {
  if (int(threadIdx.x) < a.count) a.table[a.first + threadIdx.x] = a.e[threadIdx.x];
}

struct AttnBatchArgs {
  AttnArgs base;  // the first session's, partial = the start of the slices
  const AttnSession* table;
  uint64_t partial_floats;  // one session's partial slice
};

__device__ __forceinline__ AttnArgs SessionArgs(const AttnBatchArgs& b, int i) {
  AttnArgs a = b.base;
  const AttnSession e = b.table[i];
  const int64_t q_row = int64_t(a.n_head) * a.head_dim;
  a.q = b.base.q + e.row * q_row;
  a.out = b.base.out + e.row * q_row;
  a.kv_new = b.base.kv_new + int64_t(e.row) * a.head_dim;
  if (a.selected != nullptr) a.selected = b.base.selected + int64_t(e.row) * a.top_k;
  a.ring = e.ring;
  a.comp = e.comp;
  a.pos0 = e.pos0;
  a.n_chunks = e.n_chunks;
  a.partial = b.base.partial + uint64_t(i) * b.partial_floats;
  return a;
}

// grid (most chunks, head groups, sessions).
__global__ void AttnPartialBatchKernel(AttnBatchArgs b) {
  const AttnArgs a = SessionArgs(b, blockIdx.z);
  if (int(blockIdx.x) >= a.n_chunks) return;
  AttnPartialBlock(a, blockIdx.x, blockIdx.y, 0);
}

// grid (n_head, sessions).
__global__ void AttnMergeBatchKernel(AttnBatchArgs b) {
  AttnMergeBlock(SessionArgs(b, blockIdx.y), blockIdx.x, 0);
}

// Whether b can join a's launch: one decode row each, the same layer shape, and rows of the
// same step buffers (q, kv, out, selection at one row offset).
bool Joinable(const AttentionArgs& a, const AttentionArgs& b, int* row) {
  if (b.n_tokens != 1 || b.n_head != a.n_head || b.head_dim != a.head_dim || b.n_swa != a.n_swa ||
      b.ratio != a.ratio || b.top_k != a.top_k || b.scale != a.scale || b.sinks != a.sinks ||
      bool(b.selected) != bool(a.selected) || bool(b.comp_rows) != bool(a.comp_rows)) {
    return false;
  }
  const int64_t q_row = int64_t(a.n_head) * a.head_dim;
  const int64_t dq = b.q.get() - a.q.get();
  if (dq % q_row != 0) return false;
  const int64_t r = dq / q_row;
  if (b.out.get() - a.out.get() != r * q_row) return false;
  if (b.kv_new.get() - a.kv_new.get() != r * a.head_dim) return false;
  if (a.selected && b.selected.get() - a.selected.get() != r * a.top_k) return false;
  *row = int(r);
  return true;
}

}  // namespace
}  // namespace cuda

void CudaBackend::AttentionBatch(const AttentionArgs* args, int n_args) {
  State& s = *s_;
  // Decode rows that share the first decode row's layer shape run together; the rest (prefill
  // chunks, anything else) take Attention() each — sessions never read each other's values,
  // so the order between them does not matter.
  std::vector<cuda::AttnSession> rows;
  const AttentionArgs* first = nullptr;
  int max_chunks = 0;
  for (int i = 0; i < n_args; ++i) {
    const AttentionArgs& a = args[i];
    if (a.n_tokens <= 0) continue;
    int row = 0;
    if (first == nullptr && a.n_tokens == 1) first = &a;
    if (first != nullptr && cuda::Joinable(*first, a, &row)) {
      const int n_chunks = cuda::AttnChunksFor(a);
      rows.push_back({a.ring.get(), a.comp_rows.get(), a.pos0, row, n_chunks});
      max_chunks = std::max(max_chunks, n_chunks);
    } else {
      Attention(a);
    }
  }
  if (rows.size() == 1) return Attention(*first);
  if (rows.empty()) return;
  const AttentionArgs& a = *first;
  const int n = int(rows.size());
  const uint64_t per_session = uint64_t(max_chunks) * a.n_head * (uint64_t(a.head_dim) + 2);
  auto* partial = static_cast<float*>(
      s.Scratch(CudaScratch::kAttnPartial, sizeof(float) * per_session * uint64_t(n)));
  auto* table = static_cast<cuda::AttnSession*>(
      s.Scratch(CudaScratch::kAttnTable, sizeof(cuda::AttnSession) * size_t(n)));
  if (partial == nullptr || table == nullptr) return;
  for (int i0 = 0; i0 < n; i0 += cuda::kTableEntries) {
    cuda::AttnTableArgs t{};
    t.table = table;
    t.first = i0;
    t.count = std::min(cuda::kTableEntries, n - i0);
    for (int j = 0; j < t.count; ++j) t.e[j] = rows[size_t(i0 + j)];
    s.Launch(cuda::AttnTableKernel, dim3(1), dim3(32), 0, t);
  }
  cuda::AttnBatchArgs b{};
  b.base.q = a.q.get();
  b.base.kv_new = a.kv_new.get();
  b.base.selected = a.selected.get();
  b.base.sinks = reinterpret_cast<const float*>(a.sinks->data.get());
  b.base.partial = partial;
  b.base.out = a.out.get();
  b.base.t0 = 0;
  b.base.n_head = a.n_head;
  b.base.head_dim = a.head_dim;
  b.base.n_swa = a.n_swa;
  b.base.ratio = a.ratio;
  b.base.top_k = a.top_k;
  b.base.scale = a.scale;
  b.table = table;
  b.partial_floats = per_session;
  const unsigned smem = cuda::AttnPartialSmem(a.head_dim);
  if (smem > 48 * 1024) {
    // The attribute is per function and device: raised once on each device this process
    // drives (several with --gpus), with that device current.
    static std::atomic<uint64_t> raised{0};
    const uint64_t bit = uint64_t(1) << (unsigned(s.device) & 63u);
    if ((raised.load() & bit) == 0) {
      cudaSetDevice(s.device);
      cudaFuncSetAttribute(cuda::AttnPartialBatchKernel,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
      raised.fetch_or(bit);
    }
  }
  const int groups = (a.n_head + cuda::kHeadGroup - 1) / cuda::kHeadGroup;
  s.Launch(cuda::AttnPartialBatchKernel, dim3(max_chunks, groups, n),
           dim3(cuda::kAttnPartialThreads), smem, b);
  s.Launch(cuda::AttnMergeBatchKernel, dim3(a.n_head, n), dim3(128),
           unsigned(2 * sizeof(float) * cuda::MergeSlots(max_chunks)), b);
}

}  // namespace flashkv
