// The TF32 tensor-core pieces of the fast float path (FloatPath::kFast, docs/CUDA.md
// "Numerics: exact and fast"): the m16n8k8 MMA with fp32 accumulation and the split of an
// fp32 value into TF32 terms. Fragments of mma.m16n8k8.row.col.f32.tf32.tf32.f32
// (lane = 4·group + t):
//   A 16×8 (rows × k): a0 = (group, t), a1 = (group + 8, t), a2 = (group, t + 4),
//     a3 = (group + 8, t + 4);
//   B 8×8 (k × columns): b0 = (t, group), b1 = (t + 4, group);
//   C 16×8: c0, c1 = row group, columns 2t, 2t + 1; c2, c3 = row group + 8.
// Must not: know weight formats or tile shapes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace flashkv::cuda {

// x rounded to TF32 (10 mantissa bits, to nearest, ties away), as fp32 bits with the low
// 13 bits zero.
__device__ __forceinline__ uint32_t ToTf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

// x as hi + lo, both TF32: hi = tf32(x), lo = tf32(x − hi) (x − hi is exact in fp32), so
// hi + lo is x to ~2^-22 of |x|.
__device__ __forceinline__ void SplitTf32(float x, uint32_t& hi, uint32_t& lo) {
  hi = ToTf32(x);
  lo = ToTf32(__fsub_rn(x, __uint_as_float(hi)));
}

// d += a·b, fp32 accumulation in the tensor core's order.
__device__ __forceinline__ void MmaTf32(const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                        float (&d)[4]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace flashkv::cuda
