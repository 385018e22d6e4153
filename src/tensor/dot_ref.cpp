// Scalar reference kernels. DotQ8 transcribes the arithmetic of ds4.c's x86 (non-NEON) CPU
// kernels and GGML's generic Q4_K kernel; this file is compiled with -ffp-contract=off (see
// CMakeLists.txt) so no multiply-add is fused, as in ds4's strict IEEE reference build.
#include "tensor/dot_ref.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "tensor/half.h"
#include "tensor/iq2_tables.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_internal.h"

namespace flashkv::ref {
namespace {

using internal::LoadFloat;
using internal::LoadHalf;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

float DotQ8_0(const uint8_t* w, const BlockQ8_0Act* x, int64_t n) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockQ8_0);
    const int8_t* qs = reinterpret_cast<const int8_t*>(blk + 2);
    int32_t isum = 0;
    for (int i = 0; i < kQK8_0; ++i) isum += static_cast<int32_t>(qs[i]) * x[b].qs[i];
    acc += LoadHalf(blk) * x[b].d * static_cast<float>(isum);
  }
  return acc;
}

float DotQ2_K(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockQ2_K);
    const uint8_t* sc = blk;
    const uint8_t* q2 = blk + 16;
    const int8_t* q8 = y[b].qs;
    int summs = 0;
    for (int j = 0; j < 16; ++j) summs += y[b].bsums[j] * (sc[j] >> 4);
    const float dall = y[b].d * LoadHalf(blk + 80);
    const float dmin = y[b].d * LoadHalf(blk + 82);
    int isum = 0;
    int is = 0;
    for (int h = 0; h < 2; ++h) {
      for (int s = 0; s < 4; ++s) {
        for (int part = 0; part < 2; ++part) {
          int sub = 0;
          for (int l = 0; l < 16; ++l)
            sub += q8[16 * part + l] * ((q2[16 * part + l] >> (2 * s)) & 3);
          isum += (sc[is++] & 15) * sub;
        }
        q8 += 32;
      }
      q2 += 32;
    }
    sumf += dall * static_cast<float>(isum) - dmin * static_cast<float>(summs);
  }
  return sumf;
}

float DotIQ2_XXS(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockIQ2_XXS);
    const float d = LoadHalf(blk) * y[b].d;
    const int8_t* q8 = y[b].qs;
    int32_t bsum = 0;
    for (int g = 0; g < 8; ++g) {
      uint32_t a, s;
      std::memcpy(&a, blk + 2 + 8 * g, 4);
      std::memcpy(&s, blk + 2 + 8 * g + 4, 4);
      const int32_t ls = static_cast<int32_t>(2 * (s >> 28) + 1);
      int32_t sumi = 0;
      for (int k = 0; k < 4; ++k) {
        const uint64_t grid = kIq2xxsGrid[(a >> (8 * k)) & 0xff];
        const uint8_t signs = kIq2Signs[(s >> (7 * k)) & 127];
        for (int j = 0; j < 8; ++j) {
          const int32_t mag = static_cast<int32_t>((grid >> (8 * j)) & 0xff);
          sumi += ((signs >> j) & 1 ? -mag : mag) * q8[j];
        }
        q8 += 8;
      }
      bsum += sumi * ls;
    }
    sumf += d * static_cast<float>(bsum);
  }
  return 0.125f * sumf;
}

float DotQ4_K(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  float sums[8] = {};
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockQ4_K);
    const uint8_t* scales = blk + 4;
    const uint8_t* q4 = blk + 16;
    int8_t a[kQK_K];
    for (int p = 0; p < 4; ++p)
      for (int l = 0; l < 32; ++l) {
        a[64 * p + l] = static_cast<int8_t>(q4[32 * p + l] & 15);
        a[64 * p + 32 + l] = static_cast<int8_t>(q4[32 * p + l] >> 4);
      }
    int sc[8], mn[8];
    for (int g = 0; g < 8; ++g) internal::Q4KScaleMin(scales, g, &sc[g], &mn[g]);
    int sumi = 0;
    for (int j = 0; j < 16; ++j) sumi += y[b].bsums[j] * mn[j / 2];
    int32_t lanes[8] = {};
    for (int i = 0; i < kQK_K; ++i) lanes[i % 8] += sc[i / 32] * (y[b].qs[i] * a[i]);
    const float d = LoadHalf(blk) * y[b].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(lanes[l]);
    const float dmin = LoadHalf(blk + 2) * y[b].d;
    sumf -= dmin * static_cast<float>(sumi);
  }
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

float DotQ8_K(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * sizeof(BlockQ8_K);
    const int8_t* qs = reinterpret_cast<const int8_t*>(blk + 4);
    int32_t isum = 0;
    for (int i = 0; i < kQK_K; ++i) isum += static_cast<int32_t>(qs[i]) * y[b].qs[i];
    acc += LoadFloat(blk) * y[b].d * static_cast<float>(isum);
  }
  return acc;
}

}  // namespace

float DotF32(DType wtype, const void* wrow, const float* x, int64_t n) {
  const uint8_t* w = static_cast<const uint8_t*>(wrow);
  double acc = 0.0;
  switch (wtype) {
    case DType::kF32:
      for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(LoadFloat(w + 4 * i)) * x[i];
      return static_cast<float>(acc);
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(LoadHalf(w + 2 * i)) * x[i];
      return static_cast<float>(acc);
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, w + 2 * i, 2);
        acc += static_cast<double>(BF16ToF32(b)) * x[i];
      }
      return static_cast<float>(acc);
    default:
      break;
  }
  void (*fn)(const uint8_t*, float*) = nullptr;
  int bs = 0, bb = 0;
  switch (wtype) {
    case DType::kQ8_0:
      fn = internal::DequantBlockQ8_0, bs = 32, bb = sizeof(BlockQ8_0);
      break;
    case DType::kQ2_K:
      fn = internal::DequantBlockQ2_K, bs = 256, bb = sizeof(BlockQ2_K);
      break;
    case DType::kQ4_K:
      fn = internal::DequantBlockQ4_K, bs = 256, bb = sizeof(BlockQ4_K);
      break;
    case DType::kIQ2_XXS:
      fn = internal::DequantBlockIQ2_XXS, bs = 256, bb = sizeof(BlockIQ2_XXS);
      break;
    case DType::kQ8_K:
      fn = internal::DequantBlockQ8_K, bs = 256, bb = sizeof(BlockQ8_K);
      break;
    default:
      return kNaN;
  }
  float buf[kQK_K];
  for (int64_t b = 0; b < n / bs; ++b) {
    fn(w + b * bb, buf);
    for (int i = 0; i < bs; ++i) acc += static_cast<double>(buf[i]) * x[b * bs + i];
  }
  return static_cast<float>(acc);
}

float DotQ8(DType wtype, const void* wrow, const void* xq, int64_t n) {
  const uint8_t* w = static_cast<const uint8_t*>(wrow);
  switch (wtype) {
    case DType::kF32: {  // ds4 matvec_f32: double, sequential
      const float* x = static_cast<const float*>(xq);
      double acc = 0.0;
      for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(LoadFloat(w + 4 * i)) * x[i];
      return static_cast<float>(acc);
    }
    case DType::kF16: {  // ds4 dot_f16_row: fp32, sequential
      const float* x = static_cast<const float*>(xq);
      float acc = 0.0f;
      for (int64_t i = 0; i < n; ++i) acc += LoadHalf(w + 2 * i) * x[i];
      return acc;
    }
    case DType::kBF16: {
      const float* x = static_cast<const float*>(xq);
      float acc = 0.0f;
      for (int64_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, w + 2 * i, 2);
        acc += BF16ToF32(b) * x[i];
      }
      return acc;
    }
    case DType::kQ8_0:
      return DotQ8_0(w, static_cast<const BlockQ8_0Act*>(xq), n);
    case DType::kQ2_K:
      return DotQ2_K(w, static_cast<const BlockQ8_K*>(xq), n);
    case DType::kQ4_K:
      return DotQ4_K(w, static_cast<const BlockQ8_K*>(xq), n);
    case DType::kIQ2_XXS:
      return DotIQ2_XXS(w, static_cast<const BlockQ8_K*>(xq), n);
    case DType::kQ8_K:
      return DotQ8_K(w, static_cast<const BlockQ8_K*>(xq), n);
    default:
      return kNaN;
  }
}

}  // namespace flashkv::ref
