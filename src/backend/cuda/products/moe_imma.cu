// Routed experts on the int8 tensor cores, tile mode (MoeExperts' expert-sorted tiles of up to
// 32 or 64 pairs for prefill, 8 for decode batches: ImmaMoePairs): the gate/up product (IQ2_XXS
// weights × Q8_K activations) fused with the clamped SwiGLU and the route weight —
// GateUpTPKernel's job, with its bits — and the down product (Q2_K weights × Q8_K mids,
// MatVecTPKernel's bits).
//
// Gate/up:
// Per super-block (256 values) the CTA decodes its rows of gate and of up into int8
// tiles in shared memory (signed grid magnitudes, as TpDecodeIQ2 does) plus each group's
// scale 2·ls + 1; one `mma.m16n8k32` per 32-value group gives the group's exact integer sum
// for 16 rows × 8 pairs, which is scaled and added in integers (exact, so in any order) into
// the super-block sum; the super-block's float term (d_w · d_x) · Σ is then folded in
// super-block order with unfused operations and the total scaled by 1/8 — TpTermIQ2's terms
// and order. Raw blocks of the next super-block are loaded into registers while the
// current one is multiplied; activations are staged with cp.async, double-buffered.
// Each output's arithmetic is the same whatever the tile shape, so 32- and 64-pair tiles
// give the same bits; 64 pairs × 64 rows decodes each weight once per 64 pairs instead of
// 32 (the decode is most of the loop), at the cost of staging twice the activations.
// Down: see DownImmaQ2KKernel.
// Must not: serve other weight types or plain (non-tile) batches.
#include <cstdint>
#include <type_traits>

#include "backend/cuda/device/common.cuh"
#include "backend/cuda/device/imma_ptx.cuh"
#include "backend/cuda/device/matvec_tp.cuh"
#include "backend/cuda/device/quant.cuh"
#include "backend/cuda/products/launch.h"

namespace flashkv::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kRowBytes = 256 + 16;  // decoded row / activation row stride (bank-conflict free)
constexpr int kScaleStride = 9;      // ints per row of group scales (8, padded)

// A CTA's tile: kBN pairs × kBM rows, 8 warps. Tiles of 32 or 64 pairs (prefill): warps of
// 32 rows × 16 pairs (two 16-row × two 8-pair MMA tiles). The narrow tile of 8 pairs (decode
// batches, where an expert has a pair or two: ImmaMoePairs): warps of 16 rows × 8 pairs, 128
// rows a CTA, so each decoded weight tile feeds one MMA per group and matrix instead of four
// mostly empty ones, and a quarter of the activations is staged.
template <int BN>
struct Shape {
  static_assert(BN == kImmaNarrowPairs || BN == 32 || BN == 64);
  static constexpr int kBN = BN;
  static constexpr int kBM = BN == 64 ? 64 : 128;
  static constexpr int kNt = BN == kImmaNarrowPairs ? 1 : 2;  // 8-pair MMA tiles per warp
  static constexpr int kWN = BN / (8 * kNt);                  // warps along pairs: 1, 2, 4
  static constexpr int kWM = 8 / kWN;                         // warps along rows: 8, 4, 2
  static constexpr int kMt = kBM / kWM / 16;                  // 16-row MMA tiles per warp: 1, 2, 2
  static constexpr int kItemsPerMatrix = kBM * 8 / kThreads;  // (row, group) decodes
  static constexpr int kItems = 2 * kItemsPerMatrix;          // per thread: 8 or 4
  static_assert(kWM * kWN * 32 == kThreads && kMt * kWM * 16 == kBM);
};

// The B fragments (b0, b1) of a warp's kNt 8-pair MMA tiles for one 32-value group.
template <int kNt>
__device__ __forceinline__ void LoadPairFragments(uint32_t addr, uint32_t (&bf)[2 * kNt]) {
  if constexpr (kNt == 2) {
    LdMatrixX4(addr, bf);
  } else {
    LdMatrixX2(addr, bf);
  }
}

// The tile's pairs and their activations (Q8_K rows), double-buffered by super-block.
template <int BN>
struct PairTile {
  int xrow[BN];
  int yrow[BN];
  alignas(16) int8_t x[2][BN * kRowBytes];
  float dx[2][BN];
};

template <int BN>
struct Smem {
  static constexpr int kBM = Shape<BN>::kBM;
  uint64_t grid[256];
  PairTile<BN> pt;
  alignas(16) int8_t w[2][kBM * kRowBytes];  // decoded gate, up
  int scale[2][kBM * kScaleStride];
  uint32_t dword[2][2][kBM];  // [buffer][matrix][row]: the aligned word holding the block's d
  uint8_t dhigh[2][2][kBM];   // whether d is that word's high half
};

// One (matrix, row, group) decode: the group's 8 raw bytes.
struct RawItem {
  uint32_t a = 0, b = 0;
};

__device__ __forceinline__ const uint8_t* ItemBlock(const GateUpArgs& g, int m, int expert, int row,
                                                    int sb) {
  const MatVecArgs& a = g.mv;
  const uint8_t* base = m == 0 ? ExpertMatrix(a.w, a.w_experts, expert, a.expert_bytes)
                               : ExpertMatrix(g.w_up, g.up_experts, expert, a.expert_bytes);
  return base + uint64_t(row) * a.row_bytes + uint64_t(66) * sb;
}

// Item i of this thread: matrix i / kItemsPerMatrix, row and group from the thread index
// (8 consecutive threads read one row's 64 bytes of groups).
template <int BN>
__device__ __forceinline__ void ItemCoords(int i, int* m, int* r, int* grp) {
  constexpr int kIpm = Shape<BN>::kItemsPerMatrix;
  const int idx = threadIdx.x + kThreads * (i % kIpm);
  *m = i / kIpm;
  *r = idx >> 3;
  *grp = idx & 7;
}

// Super-block sb's raw groups into registers, and (cp.async, committed with the same
// stage's activations) the word holding each row's d into dword[buf].
template <int BN>
__device__ __forceinline__ void LoadRaw(const GateUpArgs& g, Smem<BN>& sm, int buf, int expert,
                                        int row0, int sb, RawItem (&raw)[Shape<BN>::kItems]) {
  // Blocks are 66 bytes, so a block starts 2 (mod 4) or 0: its groups' 8 bytes at
  // +2 + 8·grp are 4-byte aligned in the first case, and its d is then the high half of
  // the aligned word before it, else the low half of the word at the block. No load leaves
  // the block (the weights start 4-byte aligned, LaunchGateUpImmaIq2).
#pragma unroll
  for (int i = 0; i < Shape<BN>::kItems; ++i) {
    int m, r, grp;
    ItemCoords<BN>(i, &m, &r, &grp);
    const uint8_t* blk = ItemBlock(g, m, expert, min(row0 + r, g.mv.rows - 1), sb);
    const uint8_t* p = blk + 2 + 8 * grp;
    const bool aligned = (reinterpret_cast<uintptr_t>(blk) & 3) == 2;
    if (aligned) {
      raw[i].a = LoadU32(p);
      raw[i].b = LoadU32(p + 4);
    } else {
      const uint32_t w0 = LoadU32(p - 2), w1 = LoadU32(p + 2);
      raw[i].a = __byte_perm(w0, w1, 0x5432);
      raw[i].b = (w1 >> 16) | (uint32_t(LoadU16(p + 6)) << 16);
    }
    if (grp == 0) {
      CpAsync4(SmemAddr(&sm.dword[buf][m][r]), aligned ? blk - 2 : blk);
      sm.dhigh[buf][m][r] = aligned;
    }
  }
}
template <int BN>
__device__ __forceinline__ float BlockD(const Smem<BN>& sm, int buf, int m, int r) {
  const uint32_t w = sm.dword[buf][m][r];
  return HalfBitsToFloat(uint16_t(sm.dhigh[buf][m][r] ? w >> 16 : w & 0xffffu));
}

// Signed magnitudes of a group (TpDecodeIQ2's words) into the decoded tile, and its scale.
template <int BN>
__device__ __forceinline__ void DecodeRaw(Smem<BN>& sm, const RawItem (&raw)[Shape<BN>::kItems]) {
#pragma unroll
  for (int i = 0; i < Shape<BN>::kItems; ++i) {
    int m, r, grp;
    ItemCoords<BN>(i, &m, &r, &grp);
    uint32_t v[8];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint64_t gv = sm.grid[(raw[i].a >> (8 * k)) & 0xffu];
      uint32_t m_lo, m_hi;
      Iq2SignBytes((raw[i].b >> (7 * k)) & 127u, &m_lo, &m_hi);
      v[2 * k] = Iq2Signed(uint32_t(gv), m_lo);
      v[2 * k + 1] = Iq2Signed(uint32_t(gv >> 32), m_hi);
    }
    uint4* dst = reinterpret_cast<uint4*>(sm.w[m] + r * kRowBytes + 32 * grp);
    dst[0] = make_uint4(v[0], v[1], v[2], v[3]);
    dst[1] = make_uint4(v[4], v[5], v[6], v[7]);
    sm.scale[m][r * kScaleStride + grp] = int(2 * (raw[i].b >> 28) + 1);
  }
}

// The tile's pair rows; slots past its count repeat its first pair (results dropped).
template <int BN>
__device__ __forceinline__ void SetupPairs(const MatVecArgs& a, const int* tile, int count,
                                           PairTile<BN>& pt) {
  if (threadIdx.x < BN) {
    const int p = a.pairs[tile[1] + (int(threadIdx.x) < count ? threadIdx.x : 0)];
    pt.xrow[threadIdx.x] = p / a.pair_div;
    pt.yrow[threadIdx.x] = p;
  }
}

// Activation quants and scale of super-block sb for the tile's pairs.
template <int BN>
__device__ __forceinline__ void LoadX(const MatVecArgs& a, PairTile<BN>& pt, int buf, int sb) {
  const uint32_t xq = SmemAddr(pt.x[buf]);
  for (int i = threadIdx.x; i < BN * 16; i += kThreads) {
    const int t = i >> 4, c = i & 15;
    CpAsync16(xq + t * kRowBytes + 16 * c,
              a.x + uint64_t(pt.xrow[t]) * a.x_row_bytes + uint64_t(256) * sb + 16 * c);
  }
  if (threadIdx.x < BN) {
    const int t = threadIdx.x;
    CpAsync4(SmemAddr(&pt.dx[buf][t]),
             a.x + uint64_t(pt.xrow[t]) * a.x_row_bytes + a.n + uint64_t(4) * sb);
  }
}

// ldmatrix row addresses of this lane (device/imma_ptx.cuh's fragments). A (weights): lanes 0-7
// rows 0-7 / k 0-15 (a0), 8-15 rows 8-15 / k 0-15 (a1), 16-23 rows 0-7 / k 16-31 (a2),
// 24-31 rows 8-15 / k 16-31 (a3). B (pairs): lanes 0-7 pairs 0-7 / k 0-15, 8-15 pairs 0-7 /
// k 16-31, then the same for pairs 8-15: b0, b1 of two 8-pair tiles (the narrow tile reads
// only the first: lanes 0-15).
__device__ __forceinline__ int ARowOffset(int lane) {
  return ((lane & 7) + 8 * ((lane >> 3) & 1)) * kRowBytes + 16 * (lane >> 4);
}
__device__ __forceinline__ int BRowOffset(int lane) {
  return ((lane & 7) + 8 * (lane >> 4)) * kRowBytes + 16 * ((lane >> 3) & 1);
}

template <int BN>
__global__ void __launch_bounds__(kThreads, 2) GateUpImmaIq2Kernel(GateUpArgs g) {
  using S = Shape<BN>;
  constexpr int kBM = S::kBM, kBN = S::kBN, kWM = S::kWM, kWN = S::kWN, kMt = S::kMt, kNt = S::kNt;
  const MatVecArgs& a = g.mv;
  const int* tile = a.tiles + 3 * blockIdx.x;
  const int count = tile[2];
  if (count == 0) return;
  const int expert = tile[0];
  extern __shared__ __align__(16) uint8_t gu_smem[];
  Smem<BN>& sm = *reinterpret_cast<Smem<BN>*>(gu_smem);
  const int row0 = blockIdx.y * kBM;
  for (int i = threadIdx.x; i < 256; i += kThreads) sm.grid[i] = a.iq2_grid[i];
  SetupPairs(a, tile, count, sm.pt);
  const int nsb = a.n / 256;
  RawItem raw[S::kItems];
  __syncthreads();  // grid and pair rows
  LoadRaw(g, sm, 0, expert, row0, 0, raw);
  LoadX(a, sm.pt, 0, 0);
  CpAsyncCommit();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int gq = lane >> 2, tig = lane & 3;
  const int wm0 = (warp % kWM) * (kBM / kWM);
  const int wn0 = (warp / kWM) * (kBN / kWN);
  float acc[2][kMt][kNt][4];
#pragma unroll
  for (int m = 0; m < 2; ++m) {
#pragma unroll
    for (int i = 0; i < kMt; ++i) {
#pragma unroll
      for (int j = 0; j < kNt; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[m][i][j][e] = 0.0f;
      }
    }
  }
  const int a_off = wm0 * kRowBytes + ARowOffset(lane);
  const int b_off = wn0 * kRowBytes + BRowOffset(lane);

  for (int sb = 0; sb < nsb; ++sb) {
    const int buf = sb & 1;
    DecodeRaw(sm, raw);  // the previous super-block's products are done (loop-end barrier)
    if (sb + 1 < nsb) {
      LoadRaw(g, sm, buf ^ 1, expert, row0, sb + 1, raw);
      LoadX(a, sm.pt, buf ^ 1, sb + 1);
    }
    CpAsyncCommit();
    CpAsyncWait<1>();  // this super-block's activations (the next one's may still fly)
    __syncthreads();

    int isum[2][kMt][kNt][4];
#pragma unroll
    for (int m = 0; m < 2; ++m) {
#pragma unroll
      for (int i = 0; i < kMt; ++i) {
#pragma unroll
        for (int j = 0; j < kNt; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) isum[m][i][j][e] = 0;
        }
      }
    }
    const uint32_t xb = SmemAddr(sm.pt.x[buf]) + b_off;
#pragma unroll
    for (int grp = 0; grp < 8; ++grp) {
      uint32_t bf[2 * kNt];  // b0, b1 of each pair tile
      LoadPairFragments<kNt>(xb + 32 * grp, bf);
#pragma unroll
      for (int m = 0; m < 2; ++m) {
#pragma unroll
        for (int i = 0; i < kMt; ++i) {
          uint32_t af[4];
          LdMatrixX4(SmemAddr(sm.w[m]) + a_off + 16 * i * kRowBytes + 32 * grp, af);
          const int r = wm0 + 16 * i + gq;
          const int sc0 = sm.scale[m][r * kScaleStride + grp];
          const int sc1 = sm.scale[m][(r + 8) * kScaleStride + grp];
#pragma unroll
          for (int j = 0; j < kNt; ++j) {
            int d[4];
            Mma(af, bf[2 * j], bf[2 * j + 1], d);
            isum[m][i][j][0] += d[0] * sc0;
            isum[m][i][j][1] += d[1] * sc0;
            isum[m][i][j][2] += d[2] * sc1;
            isum[m][i][j][3] += d[3] * sc1;
          }
        }
      }
    }
    // The super-block's terms, (d_w · d_x) · Σ, folded in order (TpTermIQ2).
#pragma unroll
    for (int m = 0; m < 2; ++m) {
#pragma unroll
      for (int i = 0; i < kMt; ++i) {
        const int r = wm0 + 16 * i + gq;
        const float dw0 = BlockD(sm, buf, m, r);
        const float dw1 = BlockD(sm, buf, m, r + 8);
#pragma unroll
        for (int j = 0; j < kNt; ++j) {
          const int t = wn0 + 8 * j + 2 * tig;
          const float dx0 = sm.pt.dx[buf][t], dx1 = sm.pt.dx[buf][t + 1];
          const float dws[4] = {dw0, dw0, dw1, dw1};
          const float dxs[4] = {dx0, dx1, dx0, dx1};
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            acc[m][i][j][e] =
                __fadd_rn(acc[m][i][j][e],
                          __fmul_rn(__fmul_rn(dws[e], dxs[e]), __int2float_rn(isum[m][i][j][e])));
          }
        }
      }
    }
    __syncthreads();  // decoded weights and this activation buffer are free again
  }

#pragma unroll
  for (int i = 0; i < kMt; ++i) {
#pragma unroll
    for (int j = 0; j < kNt; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = row0 + wm0 + 16 * i + gq + 8 * (e >> 1);
        const int t = wn0 + 8 * j + 2 * tig + (e & 1);
        if (r < a.rows && t < count) {
          const float gate = __fmul_rn(0.125f, acc[0][i][j][e]);
          const float up = __fmul_rn(0.125f, acc[1][i][j][e]);
          const int p = sm.pt.yrow[t];
          a.y[uint64_t(p) * a.y_row_floats + r] =
              __fmul_rn(ClampedSwiGlu(gate, up, g.clamp), g.route_w[p]);
        }
      }
    }
  }
}

// ---- expert down: Q2_K weights × Q8_K mids ---------------------------------------------
// A value's quant q (0..3) times its 16-value group's 4-bit scale is at most 45, so the
// decoded int8 tile holds q·scale and one MMA per 32 values gives that part of Q2_K's
// integer sum, scales included; the mins part Σ bsums·min is the same product with every
// value of a 16-value group weighted by the group's min — an A fragment built in registers
// from the scale bytes (a fragment's 4 bytes never straddle a group). Both integer sums
// accumulate in the MMA over the super-block; its term is then TpTermQ2_K's.
template <int BN>
struct DownSmem {
  static constexpr int kBM = Shape<BN>::kBM;
  PairTile<BN> pt;
  alignas(16) int8_t w[kBM * kRowBytes];  // q · (scale & 15)
  alignas(16) uint8_t sc[kBM * 16];       // the 16 scale bytes (mins in the high nibbles)
  float d[kBM];
  float dmin[kBM];
};

// Row r's 64 quant bytes are two halves h (units 4h … 4h + 3) of 8 words; kThreads / kBM
// threads share a row: 2 (tiles of 32 pairs) take a half each, 4 (64) a half's words 0-3 or
// 4-7 — the 16-value groups 2·unit or 2·unit + 1 of every unit of the half.
template <int BN>
struct Q2Part {
  static constexpr int kPerRow = kThreads / Shape<BN>::kBM;  // 2 or 4
  static constexpr int kWords = 16 / kPerRow;                // 8 or 4
  static __device__ __forceinline__ int Row() { return threadIdx.x / kPerRow; }
  static __device__ __forceinline__ int Half() { return (threadIdx.x % kPerRow) / (kPerRow / 2); }
  static __device__ __forceinline__ int Word0() { return (threadIdx.x % (kPerRow / 2)) * kWords; }
};

template <int BN>
struct Q2Raw {
  uint32_t q[Q2Part<BN>::kWords];
  uint32_t sc[2];  // the half's 8 scale bytes
  uint32_t dd;     // d | dmin << 16 (the row's first thread)
};

template <int BN>
__device__ __forceinline__ void LoadRawQ2(const MatVecArgs& a, int expert, int row0, int sb,
                                          Q2Raw<BN>& raw) {
  using P = Q2Part<BN>;
  const int r = P::Row(), h = P::Half(), k0 = P::Word0();
  // 84-byte blocks in rows of a multiple of 84 bytes: every word below is 4-byte aligned.
  const uint8_t* blk = ExpertMatrix(a.w, a.w_experts, expert, a.expert_bytes) +
                       uint64_t(min(row0 + r, a.rows - 1)) * a.row_bytes + uint64_t(84) * sb;
#pragma unroll
  for (int k = 0; k < P::kWords; ++k) raw.q[k] = LoadU32(blk + 16 + 32 * h + 4 * (k0 + k));
  raw.sc[0] = LoadU32(blk + 8 * h);
  raw.sc[1] = LoadU32(blk + 8 * h + 4);
  raw.dd = threadIdx.x % P::kPerRow == 0 ? LoadU32(blk + 80) : 0u;
}

template <int BN>
__device__ __forceinline__ void DecodeQ2(DownSmem<BN>& sm, const Q2Raw<BN>& raw) {
  using P = Q2Part<BN>;
  const int r = P::Row(), h = P::Half(), k0 = P::Word0();
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const uint32_t sc0 = (raw.sc[s >> 1] >> (16 * (s & 1))) & 15u;      // scale byte 2s
    const uint32_t sc1 = (raw.sc[s >> 1] >> (16 * (s & 1) + 8)) & 15u;  // byte 2s + 1
    uint32_t v[P::kWords];
#pragma unroll
    for (int k = 0; k < P::kWords; ++k) {
      v[k] = ((raw.q[k] >> (2 * s)) & 0x03030303u) * (k0 + k < 4 ? sc0 : sc1);
    }
    uint4* dst = reinterpret_cast<uint4*>(sm.w + r * kRowBytes + 32 * (4 * h + s) + 4 * k0);
#pragma unroll
    for (int c = 0; c < P::kWords / 4; ++c) {
      dst[c] = make_uint4(v[4 * c], v[4 * c + 1], v[4 * c + 2], v[4 * c + 3]);
    }
  }
  if (k0 == 0) *reinterpret_cast<uint2*>(sm.sc + r * 16 + 8 * h) = make_uint2(raw.sc[0], raw.sc[1]);
  if (threadIdx.x % P::kPerRow == 0) {
    sm.d[r] = HalfBitsToFloat(uint16_t(raw.dd & 0xffffu));
    sm.dmin[r] = HalfBitsToFloat(uint16_t(raw.dd >> 16));
  }
}

// The min of 16-value group j of row r, in all four bytes.
template <int BN>
__device__ __forceinline__ uint32_t MinBytes(const DownSmem<BN>& sm, int r, int j) {
  return uint32_t(sm.sc[r * 16 + j] >> 4) * 0x01010101u;
}

template <int BN>
__global__ void __launch_bounds__(kThreads, 2) DownImmaQ2KKernel(MatVecArgs a) {
  using S = Shape<BN>;
  constexpr int kBM = S::kBM, kBN = S::kBN, kWM = S::kWM, kWN = S::kWN, kMt = S::kMt, kNt = S::kNt;
  const int* tile = a.tiles + 3 * blockIdx.x;
  const int count = tile[2];
  if (count == 0) return;
  const int expert = tile[0];
  extern __shared__ __align__(16) uint8_t dn_smem[];
  DownSmem<BN>& sm = *reinterpret_cast<DownSmem<BN>*>(dn_smem);
  const int row0 = blockIdx.y * kBM;
  SetupPairs(a, tile, count, sm.pt);
  const int nsb = a.n / 256;
  Q2Raw<BN> raw;
  LoadRawQ2(a, expert, row0, 0, raw);
  __syncthreads();  // pair rows
  LoadX(a, sm.pt, 0, 0);
  CpAsyncCommit();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int gq = lane >> 2, tig = lane & 3;
  const int wm0 = (warp % kWM) * (kBM / kWM);
  const int wn0 = (warp / kWM) * (kBN / kWN);
  const int a_off = wm0 * kRowBytes + ARowOffset(lane);
  const int b_off = wn0 * kRowBytes + BRowOffset(lane);
  float acc[kMt][kNt][4];
#pragma unroll
  for (int i = 0; i < kMt; ++i) {
#pragma unroll
    for (int j = 0; j < kNt; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    }
  }

  for (int sb = 0; sb < nsb; ++sb) {
    const int buf = sb & 1;
    DecodeQ2(sm, raw);  // the previous super-block's products are done (loop-end barrier)
    if (sb + 1 < nsb) {
      LoadRawQ2(a, expert, row0, sb + 1, raw);
      LoadX(a, sm.pt, buf ^ 1, sb + 1);
    }
    CpAsyncCommit();
    CpAsyncWait<1>();
    __syncthreads();

    int isum[kMt][kNt][4], summs[kMt][kNt][4];
#pragma unroll
    for (int i = 0; i < kMt; ++i) {
#pragma unroll
      for (int j = 0; j < kNt; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) isum[i][j][e] = summs[i][j][e] = 0;
      }
    }
    const uint32_t xb = SmemAddr(sm.pt.x[buf]) + b_off;
#pragma unroll
    for (int unit = 0; unit < 8; ++unit) {
      uint32_t bf[2 * kNt];
      LoadPairFragments<kNt>(xb + 32 * unit, bf);
#pragma unroll
      for (int i = 0; i < kMt; ++i) {
        uint32_t af[4];
        LdMatrixX4(SmemAddr(sm.w) + a_off + 16 * i * kRowBytes + 32 * unit, af);
        const int r = wm0 + 16 * i + gq;
        // Values 0-15 of the unit are group 2·unit, 16-31 group 2·unit + 1.
        const uint32_t am[4] = {MinBytes(sm, r, 2 * unit), MinBytes(sm, r + 8, 2 * unit),
                                MinBytes(sm, r, 2 * unit + 1), MinBytes(sm, r + 8, 2 * unit + 1)};
#pragma unroll
        for (int j = 0; j < kNt; ++j) {
          MmaAcc(af, bf[2 * j], bf[2 * j + 1], isum[i][j]);
          MmaAcc(am, bf[2 * j], bf[2 * j + 1], summs[i][j]);
        }
      }
    }
    // dall · isum − dmin · summs with dall = d_x · d, dmin = d_x · dmin (TpTermQ2_K).
#pragma unroll
    for (int i = 0; i < kMt; ++i) {
      const int r = wm0 + 16 * i + gq;
      const float d[2] = {sm.d[r], sm.d[r + 8]};
      const float dm[2] = {sm.dmin[r], sm.dmin[r + 8]};
#pragma unroll
      for (int j = 0; j < kNt; ++j) {
        const int t = wn0 + 8 * j + 2 * tig;
        const float dx[2] = {sm.pt.dx[buf][t], sm.pt.dx[buf][t + 1]};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float dall = __fmul_rn(dx[e & 1], d[e >> 1]);
          const float dmin = __fmul_rn(dx[e & 1], dm[e >> 1]);
          const float term = __fsub_rn(__fmul_rn(dall, __int2float_rn(isum[i][j][e])),
                                       __fmul_rn(dmin, __int2float_rn(summs[i][j][e])));
          acc[i][j][e] = __fadd_rn(acc[i][j][e], term);
        }
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < kMt; ++i) {
#pragma unroll
    for (int j = 0; j < kNt; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = row0 + wm0 + 16 * i + gq + 8 * (e >> 1);
        const int t = wn0 + 8 * j + 2 * tig + (e & 1);
        if (r < a.rows && t < count) {
          a.y[uint64_t(sm.pt.yrow[t]) * a.y_row_floats + r] = acc[i][j][e];
        }
      }
    }
  }
}

template <int BN>
bool LaunchDownTile(CudaBackend::State& s, const MatVecArgs& a) {
  static const cudaError_t raised =
      AllowSharedMemory(DownImmaQ2KKernel<BN>, int(sizeof(DownSmem<BN>)));
  if (raised != cudaSuccess) return false;
  const dim3 grid(a.n_tiles, CeilDiv(a.rows, Shape<BN>::kBM));
  s.Launch(DownImmaQ2KKernel<BN>, grid, dim3(kThreads), unsigned(sizeof(DownSmem<BN>)), a);
  return true;
}

template <int BN>
bool LaunchGateUpTile(CudaBackend::State& s, const GateUpArgs& g) {
  static const cudaError_t raised =
      AllowSharedMemory(GateUpImmaIq2Kernel<BN>, int(sizeof(Smem<BN>)));
  if (raised != cudaSuccess) return false;
  const dim3 grid(g.mv.n_tiles, CeilDiv(g.mv.rows, Shape<BN>::kBM));
  s.Launch(GateUpImmaIq2Kernel<BN>, grid, dim3(kThreads), unsigned(sizeof(Smem<BN>)), g);
  return true;
}

// launch(std::integral_constant<int, BN>) for the tile shape of tile_nt pairs (ImmaMoeTile's
// sizes; 32 for any other): the one place both products pick their kernel instance.
template <typename Launch>
bool WithTileShape(int tile_nt, Launch launch) {
  switch (tile_nt) {
    case kImmaNarrowPairs:
      return launch(std::integral_constant<int, kImmaNarrowPairs>{});
    case 64:
      return launch(std::integral_constant<int, 64>{});
    default:
      return launch(std::integral_constant<int, 32>{});
  }
}

}  // namespace

bool LaunchDownImmaQ2K(CudaBackend::State& s, const MatVecArgs& a) {
  if (a.tiles == nullptr || !ImmaMoeTile(a.tile_nt) || a.rows <= 0 || a.n % 256 != 0 ||
      a.row_bytes != uint64_t(a.n / 256) * 84 || reinterpret_cast<uintptr_t>(a.w) % 4 != 0 ||
      reinterpret_cast<uintptr_t>(a.x) % 16 != 0 || a.x_row_bytes % 16 != 0) {
    return false;
  }
  return WithTileShape(a.tile_nt,
                       [&](auto bn) { return LaunchDownTile<decltype(bn)::value>(s, a); });
}

bool LaunchGateUpImmaIq2(CudaBackend::State& s, const GateUpArgs& g) {
  const MatVecArgs& a = g.mv;
  const auto aligned = [](const void* p, int n) { return reinterpret_cast<uintptr_t>(p) % n == 0; };
  if (a.tiles == nullptr || !ImmaMoeTile(a.tile_nt) || a.rows <= 0 || a.n % 256 != 0 ||
      a.row_bytes != uint64_t(a.n / 256) * 66 || !aligned(a.w, 4) || !aligned(g.w_up, 4) ||
      !aligned(a.x, 16) || a.x_row_bytes % 16 != 0) {
    return false;
  }
  return WithTileShape(a.tile_nt,
                       [&](auto bn) { return LaunchGateUpTile<decltype(bn)::value>(s, g); });
}

}  // namespace flashkv::cuda
