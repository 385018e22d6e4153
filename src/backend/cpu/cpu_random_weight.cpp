// CpuBackend::RandomWeight: the host twin of the CUDA generator in
// backend/cuda/ops/elementwise.cu (same SplitMix hash, same element order, same float
// expressions), so a random-weight model holds the same bytes on either backend and the
// CPU path of `--model random:...` can be tested without a GPU.
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_parallel.h"
#include "tensor/half.h"

namespace flashkv {
namespace {

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1): a 24-bit integer times 2^-23 is exact, so a fused multiply-add on the
// GPU rounds the same way as the separate operations here.
float Uniform(uint64_t seed, uint64_t i) {
  return float(SplitMix(seed ^ (i * 0x2545f4914f6cdd1dull)) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

void StoreHalf(uint8_t* p, float v) {
  const uint16_t h = F32ToF16(v);
  std::memcpy(p, &h, 2);
}

// Rewrites block b's half scales so its values are of order `scale` (as RandomScalesKernel).
void SetBlockScales(uint8_t* dst, DType type, uint64_t b, uint64_t seed, float scale) {
  const float jitter = 0.75f + 0.25f * Uniform(seed ^ 0xabcdefull, b);
  switch (type) {
    case DType::kQ8_0:
      StoreHalf(dst + b * 34, scale * jitter / 127.0f);
      break;
    case DType::kQ2_K:
      StoreHalf(dst + b * 84 + 80, scale * jitter / 20.0f);
      StoreHalf(dst + b * 84 + 82, scale * jitter / 40.0f);
      break;
    case DType::kQ4_K:
      StoreHalf(dst + b * 144, scale * jitter / 300.0f);
      StoreHalf(dst + b * 144 + 2, scale * jitter / 600.0f);
      break;
    case DType::kIQ2_XXS:
      StoreHalf(dst + b * 66, scale * jitter / 40.0f);
      break;
    default:
      break;
  }
}

}  // namespace

Expected<Weight> CpuBackend::RandomWeight(const std::string& name, DType type,
                                          std::array<uint64_t, 3> ne, uint64_t fill_seed,
                                          float scale) {
  FLASHKV_RETURN_IF_ERROR(CheckRandomWeight(name, type, ne));
  FLASHKV_ASSIGN_OR_RETURN(uint64_t row_bytes, RowBytes(type, ne[0]));
  const uint64_t rows = ne[1] * ne[2];
  const uint64_t bytes = row_bytes * rows;
  auto buffer = Alloc(bytes);
  if (!buffer.ok()) return buffer.status().WithContext(name);
  uint8_t* dst = buffer->as<uint8_t>().get();
  const uint64_t n_values = ne[0] * rows;
  constexpr size_t kGrain = 1 << 16;
  if (type == DType::kF32 || type == DType::kF16 || type == DType::kBF16) {
    Parallel(n_values, kGrain, [&](size_t begin, size_t end, int) {
      for (size_t i = begin; i < end; ++i) {
        const float v = scale * Uniform(fill_seed, i);
        if (type == DType::kF32) {
          std::memcpy(dst + 4 * i, &v, 4);
        } else if (type == DType::kF16) {
          StoreHalf(dst + 2 * i, v);
        } else {  // BF16 by truncation, as the GPU generator
          const uint16_t h = uint16_t(FloatBits(v) >> 16);
          std::memcpy(dst + 2 * i, &h, 2);
        }
      }
    });
  } else {
    // Raw random bits in 4-byte little-endian words (the tail bytes of a size that is not a
    // multiple of 4 from one more word), then valid scales over them.
    const uint64_t n_words = bytes / 4;
    Parallel(n_words, kGrain, [&](size_t begin, size_t end, int) {
      for (size_t i = begin; i < end; ++i) {
        const uint32_t w = uint32_t(SplitMix(fill_seed + i));
        std::memcpy(dst + 4 * i, &w, 4);
      }
    });
    const uint32_t tail = uint32_t(SplitMix(fill_seed + n_words));
    std::memcpy(dst + 4 * n_words, &tail, bytes - 4 * n_words);
    const uint64_t n_blocks = rows * (ne[0] / GetDTypeInfo(type).block_size);
    Parallel(n_blocks, kGrain, [&](size_t begin, size_t end, int) {
      for (size_t b = begin; b < end; ++b) SetBlockScales(dst, type, b, fill_seed, scale);
    });
  }
  Weight w;
  w.name = name;
  w.type = type;
  w.ne = ne;
  w.row_bytes = row_bytes;
  w.data = buffer->as<const uint8_t>();
  random_weights_.push_back(std::move(*buffer));
  return w;
}

}  // namespace flashkv
