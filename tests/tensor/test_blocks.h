// Random but well-formed weight rows for the tensor tests: random quant bits with sane f16
// scales (random bytes there could be NaN or huge).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"

namespace flashkv::testing {

inline void PutHalf(uint8_t* p, float v) {
  const uint16_t h = F32ToF16(v);
  std::memcpy(p, &h, 2);
}

// `rows` rows of n values of type t, row-major, RowBytes(t, n) each.
inline std::vector<uint8_t> RandomRows(DType t, int64_t rows, int64_t n, uint32_t seed) {
  const DTypeInfo& info = GetDTypeInfo(t);
  const int64_t nb = n / info.block_size;
  std::vector<uint8_t> w(static_cast<size_t>(rows * nb * info.block_bytes));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
  for (int64_t b = 0; b < rows * nb; ++b) {
    uint8_t* p = w.data() + b * info.block_bytes;
    switch (t) {
      case DType::kF32: {
        const float v = gauss(rng);
        std::memcpy(p, &v, 4);
        break;
      }
      case DType::kF16:
        PutHalf(p, gauss(rng));
        break;
      case DType::kBF16: {
        const uint16_t h = F32ToBF16(gauss(rng));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kQ8_0:
      case DType::kIQ2_XXS:
      case DType::kIQ2_XS:
      case DType::kIQ3_XXS:
      case DType::kIQ3_S:
      case DType::kIQ2_S:
      case DType::kIQ1_S:
      case DType::kIQ4_NL:
      case DType::kIQ4_XS:
        PutHalf(p, scale(rng));
        break;
      case DType::kQ2_K:
        PutHalf(p + 80, scale(rng));
        PutHalf(p + 82, scale(rng));
        break;
      case DType::kQ4_K:
        PutHalf(p, scale(rng));
        PutHalf(p + 2, scale(rng));
        break;
      case DType::kQ3_K:
        PutHalf(p + 108, scale(rng));
        break;
      case DType::kQ5_K:
        PutHalf(p, scale(rng));
        PutHalf(p + 2, scale(rng));
        break;
      case DType::kQ6_K:
        PutHalf(p + 208, scale(rng));
        break;
      case DType::kMXFP4:  // 2^(e-127) in [2^-9, 2^1]: real expert scales, no overflow
        p[0] = static_cast<uint8_t>(118 + byte(rng) % 11);
        break;
      case DType::kIQ1_M: {  // the f16 scale lives in the top nibbles of the 4 scale words
        const uint16_t h = F32ToF16(scale(rng));
        for (int k = 0; k < 4; ++k)
          p[49 + 2 * k] = static_cast<uint8_t>((p[49 + 2 * k] & 15) | (((h >> (4 * k)) & 15) << 4));
        break;
      }
      case DType::kQ8_K: {
        const float v = scale(rng);
        std::memcpy(p, &v, 4);
        break;
      }
      default:
        break;
    }
  }
  return w;
}

inline std::vector<float> RandomActivations(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = gauss(rng);
  return x;
}

}  // namespace flashkv::testing
