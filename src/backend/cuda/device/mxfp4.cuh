// Device-side MXFP4 (GGUF type 39) against Q8_0 activations: the integer block sum and the
// block term of ref::DotMXFP4 (tensor/dot_ref.cpp), so a fold of the terms in block order
// with unfused adds has the CPU's bits. Block layout: tensor/quant_blocks.h (BlockMXFP4:
// scale byte e, then 16 bytes, byte j = element j low nibble, element j + 16 high nibble).
// IQ4_NL's 32-value blocks take the same activations and fold (below). Must not: know rows,
// tokens or warps (products/mxfp4_matvec.cu arranges lanes).
#pragma once

#include <cstdint>

#include "backend/cuda/device/common.cuh"

namespace flashkv::cuda {

inline constexpr int kMxfp4BlockBytes = 17;

// 2^(e - 128) from its bits (a subnormal for e < 2), as tensor/quant_internal.h builds it.
__device__ __forceinline__ float Mxfp4HalfScaleDev(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23;
  return __uint_as_float(bits);
}

// Four E2M1 codes (one per byte, 0..15) to their doubled values as packed int8:
// magnitudes {0, 1, 2, 3, 4, 6, 8, 12} by the low three bits (a byte permute of the two
// table words), negated where bit 3 is set (code 8, E2M1's -0, gives 0 as GGML does).
__device__ __forceinline__ int Mxfp4Doubled4(uint32_t codes) {
  const uint32_t sel =
      (codes & 0x7u) | ((codes >> 4) & 0x70u) | ((codes >> 8) & 0x700u) | ((codes >> 12) & 0x7000u);
  const uint32_t mag = __byte_perm(0x03020100u, 0x0C080604u, sel);
  const uint32_t neg = ((codes >> 3) & 0x01010101u) * 0xFFu;
  return int(__vsub4(mag ^ neg, neg));
}

// Σ doubled(w) · q8 over one block; xq: the block's 32 activation quants, 16-byte aligned.
// An integer, so the order of the partial sums does not matter.
__device__ __forceinline__ int Mxfp4BlockIsum(const uint8_t* wblk, const int8_t* xq) {
  const int4 x0 = *reinterpret_cast<const int4*>(xq);
  const int4 x1 = *reinterpret_cast<const int4*>(xq + 16);
  const int xlo[4] = {x0.x, x0.y, x0.z, x0.w};  // elements 0..15
  const int xhi[4] = {x1.x, x1.y, x1.z, x1.w};  // elements 16..31
  const uint8_t* qs = wblk + 1;                 // 17-byte blocks: no alignment to lean on
  int s = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint32_t q = uint32_t(qs[4 * k]) | (uint32_t(qs[4 * k + 1]) << 8) |
                       (uint32_t(qs[4 * k + 2]) << 16) | (uint32_t(qs[4 * k + 3]) << 24);
    s = __dp4a(Mxfp4Doubled4(q & 0x0F0F0F0Fu), xlo[k], s);
    s = __dp4a(Mxfp4Doubled4((q >> 4) & 0x0F0F0F0Fu), xhi[k], s);
  }
  return s;
}

// The block's term as ref::DotMXFP4 forms it: (2^(e-128) · d_x) · isum, unfused.
__device__ __forceinline__ float Mxfp4BlockTerm(const uint8_t* wblk, const int8_t* xq, float dx) {
  return __fmul_rn(__fmul_rn(Mxfp4HalfScaleDev(wblk[0]), dx), float(Mxfp4BlockIsum(wblk, xq)));
}

// IQ4_NL (GGUF type 20, tensor/quant_blocks.h BlockIQ4_NL: f16 d, then 16 bytes laid out as
// MXFP4's) against the same Q8_0 activations: the term of ref::DotIQ4_NL, (f16(d) · d_x) ·
// Σ kvalues_iq4nl[code] · q8.
inline constexpr int kIq4nlBlockBytes = 18;

// Four 4-bit codes (one per byte) to their kvalues_iq4nl entries as packed int8: a byte
// permute of the low and of the high half of the table, picked by bit 3.
__device__ __forceinline__ int Iq4nlValues4(uint32_t codes) {
  const uint32_t sel =
      (codes & 0x7u) | ((codes >> 4) & 0x70u) | ((codes >> 8) & 0x700u) | ((codes >> 12) & 0x7000u);
  // {-127, -104, -83, -65}, {-49, -35, -22, -10}, {1, 13, 25, 38}, {53, 69, 89, 113}.
  const uint32_t lo = __byte_perm(0xBFAD9881u, 0xF6EADDCFu, sel);
  const uint32_t hi = __byte_perm(0x26190D01u, 0x71594535u, sel);
  const uint32_t pick = ((codes >> 3) & 0x01010101u) * 0xFFu;
  return int((lo & ~pick) | (hi & pick));
}

__device__ __forceinline__ float Iq4nlBlockTerm(const uint8_t* wblk, const int8_t* xq, float dx) {
  const int4 x0 = *reinterpret_cast<const int4*>(xq);
  const int4 x1 = *reinterpret_cast<const int4*>(xq + 16);
  const int xlo[4] = {x0.x, x0.y, x0.z, x0.w};
  const int xhi[4] = {x1.x, x1.y, x1.z, x1.w};
  const uint8_t* qs = wblk + 2;
  int s = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint32_t q = uint32_t(qs[4 * k]) | (uint32_t(qs[4 * k + 1]) << 8) |
                       (uint32_t(qs[4 * k + 2]) << 16) | (uint32_t(qs[4 * k + 3]) << 24);
    s = __dp4a(Iq4nlValues4(q & 0x0F0F0F0Fu), xlo[k], s);
    s = __dp4a(Iq4nlValues4((q >> 4) & 0x0F0F0F0Fu), xhi[k], s);
  }
  const float d = __half2float(__ushort_as_half(uint16_t(wblk[0] | (wblk[1] << 8))));
  return __fmul_rn(__fmul_rn(d, dx), float(s));
}

}  // namespace flashkv::cuda
