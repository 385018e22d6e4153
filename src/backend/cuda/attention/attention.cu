// Attention: sink attention of every (token, head) over its visible rows (docs/DS4_MODEL.md §4.3) —
// the raw window oldest first, then the compressed rows (selected ids ascending, or all visible) —
// split into fixed chunks of kChunkRows rows of that sequence. A block scores one chunk for
// kHeadGroup heads (the query heads share the single KV head, so the rows are loaded once), keeping
// the chunk max, exp-sum and weighted row sum; a second kernel merges a token's chunks in order
// with the sink. (Merging in the partial kernel's last block of each head group, one launch
// instead of two, was measured slower: docs/PERFORMANCE.md "Decode: one-token attention".) The
// chunking is a function of the token's own row sequence, so the float order never depends on the
// batch; decoding gets one block per (chunk, head group) instead of one per head. The merge
// rescales by exp(m_c − m), so values differ from the CPU's single pass by rounding only. Prefill
// chunks (kAttnTiledMinTokens and more) take attention/tiled.cu, which forms the same terms.
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "backend/cuda/attention/blocks.cuh"
#include "backend/cuda/attention/rows.cuh"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_state.h"
#include "backend/cuda/device/common.cuh"

namespace flashkv {
namespace cuda {
namespace {

// grid (n_chunks, head groups, batch tokens): AttnPartialBlock.
__global__ void __launch_bounds__(kAttnPartialThreads) AttnPartialKernel(AttnArgs a) {
  AttnPartialBlock(a, blockIdx.x, blockIdx.y, blockIdx.z);
}

// grid (n_head, batch tokens): AttnMergeBlock.
__global__ void AttnMergeKernel(AttnArgs a) {
  AttnMergeBlock(a, blockIdx.x, blockIdx.y);
}

}  // namespace
}  // namespace cuda

void CudaBackend::Attention(const AttentionArgs& a) {
  if (a.n_tokens <= 0) return;
  const int n_chunks = cuda::AttnChunksFor(a);
  if (s_->tiled_prefill && a.n_tokens >= cuda::kAttnTiledMinTokens && a.head_dim % 32 == 0) {
    cuda::LaunchAttentionTiled(*s_, a, n_chunks);
    return;
  }
  const size_t per_token = size_t(n_chunks) * a.n_head * (size_t(a.head_dim) + 2);
  const int batch =
      int(std::max<size_t>(1, std::min<size_t>(a.n_tokens, (size_t(64) << 20) / per_token)));
  auto* partial = static_cast<float*>(
      s_->Scratch(CudaScratch::kAttnPartial, sizeof(float) * per_token * batch));
  if (partial == nullptr) return;
  const int threads = cuda::kAttnPartialThreads;
  const int groups = (a.n_head + cuda::kHeadGroup - 1) / cuda::kHeadGroup;
  const unsigned smem = cuda::AttnPartialSmem(a.head_dim);
  if (smem > 48 * 1024) {
    // The attribute is per function and device: raised once on each device this process
    // drives (several with --gpus), with that device current.
    static std::atomic<uint64_t> raised{0};
    const uint64_t bit = uint64_t(1) << (unsigned(s_->device) & 63u);
    if ((raised.load() & bit) == 0) {
      cudaSetDevice(s_->device);
      cudaFuncSetAttribute(cuda::AttnPartialKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           200 * 1024);
      raised.fetch_or(bit);
    }
  }
  for (int t0 = 0; t0 < a.n_tokens; t0 += batch) {
    const int n = std::min(batch, a.n_tokens - t0);
    cuda::AttnArgs k{};
    k.q = a.q.get();
    k.kv_new = a.kv_new.get();
    k.ring = a.ring.get();
    k.comp = a.comp_rows.get();
    k.selected = a.selected.get();
    k.sinks = reinterpret_cast<const float*>(a.sinks->data.get());
    k.partial = partial;
    k.out = a.out.get();
    k.pos0 = a.pos0;
    k.t0 = t0;
    k.n_chunks = n_chunks;
    k.n_head = a.n_head;
    k.head_dim = a.head_dim;
    k.n_swa = a.n_swa;
    k.ratio = a.ratio;
    k.top_k = a.top_k;
    k.scale = a.scale;
    s_->Launch(cuda::AttnPartialKernel, dim3(n_chunks, groups, n), dim3(threads), smem, k);
    s_->Launch(cuda::AttnMergeKernel, dim3(a.n_head, n), dim3(128),
               unsigned(2 * sizeof(float) * cuda::MergeSlots(n_chunks)), k);
  }
}

}  // namespace flashkv
