// Activation-quantization dispatch, the optimized DotF32, and the single-token DotQ8 entry
// (its kernels are in dot_q8.cpp). Where the build target has AVX2+FMA+F16C DotF32 is
// vectorized; otherwise (non-x86, or the sanitizer builds without -march=native) the scalar
// references in dot_ref.cpp run.
#include "tensor/dot.h"

#include <algorithm>
#include <cstring>

#include "tensor/dequant_avx2.h"
#include "tensor/dot_internal.h"
#include "tensor/dot_ref.h"
#include "tensor/half.h"
#include "tensor/quant.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_internal.h"
#include "tensor/simd_avx2.h"

namespace flashkv {

ActQuant ActQuantFor(DType wtype) {
  switch (wtype) {
    case DType::kQ8_0:
    case DType::kMXFP4:
    case DType::kIQ4_NL:
      return ActQuant::kQ8_0;
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ2_XXS:
    case DType::kIQ2_XS:
    case DType::kIQ1_M:
    case DType::kIQ3_XXS:
    case DType::kIQ3_S:
    case DType::kIQ2_S:
    case DType::kIQ1_S:
    case DType::kIQ4_XS:
    case DType::kQ8_K:
      return ActQuant::kQ8_K;
    default:
      return ActQuant::kNone;
  }
}

int64_t ActQuantBytes(ActQuant q, int64_t n) {
  switch (q) {
    case ActQuant::kQ8_0:
      return (n + kQK8_0 - 1) / kQK8_0 * static_cast<int64_t>(sizeof(BlockQ8_0Act));
    case ActQuant::kQ8_K:
      return n / kQK_K * static_cast<int64_t>(sizeof(BlockQ8_K));
    case ActQuant::kNone:
      break;
  }
  return n * static_cast<int64_t>(sizeof(float));
}

void QuantizeAct(ActQuant q, const float* x, void* out, int64_t n) {
  switch (q) {
    case ActQuant::kQ8_0:
      QuantizeActQ8_0(x, static_cast<BlockQ8_0Act*>(out), n);
      return;
    case ActQuant::kQ8_K:
      QuantizeActQ8_K(x, static_cast<BlockQ8_K*>(out), n);
      return;
    case ActQuant::kNone:
      break;
  }
  std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
}

#ifdef FLASHKV_TENSOR_AVX2
namespace {

using internal::HSum;
using internal::HSumI32;
using internal::LoadBF16x8;
using internal::LoadF16x8;
using internal::LoadFloat;
using internal::LoadHalf;

// ---- DotF32 -------------------------------------------------------------------------------

// Dense types: fp32 FMA lanes over chunks of 256 values, chunk sums added in double.
// load8 widens 8 weights to floats, load1 one weight.
template <int kElemBytes, typename Load8, typename Load1>
float DotDense(const uint8_t* w, const float* x, int64_t n, Load8 load8, Load1 load1) {
  double total = 0.0;
  const int64_t n32 = n & ~int64_t{31};
  int64_t i = 0;
  while (i < n32) {
    const int64_t end = std::min<int64_t>(n32, i + 256);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    for (; i < end; i += 32) {
      a0 = _mm256_fmadd_ps(load8(w + (i + 0) * kElemBytes), _mm256_loadu_ps(x + i + 0), a0);
      a1 = _mm256_fmadd_ps(load8(w + (i + 8) * kElemBytes), _mm256_loadu_ps(x + i + 8), a1);
      a2 = _mm256_fmadd_ps(load8(w + (i + 16) * kElemBytes), _mm256_loadu_ps(x + i + 16), a2);
      a3 = _mm256_fmadd_ps(load8(w + (i + 24) * kElemBytes), _mm256_loadu_ps(x + i + 24), a3);
    }
    total += HSum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  }
  for (; i < n; ++i) total += static_cast<double>(load1(w + kElemBytes * i)) * x[i];
  return static_cast<float>(total);
}

inline __m256 LoadF32x8(const uint8_t* p) {
  return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}
inline float LoadBF16(const uint8_t* p) {
  uint16_t b;
  std::memcpy(&b, p, 2);
  return BF16ToF32(b);
}

// Dot of 256 dequantized values with x [256] in fp32 lanes.
inline float Dot256(const float* v, const float* x) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  for (int i = 0; i < 256; i += 32) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(v + i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(v + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(v + i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(v + i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  return HSum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

float DotF32Q8_0(const uint8_t* w, const float* x, int64_t n) {
  const int64_t nb = n / kQK8_0;
  double total = 0.0;
  for (int64_t b0 = 0; b0 < nb; b0 += 8) {
    const int64_t b1 = std::min(nb, b0 + 8);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* blk = w + b * sizeof(BlockQ8_0);
      const float* xb = x + b * kQK8_0;
      const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
      const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 18));
      __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q0)), _mm256_loadu_ps(xb));
      s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q0, 8))),
                          _mm256_loadu_ps(xb + 8), s);
      s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q1)), _mm256_loadu_ps(xb + 16),
                          s);
      s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q1, 8))),
                          _mm256_loadu_ps(xb + 24), s);
      acc = _mm256_fmadd_ps(_mm256_set1_ps(LoadHalf(blk)), s, acc);
    }
    total += HSum(acc);
  }
  return static_cast<float>(total);
}

// Block types: each block decoded as DequantizeRow does and multiplied into fp32 lanes
// directly; one double add per block.
struct FmaSink {
  const float* x;
  __m256 acc[4];  // four chains hide the FMA latency; off is a constant once inlined
  void operator()(int off, __m256 v) {
    acc[(off >> 3) & 3] = _mm256_fmadd_ps(v, _mm256_loadu_ps(x + off), acc[(off >> 3) & 3]);
  }
};

template <void (*Decode)(const uint8_t*, FmaSink&), int kBlockBytes>
float DotF32Blocks(const uint8_t* w, const float* x, int64_t n) {
  double total = 0.0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    FmaSink sink{x + b * kQK_K, {}};
    Decode(w + b * kBlockBytes, sink);
    total += HSum(_mm256_add_ps(_mm256_add_ps(sink.acc[0], sink.acc[1]),
                                _mm256_add_ps(sink.acc[2], sink.acc[3])));
  }
  return static_cast<float>(total);
}

}  // namespace

float DotF32(DType wtype, const void* wrow, const float* x, int64_t n) {
  const uint8_t* w = static_cast<const uint8_t*>(wrow);
  switch (wtype) {
    case DType::kF32:
      return DotDense<4>(w, x, n, LoadF32x8, LoadFloat);
    case DType::kF16:
      return DotDense<2>(w, x, n, LoadF16x8, LoadHalf);
    case DType::kBF16:
      return DotDense<2>(w, x, n, LoadBF16x8, LoadBF16);
    case DType::kQ8_0:
      return DotF32Q8_0(w, x, n);
    case DType::kQ2_K:
      return DotF32Blocks<internal::DecodeQ2_K<FmaSink>, sizeof(BlockQ2_K)>(w, x, n);
    case DType::kQ4_K:
      return DotF32Blocks<internal::DecodeQ4_K<FmaSink>, sizeof(BlockQ4_K)>(w, x, n);
    case DType::kIQ2_XXS:
      return DotF32Blocks<internal::DecodeIQ2_XXS<FmaSink>, sizeof(BlockIQ2_XXS)>(w, x, n);
    default:
      return ref::DotF32(wtype, wrow, x, n);
  }
}

#else  // no AVX2: the references are the kernels

float DotF32(DType wtype, const void* wrow, const float* x, int64_t n) {
  return ref::DotF32(wtype, wrow, x, n);
}

#endif

float DotQ8(DType wtype, const void* wrow, const void* xq, int64_t n) {
  float out;
  internal::DotQ8Multi(wtype, wrow, &xq, 1, n, &out);
  return out;
}

}  // namespace flashkv
