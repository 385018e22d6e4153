// The small ops (Fill, Copy, Add, SwiGlu, F16Round, EmbedRows, StoreWindowRows) and the
// device-side random weight generator used by benchmarks. Each output element is one
// independent expression, so batching cannot change a value.
#include <cstring>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_launchers.h"
#include "backend/cuda/device/quant.cuh"
#include "backend/cuda/products/kquant_launch.h"

namespace flashkv {
namespace cuda {
namespace {

constexpr int kThreads = 256;

dim3 GridFor(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return dim3(unsigned(blocks < 65535u * 16 ? blocks : 65535u * 16));
}

struct FillArgs {
  float* dst;
  float value;
  size_t n;
};
__global__ void FillKernel(FillArgs a) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < a.n;
       i += size_t(gridDim.x) * blockDim.x) {
    a.dst[i] = a.value;
  }
}

struct BinaryArgs {
  const float* a;
  const float* b;
  float* out;
  size_t n;
  float clamp;
};
__global__ void CopyKernel(BinaryArgs a) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < a.n;
       i += size_t(gridDim.x) * blockDim.x) {
    a.out[i] = a.a[i];
  }
}
__global__ void AddKernel(BinaryArgs a) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < a.n;
       i += size_t(gridDim.x) * blockDim.x) {
    a.out[i] = __fadd_rn(a.a[i], a.b[i]);
  }
}
__global__ void SwiGluKernel(BinaryArgs a) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < a.n;
       i += size_t(gridDim.x) * blockDim.x) {
    a.out[i] = ClampedSwiGlu(a.a[i], a.b[i], a.clamp);
  }
}
__global__ void F16RoundKernel(FillArgs a) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < a.n;
       i += size_t(gridDim.x) * blockDim.x) {
    a.dst[i] = __half2float(__float2half_rn(a.dst[i]));
  }
}

struct EmbedArgs {
  const uint8_t* table;  // [n_vocab, row_bytes]
  uint64_t row_bytes;
  const int32_t* tokens;  // [n_tokens]
  int n_embd;
  int n_copies;
  float* out;  // [n_tokens, n_copies, n_embd]
  const uint64_t* iq2_grid;
};
// One block per token: dequantize its row once per unit, write it to every stream.
template <DType T>
__global__ void EmbedKernel(EmbedArgs a) {
  constexpr int U = Unit<T>::kValues;
  const int t = blockIdx.x;
  const uint8_t* row = a.table + uint64_t(a.tokens[t]) * a.row_bytes;
  float* o = a.out + uint64_t(t) * a.n_copies * a.n_embd;
  for (int u = threadIdx.x; u < a.n_embd / U; u += blockDim.x) {
    float v[U];
    DequantUnit<T>(row, u, v, a.iq2_grid);
    for (int c = 0; c < a.n_copies; ++c) {
#pragma unroll
      for (int j = 0; j < U; ++j) o[uint64_t(c) * a.n_embd + u * U + j] = v[j];
    }
  }
}

struct StoreRowsArgs {
  const float* kv_new;  // [n_tokens, head_dim]
  float* ring;          // [n_swa, head_dim]
  int64_t pos0;
  int start;  // first chunk row stored
  int n_tokens;
  int n_swa;
  int head_dim;
};
__global__ void StoreRowsKernel(StoreRowsArgs a) {
  const int i = a.start + blockIdx.x;
  const int64_t slot = (a.pos0 + i) % a.n_swa;
  for (int c = threadIdx.x; c < a.head_dim; c += blockDim.x) {
    a.ring[slot * a.head_dim + c] = a.kv_new[int64_t(i) * a.head_dim + c];
  }
}

// The one-row window stores of up to kStoreSessions sessions of a step in one launch (issue
// #18), block i copying session i's row to the slot the host computed: StoreRowsKernel's copy.
struct StoreSession {
  float* slot;  // the session's ring row (pos0 % n_swa)
  int row;      // its token row in the step
};
inline constexpr int kStoreSessions = 23;  // 16 + 23 · 16 <= 384 bytes
struct StoreBatchArgs {
  const float* kv_new;  // row 0 of the step's raw rows [*, head_dim]
  int head_dim;
  int count;
  StoreSession e[kStoreSessions];
};
__global__ void StoreRowsBatchKernel(StoreBatchArgs a) {
  const StoreSession& e = a.e[blockIdx.x];
  for (int c = threadIdx.x; c < a.head_dim; c += blockDim.x) {
    e.slot[c] = a.kv_new[int64_t(e.row) * a.head_dim + c];
  }
}

// ---- random weights -------------------------------------------------------------------
__device__ __forceinline__ uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
__device__ __forceinline__ float Uniform(uint64_t seed, uint64_t i) {
  return float(SplitMix(seed ^ (i * 0x2545f4914f6cdd1dull)) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

struct RandomArgs {
  uint8_t* dst;
  uint64_t n_words;  // whole 4-byte words in the tensor (raw random bits for quant types)
  uint64_t n_tail;   // bytes after them (< 4), from one more word
  uint64_t n_values;
  uint64_t n_blocks;
  DType type;
  uint64_t seed;
  float scale;
};
__global__ void RandomBitsKernel(RandomArgs a) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < a.n_words;
       i += uint64_t(gridDim.x) * blockDim.x) {
    reinterpret_cast<uint32_t*>(a.dst)[i] = uint32_t(SplitMix(a.seed + i));
  }
  if (blockIdx.x == 0 && threadIdx.x == 0 && a.n_tail != 0) {
    const uint32_t w = uint32_t(SplitMix(a.seed + a.n_words));
    for (uint64_t k = 0; k < a.n_tail; ++k) a.dst[4 * a.n_words + k] = uint8_t(w >> (8 * k));
  }
}
__global__ void RandomValuesKernel(RandomArgs a) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < a.n_values;
       i += uint64_t(gridDim.x) * blockDim.x) {
    const float v = a.scale * Uniform(a.seed, i);
    if (a.type == DType::kF32) {
      reinterpret_cast<float*>(a.dst)[i] = v;
    } else if (a.type == DType::kF16) {
      reinterpret_cast<__half*>(a.dst)[i] = __float2half_rn(v);
    } else {
      reinterpret_cast<uint16_t*>(a.dst)[i] = uint16_t(__float_as_uint(v) >> 16);
    }
  }
}
// Rewrites each block's half scales so values are of order `scale`.
__global__ void RandomScalesKernel(RandomArgs a) {
  for (uint64_t b = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; b < a.n_blocks;
       b += uint64_t(gridDim.x) * blockDim.x) {
    const float jitter = 0.75f + 0.25f * Uniform(a.seed ^ 0xabcdefull, b);
    switch (a.type) {
      case DType::kQ8_0: {
        __half* d = reinterpret_cast<__half*>(a.dst + b * 34);
        *d = __float2half_rn(a.scale * jitter / 127.0f);
        break;
      }
      case DType::kQ2_K: {
        __half* d = reinterpret_cast<__half*>(a.dst + b * 84 + 80);
        d[0] = __float2half_rn(a.scale * jitter / 20.0f);
        d[1] = __float2half_rn(a.scale * jitter / 40.0f);
        break;
      }
      case DType::kQ4_K: {
        __half* d = reinterpret_cast<__half*>(a.dst + b * 144);
        d[0] = __float2half_rn(a.scale * jitter / 300.0f);
        d[1] = __float2half_rn(a.scale * jitter / 600.0f);
        break;
      }
      case DType::kIQ2_XXS: {
        __half* d = reinterpret_cast<__half*>(a.dst + b * 66);
        *d = __float2half_rn(a.scale * jitter / 40.0f);
        break;
      }
      default:
        break;
    }
  }
}

}  // namespace

void LaunchRandomFill(CudaBackend::State& s, uint8_t* dst, DType type, uint64_t ne0, uint64_t rows,
                      uint64_t row_bytes, uint64_t seed, float scale) {
  RandomArgs a{dst, 0, 0, ne0 * rows, 0, type, seed, scale};
  const DTypeInfo& info = GetDTypeInfo(type);
  const dim3 grid(4096), block(256);
  if (type == DType::kF32 || type == DType::kF16 || type == DType::kBF16) {
    s.Launch(RandomValuesKernel, grid, block, 0, a);
    return;
  }
  a.n_words = rows * row_bytes / 4;
  a.n_tail = rows * row_bytes % 4;
  a.n_blocks = rows * (ne0 / info.block_size);
  s.Launch(RandomBitsKernel, grid, block, 0, a);
  s.Launch(RandomScalesKernel, grid, block, 0, a);
}

}  // namespace cuda

using cuda::GridFor;

void CudaBackend::Fill(DevPtr<float> dst, float value, size_t n) {
  if (n == 0) return;
  s_->Launch(cuda::FillKernel, GridFor(n), dim3(cuda::kThreads), 0,
             cuda::FillArgs{dst.get(), value, n});
}

void CudaBackend::Copy(DevPtr<const float> src, DevPtr<float> dst, size_t n) {
  if (n == 0 || src.get() == dst.get()) return;
  s_->Launch(cuda::CopyKernel, GridFor(n), dim3(cuda::kThreads), 0,
             cuda::BinaryArgs{src.get(), nullptr, dst.get(), n, 0.0f});
}

void CudaBackend::Add(DevPtr<const float> a, DevPtr<const float> b, DevPtr<float> out, size_t n) {
  if (n == 0) return;
  s_->Launch(cuda::AddKernel, GridFor(n), dim3(cuda::kThreads), 0,
             cuda::BinaryArgs{a.get(), b.get(), out.get(), n, 0.0f});
}

void CudaBackend::SwiGlu(DevPtr<const float> gate, DevPtr<const float> up, DevPtr<float> out,
                         size_t n, float clamp) {
  if (n == 0) return;
  s_->Launch(cuda::SwiGluKernel, GridFor(n), dim3(cuda::kThreads), 0,
             cuda::BinaryArgs{gate.get(), up.get(), out.get(), n, clamp});
}

void CudaBackend::F16Round(DevPtr<float> x, size_t n) {
  if (n == 0) return;
  s_->Launch(cuda::F16RoundKernel, GridFor(n), dim3(cuda::kThreads), 0,
             cuda::FillArgs{x.get(), 0.0f, n});
}

void CudaBackend::EmbedRows(const Weight& table, DevPtr<const int32_t> tokens, int n_tokens,
                            int n_copies, DevPtr<float> out) {
  if (n_tokens <= 0) return;
  cuda::EmbedArgs a{table.data.get(), table.row_bytes, tokens.get(), int(table.ne[0]),
                    n_copies,         out.get(),       s_->iq2_grid};
  const dim3 grid(n_tokens), block(128);
  switch (table.type) {
    case DType::kF32:
      return s_->Launch(cuda::EmbedKernel<DType::kF32>, grid, block, 0, a);
    case DType::kF16:
      return s_->Launch(cuda::EmbedKernel<DType::kF16>, grid, block, 0, a);
    case DType::kBF16:
      return s_->Launch(cuda::EmbedKernel<DType::kBF16>, grid, block, 0, a);
    case DType::kQ8_0:
      return s_->Launch(cuda::EmbedKernel<DType::kQ8_0>, grid, block, 0, a);
    case DType::kQ2_K:
      return s_->Launch(cuda::EmbedKernel<DType::kQ2_K>, grid, block, 0, a);
    case DType::kQ4_K:
      return s_->Launch(cuda::EmbedKernel<DType::kQ4_K>, grid, block, 0, a);
    case DType::kIQ2_XXS:
      return s_->Launch(cuda::EmbedKernel<DType::kIQ2_XXS>, grid, block, 0, a);
    default:
      if (cuda::LaunchKQuantEmbed(*s_, table.type,
                                  {table.data.get(), table.row_bytes, tokens.get(), n_tokens,
                                   int(table.ne[0]), n_copies, out.get()}))
        return;  // products/kquant_launch.h
      s_->Fail("embed: no CUDA kernel for " + table.name);
  }
}

void CudaBackend::StoreWindowRows(DevPtr<const float> kv_new, int64_t pos0, int n_tokens, int n_swa,
                                  int head_dim, DevPtr<float> ring) {
  const int start = n_tokens > n_swa ? n_tokens - n_swa : 0;
  if (n_tokens <= start) return;
  s_->Launch(cuda::StoreRowsKernel, dim3(n_tokens - start), dim3(128), 0,
             cuda::StoreRowsArgs{kv_new.get(), ring.get(), pos0, start, n_tokens, n_swa, head_dim});
}

void CudaBackend::StoreWindowRowsBatch(const WindowStoreArgs* args, int n, int n_swa,
                                       int head_dim) {
  // One-row stores of rows of the first one's step buffer run together; the rest take
  // StoreWindowRows each (the rings are disjoint).
  const float* base = nullptr;
  cuda::StoreBatchArgs b{};
  b.head_dim = head_dim;
  auto flush = [&] {
    if (b.count > 0) s_->Launch(cuda::StoreRowsBatchKernel, dim3(b.count), dim3(128), 0, b);
    b.count = 0;
  };
  for (int i = 0; i < n; ++i) {
    const WindowStoreArgs& a = args[i];
    if (base == nullptr && a.n_tokens == 1) base = b.kv_new = a.kv_new.get();
    const int64_t d = base != nullptr ? a.kv_new.get() - base : -1;
    if (a.n_tokens != 1 || n_swa <= 0 || d < 0 || d % head_dim != 0) {
      StoreWindowRows(a.kv_new, a.pos0, a.n_tokens, n_swa, head_dim, a.ring);
      continue;
    }
    b.e[b.count++] = {a.ring.get() + (a.pos0 % n_swa) * head_dim, int(d / head_dim)};
    if (b.count == cuda::kStoreSessions) flush();
  }
  flush();
}

}  // namespace flashkv
