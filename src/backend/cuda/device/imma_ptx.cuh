// The pieces the int8 tensor-core kernels (products/matmul_imma.cu, products/moe_imma.cu) share:
// cp.async staging into shared memory, ldmatrix fragment loads, the s8 m16n8k32 MMA, and the launch
// attributes for their large shared-memory tiles.
// Fragments of mma.m16n8k32.row.col.s32.s8.s8.s32 (lane = 4·group + t):
//   A 16×32 (rows × k): a0 = row group, k 4t…4t+3; a1 = row group + 8, same k; a2, a3 = the
//     same rows at k + 16;
//   B 32×8 (k × columns): b0 = column group, k 4t…4t+3; b1 = k + 16;
//   C 16×8: c0, c1 = row group, columns 2t, 2t + 1; c2, c3 = row group + 8.
// Must not: know block formats or tile shapes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace flashkv::cuda {

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return uint32_t(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void CpAsync4(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most N of this thread's most recent groups are still in flight.
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// Four 8×16-byte matrices; lanes 8i … 8i + 7 give the row addresses of matrix i, and lane
// 4r + c receives bytes 4c … 4c + 3 of row r of matrix i in r[i].
__device__ __forceinline__ void LdMatrixX4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
// Two 8×16-byte matrices: lanes 0-7 and 8-15 give their row addresses (lanes 16-31's are
// not read); lane 4r + c receives bytes 4c … 4c + 3 of row r of matrix i in r[i].
__device__ __forceinline__ void LdMatrixX2(uint32_t addr, uint32_t (&r)[2]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr)
               : "memory");
}
// d = a·b + c0 in int32, every element of C starting at c0.
__device__ __forceinline__ void Mma(const uint32_t (&a)[4], uint32_t b0, uint32_t b1, int (&d)[4],
                                    int c0 = 0) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%10,%10,%10};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(c0));
}

// m16n8k16 with unsigned A and B (kSignedB false) or signed B: d = a·b from zero. Fragments
// (lane = 4·group + t): a0 = row group, k 4t…4t+3; a1 = row group + 8; b0 = column group,
// k 4t…4t+3; d as the m16n8k32 product's.
template <bool kSignedB>
__device__ __forceinline__ void MmaK16U8(const uint32_t (&a)[2], uint32_t b, int (&d)[4]) {
  if constexpr (kSignedB) {
    asm("mma.sync.aligned.m16n8k16.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
        "{%7,%7,%7,%7};\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(b), "r"(0));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.s32.u8.u8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
        "{%7,%7,%7,%7};\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(b), "r"(0));
  }
}

// d += a·b in int32.
__device__ __forceinline__ void MmaAcc(const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                       int (&d)[4]) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Lets `kernel` take `bytes` of dynamic shared memory and asks for the largest carveout, so
// two CTAs of ~100 KB fit on one SM. Once per kernel and process (callers keep the result).
template <typename A>
cudaError_t AllowSharedMemory(void (*kernel)(A), int bytes) {
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess) {
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                             int(cudaSharedmemCarveoutMaxShared));
  }
  return e;
}

}  // namespace flashkv::cuda
