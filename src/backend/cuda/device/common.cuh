// Device helpers shared by the CUDA op files: unaligned loads of GGUF block fields, half
// and bfloat16 widening, fixed-order warp/block reductions, and the ds4 scalar formulas
// (sigmoid, silu, softplus) in the same float order as src/backend/cpu/cpu_math.h.
// Must not: be included by host-only code (it is CUDA C++).
//
// Reductions are trees whose shape depends only on the number of values reduced, never on
// n_tokens or the grid, so an output computed in any batch has the same bits.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace flashkv::cuda {

inline constexpr unsigned kFullMask = 0xffffffffu;

// Expert `e`'s matrix in a 3-D expert stack: one block (`base` + e·expert_bytes), or, for
// routed experts kept in host memory behind a device cache, the stack's table of addresses
// (Weight::experts, model/expert_cache.h): cached experts in device memory, the others read
// in place across the host link. The kernels compute the same either way.
__device__ __forceinline__ const uint8_t* ExpertMatrix(const uint8_t* base,
                                                       const uint8_t* const* table, int e,
                                                       uint64_t expert_bytes) {
  return table != nullptr ? table[e] : base + uint64_t(e) * expert_bytes;
}

__device__ __forceinline__ float HalfBitsToFloat(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}
__device__ __forceinline__ float Bf16BitsToFloat(uint16_t b) {
  return __uint_as_float(uint32_t(b) << 16);
}
// Little-endian fields at 2-byte alignment (GGUF blocks of 34 and 66 bytes).
__device__ __forceinline__ uint16_t LoadU16(const uint8_t* p) {
  return *reinterpret_cast<const uint16_t*>(p);
}
__device__ __forceinline__ uint32_t LoadU32Align2(const uint8_t* p) {
  const uint16_t* q = reinterpret_cast<const uint16_t*>(p);
  return uint32_t(q[0]) | (uint32_t(q[1]) << 16);
}
__device__ __forceinline__ uint32_t LoadU32(const uint8_t* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}
__device__ __forceinline__ float LoadHalfDev(const uint8_t* p) {
  return HalfBitsToFloat(LoadU16(p));
}

// xor-tree sums: lane i ends with the total; the pairing order is fixed.
__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}
__device__ __forceinline__ double WarpSumD(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = __dadd_rn(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}
__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}
// Integer sums over aligned groups of `width` lanes (exact, so any order).
template <int kWidth>
__device__ __forceinline__ int GroupSumInt(int v) {
#pragma unroll
  for (int o = kWidth / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// Block-wide sum of one double per thread (blockDim.x a multiple of 32, <= 1024); every
// thread gets the result. `scratch` holds 32 doubles.
__device__ __forceinline__ double BlockSumD(double v, double* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  v = WarpSumD(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int n_warps = blockDim.x >> 5;
  double t = lane < n_warps ? scratch[lane] : 0.0;
  t = WarpSumD(t);
  return t;
}
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  v = WarpSum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int n_warps = blockDim.x >> 5;
  float t = lane < n_warps ? scratch[lane] : 0.0f;
  return WarpSum(t);
}
__device__ __forceinline__ float BlockMax(float v, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  v = WarpMax(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int n_warps = blockDim.x >> 5;
  float t = lane < n_warps ? scratch[lane] : -__int_as_float(0x7f800000);
  return WarpMax(t);
}

// 1 / sqrt(mean + eps) from the sum of squares, as every RMSNorm kernel forms it.
__device__ __forceinline__ float RmsScale(double ss, int n, float eps) {
  return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(float(__ddiv_rn(ss, double(n))), eps)));
}

// One normalised value: x · scale, then · w[i] when a weight is given (RmsNormKernel).
__device__ __forceinline__ float RmsNormed(float x, float scale, const float* w, int i) {
  const float v = __fmul_rn(x, scale);
  return w != nullptr ? __fmul_rn(v, w[i]) : v;
}

// ds4's formulas (cpu_math.h), unfused.
__device__ __forceinline__ float SigmoidStable(float x) {
  if (x >= 0.0f) return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x)));
  const float e = expf(x);
  return __fdiv_rn(e, __fadd_rn(1.0f, e));
}
__device__ __forceinline__ float Silu(float x) {
  return __fmul_rn(x, SigmoidStable(x));
}
__device__ __forceinline__ float SoftplusStable(float x) {
  if (x > 20.0f) return x;
  if (x < -20.0f) return expf(x);
  return log1pf(expf(x));
}
// silu(min(g, λ)) · clamp(u, ±λ); λ <= 1e-6 disables the clamp (SwiGlu, MoE).
__device__ __forceinline__ float ClampedSwiGlu(float g, float u, float clamp) {
  if (clamp > 1.0e-6f) {
    g = fminf(g, clamp);
    u = fminf(fmaxf(u, -clamp), clamp);
  }
  return __fmul_rn(Silu(g), u);
}

inline unsigned CeilDiv(size_t a, size_t b) {
  return unsigned((a + b - 1) / b);
}

// Whether a device address can be read with 16-byte vector loads (host side, launch checks).
inline bool Aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

}  // namespace flashkv::cuda
