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
constexpr int kScaleStride = 9;      // bytes per row of group scales (8, padded)

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

// The IQ2 grid's 256 8-byte entries are looked up at random, so a warp's lookups collide in
// the banks (5.7 wavefronts an LDS.64 where 2 would do: ncu, docs/PERFORMANCE.md "Batched
// decode steps: the narrow expert tiles measured"). C = 16 copies, entry e of copy c at
// [e · 16 + c] — copy c in bank pair c — and lane l reading copy l % 16 make every lookup
// conflict-free, for 30 KiB more shared memory: taken where two CTAs an SM still fit on
// Hopper (the tiles of 8 and 64 pairs; 32 has both larger tiles) and the device allows the
// size (LaunchGateUpTile; Ada's and consumer Blackwell's 99 KiB a block do not), else C = 1.
constexpr int kGridCopies = 16;

template <int BN, int C>
struct Smem {
  static constexpr int kBM = Shape<BN>::kBM;
  uint64_t grid[256 * C];
  PairTile<BN> pt;
  alignas(16) int8_t w[2][kBM * kRowBytes];  // decoded gate, up
  uint8_t scale[2][kBM * kScaleStride];      // 2·ls + 1 ≤ 31
  uint32_t dword[2][2][kBM];  // [buffer][matrix][row]: the aligned word holding the block's d
  uint8_t dhigh[2][2][kBM];   // whether d is that word's high half
};
// Two CTAs an SM (228 KiB, 1 KiB of it reserved per CTA).
static_assert(sizeof(Smem<kImmaNarrowPairs, kGridCopies>) <= 113 * 1024 &&
              sizeof(Smem<64, kGridCopies>) <= 113 * 1024 && sizeof(Smem<32, 1>) <= 113 * 1024);

// One (matrix, row, group) decode: the group's 8 raw bytes as loaded — the aligned words at
// and after them and the 2 bytes past those — put together only when decoded (DecodeRaw), so
// the loads stay in flight while the current super-block is multiplied.
struct RawItem {
  uint32_t w0 = 0, w1 = 0, w2 = 0;
};

// The gate (0) and up (1) matrices of the tile's expert: one table read per CTA, not one per
// load (the expert cache's table: ExpertMatrix).
struct ExpertMatrices {
  const uint8_t* m[2];
};
__device__ __forceinline__ ExpertMatrices MatricesOf(const GateUpArgs& g, int expert) {
  const MatVecArgs& a = g.mv;
  return {{ExpertMatrix(a.w, a.w_experts, expert, a.expert_bytes),
           ExpertMatrix(g.w_up, g.up_experts, expert, a.expert_bytes)}};
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

// Where the 16-byte half h of group grp's 32 decoded values sits in its row of the tile: the
// halves of groups 4-7 swapped, so the 8 lanes of a 16-byte store phase (one row's 8 groups,
// 32 bytes apart) write 8 different bank quads instead of 4 twice. ldmatrix reads one half of
// one group from 8 rows 272 bytes apart, conflict-free either way.
__device__ __forceinline__ int DecodedHalf(int grp, int h) {
  return 32 * grp + 16 * (h ^ (grp >> 2));
}

// Super-block sb's raw groups into registers (bit i of *unaligned: item i's group bytes start
// 2 past a 4-byte boundary), and (cp.async, committed with the same stage's activations) the
// word holding each row's d into dword[buf].
template <int BN, int C>
__device__ __forceinline__ void LoadRaw(const GateUpArgs& g, const ExpertMatrices& em,
                                        Smem<BN, C>& sm, int buf, int row0, int sb,
                                        RawItem (&raw)[Shape<BN>::kItems], uint32_t* unaligned) {
  // Blocks are 66 bytes, so a block starts 2 (mod 4) or 0: its groups' 8 bytes at
  // p = block + 2 + 8·grp are 4-byte aligned in the first case, and its d is then the high
  // half of the aligned word before it, else the low half of the word at the block. No load
  // leaves the block (the weights start 4-byte aligned, LaunchGateUpImmaIq2): the words at
  // p and p + 4, or at p − 2 and p + 2 and the 2 bytes at p + 6.
  const MatVecArgs& a = g.mv;
  uint32_t bits = 0;
#pragma unroll
  for (int i = 0; i < Shape<BN>::kItems; ++i) {
    int m, r, grp;
    ItemCoords<BN>(i, &m, &r, &grp);
    const uint8_t* blk =
        em.m[m] + uint64_t(min(row0 + r, a.rows - 1)) * a.row_bytes + uint64_t(66) * sb;
    const uint8_t* p = blk + 2 + 8 * grp;
    const uint32_t off = uint32_t(reinterpret_cast<uintptr_t>(p)) & 2u;
    const uint8_t* pa = p - off;
    if ((reinterpret_cast<uintptr_t>(pa) & 7) == 0) {  // one load for both words
      const uint2 w = __ldg(reinterpret_cast<const uint2*>(pa));
      raw[i].w0 = w.x;
      raw[i].w1 = w.y;
    } else {
      raw[i].w0 = __ldg(reinterpret_cast<const unsigned int*>(pa));
      raw[i].w1 = __ldg(reinterpret_cast<const unsigned int*>(pa + 4));
    }
    raw[i].w2 = off != 0 ? __ldg(reinterpret_cast<const unsigned short*>(p + 6)) : 0u;
    bits |= (off >> 1) << i;
    if (grp == 0) {
      CpAsync4(SmemAddr(&sm.dword[buf][m][r]), off == 0 ? blk - 2 : blk);
      sm.dhigh[buf][m][r] = off == 0;
    }
  }
  *unaligned = bits;
}
template <int BN, int C>
__device__ __forceinline__ float BlockD(const Smem<BN, C>& sm, int buf, int m, int r) {
  const uint32_t w = sm.dword[buf][m][r];
  return HalfBitsToFloat(uint16_t(sm.dhigh[buf][m][r] ? w >> 16 : w & 0xffffu));
}

// Signed magnitudes of a group (TpDecodeIQ2's words) into the decoded tile, and its scale.
template <int BN, int C>
__device__ __forceinline__ void DecodeRaw(Smem<BN, C>& sm, const RawItem (&raw)[Shape<BN>::kItems],
                                          uint32_t unaligned) {
  const int copy = int(threadIdx.x) % C;
#pragma unroll
  for (int i = 0; i < Shape<BN>::kItems; ++i) {
    int m, r, grp;
    ItemCoords<BN>(i, &m, &r, &grp);
    const uint32_t sel = (unaligned >> i) & 1u ? 0x5432u : 0x3210u;
    const uint32_t qa = __byte_perm(raw[i].w0, raw[i].w1, sel);  // 4 grid indices
    const uint32_t qb = __byte_perm(raw[i].w1, raw[i].w2, sel);  // 4 × 7 sign bits, scale
    uint32_t v[8];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint64_t gv = sm.grid[((qa >> (8 * k)) & 0xffu) * C + copy];
      uint32_t c_lo, c_hi;
      Iq2SignBits((qb >> (7 * k)) & 127u, &c_lo, &c_hi);
      v[2 * k] = Iq2SignedBits(uint32_t(gv), c_lo);
      v[2 * k + 1] = Iq2SignedBits(uint32_t(gv >> 32), c_hi);
    }
    int8_t* row = sm.w[m] + r * kRowBytes;
    *reinterpret_cast<uint4*>(row + DecodedHalf(grp, 0)) = make_uint4(v[0], v[1], v[2], v[3]);
    *reinterpret_cast<uint4*>(row + DecodedHalf(grp, 1)) = make_uint4(v[4], v[5], v[6], v[7]);
    sm.scale[m][r * kScaleStride + grp] = uint8_t(2 * (qb >> 28) + 1);
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

template <int BN, int C>
__global__ void __launch_bounds__(kThreads, 2) GateUpImmaIq2Kernel(GateUpArgs g) {
  using S = Shape<BN>;
  constexpr int kBM = S::kBM, kBN = S::kBN, kWM = S::kWM, kWN = S::kWN, kMt = S::kMt, kNt = S::kNt;
  const MatVecArgs& a = g.mv;
  const int* tile = a.tiles + 3 * blockIdx.x;
  const int count = tile[2];
  if (count == 0) return;
  const int expert = tile[0];
  extern __shared__ __align__(16) uint8_t gu_smem[];
  Smem<BN, C>& sm = *reinterpret_cast<Smem<BN, C>*>(gu_smem);
  const int row0 = blockIdx.y * kBM;
  for (int i = threadIdx.x; i < 256 * C; i += kThreads) {
    sm.grid[i] = a.iq2_grid[i / C];
  }
  SetupPairs(a, tile, count, sm.pt);
  const int nsb = a.n / 256;
  const ExpertMatrices em = MatricesOf(g, expert);
  RawItem raw[S::kItems];
  uint32_t unaligned = 0;
  __syncthreads();  // grid and pair rows
  LoadRaw(g, em, sm, 0, row0, 0, raw, &unaligned);
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
  // ARowOffset's rows, with the halves of groups 4-7 where DecodedHalf put them.
  const int a_row = wm0 * kRowBytes + ARowOffset(lane) - 16 * (lane >> 4);
  const int b_off = wn0 * kRowBytes + BRowOffset(lane);

  for (int sb = 0; sb < nsb; ++sb) {
    const int buf = sb & 1;
    DecodeRaw(sm, raw, unaligned);  // the previous super-block's products are done (loop end)
    if (sb + 1 < nsb) {
      LoadRaw(g, em, sm, buf ^ 1, row0, sb + 1, raw, &unaligned);
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
          LdMatrixX4(SmemAddr(sm.w[m]) + a_row + 16 * i * kRowBytes + DecodedHalf(grp, lane >> 4),
                     af);
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
// integer sum, scales included, accumulated in the MMA over the super-block. The mins part
// Σ_j min_j · bsum_j (16 groups) is a k = 16 product of the rows' mins (from the scale bytes'
// high nibbles) and the pairs' bsums (Q8_K's per-16 sums of the same quants), each bsum split
// as 256·hi + lo into its high byte (signed) and low byte (unsigned): two m16n8k16 MMAs a
// super-block instead of one m16n8k32 per 32 values — integers, so the same sum. The term is
// then TpTermQ2_K's.
constexpr int kQ2Words = 21;  // words of an 84-byte Q2_K block

template <int BN>
struct DownSmem {
  static constexpr int kBM = Shape<BN>::kBM;
  PairTile<BN> pt;
  uint32_t raw[2][kBM * kQ2Words];        // the rows' blocks of a super-block, as stored
  alignas(16) int8_t w[kBM * kRowBytes];  // q · (scale & 15)
  alignas(16) uint8_t sc[kBM * 16];       // the 16 scale bytes (mins in the high nibbles)
  alignas(16) int16_t bs[2][BN * 16];     // the pairs' bsums of a super-block
  float d[kBM];
  float dmin[kBM];
};

// Row r's 64 quant bytes are two halves h (units 4h … 4h + 3) of 8 words; kThreads / kBM
// threads share a row: 2 (tiles of 128 rows) take a half each, 4 (64 rows) a half's words 0-3
// or 4-7 — the 16-value groups 2·unit or 2·unit + 1 of every unit of the half. A warp's
// lanes take 32 consecutive rows and one part: their reads of the raw blocks (84 bytes
// apart) and their 16-byte stores of decoded values (272 apart) fall in distinct banks.
template <int BN>
struct Q2Part {
  static constexpr int kBM = Shape<BN>::kBM;
  static constexpr int kPerRow = kThreads / kBM;  // 2 or 4
  static constexpr int kWords = 16 / kPerRow;     // 8 or 4
  static __device__ __forceinline__ int Row() { return threadIdx.x % kBM; }
  static __device__ __forceinline__ int Part() { return threadIdx.x / kBM; }
  static __device__ __forceinline__ int Half() { return Part() / (kPerRow / 2); }
  static __device__ __forceinline__ int Word0() { return (Part() % (kPerRow / 2)) * kWords; }
};

template <int BN>
struct Q2Raw {
  uint32_t q[Q2Part<BN>::kWords];
  uint32_t sc[2];  // the half's 8 scale bytes
  uint32_t dd;     // d | dmin << 16 (the row's first thread)
};

// Super-block sb's blocks of the tile's rows into raw[buf] (cp.async, committed with the same
// stage's activations): consecutive threads copy consecutive words, so a warp's copy is 128
// contiguous bytes rather than a word from each of 16 rows.
// 84-byte blocks in rows of a multiple of 84 bytes: every word is 4-byte aligned.
template <int BN>
__device__ __forceinline__ void CopyRawQ2(const MatVecArgs& a, const uint8_t* matrix,
                                          DownSmem<BN>& sm, int buf, int row0, int sb) {
  constexpr int kBM = Shape<BN>::kBM;
  const uint32_t dst = SmemAddr(sm.raw[buf]);
  const uint8_t* base = matrix + uint64_t(84) * sb;
#pragma unroll
  for (int w = threadIdx.x; w < kBM * kQ2Words; w += kThreads) {
    const int r = w / kQ2Words;
    const uint8_t* src =
        base + uint64_t(min(row0 + r, a.rows - 1)) * a.row_bytes + 4 * (w - r * kQ2Words);
    CpAsync4(dst + 4 * w, src);
  }
}

// This thread's words of its row's block (Q2Part) from raw[buf].
template <int BN>
__device__ __forceinline__ void ReadRawQ2(const DownSmem<BN>& sm, int buf, Q2Raw<BN>& raw) {
  using P = Q2Part<BN>;
  const int r = P::Row(), h = P::Half(), k0 = P::Word0();
  const uint32_t* blk = sm.raw[buf] + r * kQ2Words;
#pragma unroll
  for (int k = 0; k < P::kWords; ++k) raw.q[k] = blk[4 + 8 * h + k0 + k];
  raw.sc[0] = blk[2 * h];
  raw.sc[1] = blk[2 * h + 1];
  raw.dd = P::Part() == 0 ? blk[20] : 0u;
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
  if (P::Part() == 0) {
    sm.d[r] = HalfBitsToFloat(uint16_t(raw.dd & 0xffffu));
    sm.dmin[r] = HalfBitsToFloat(uint16_t(raw.dd >> 16));
  }
}

// The pairs' 16 bsums of super-block sb into bs[buf] (cp.async, 4 bytes at a time: a row's
// bsums are 16-byte aligned only when n is a multiple of 1,024), committed with LoadX's copies.
template <int BN>
__device__ __forceinline__ void LoadBsums(const MatVecArgs& a, DownSmem<BN>& sm, int buf, int sb) {
  const uint32_t dst = SmemAddr(sm.bs[buf]);
  const uint64_t off = uint64_t(a.n) + uint64_t(4) * (a.n / 256) + uint64_t(32) * sb;
  for (int i = threadIdx.x; i < BN * 8; i += kThreads) {
    const int t = i >> 3, c = i & 7;
    CpAsync4(dst + 32 * t + 4 * c, a.x + uint64_t(sm.pt.xrow[t]) * a.x_row_bytes + off + 4 * c);
  }
}

// Mins of groups 4t … 4t + 3 of row r (an m16n8k16 A word).
template <int BN>
__device__ __forceinline__ uint32_t MinWord(const DownSmem<BN>& sm, int r, int tig) {
  return (*reinterpret_cast<const uint32_t*>(sm.sc + r * 16 + 4 * tig) >> 4) & 0x0f0f0f0fu;
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
  // The expert's matrix: one table read per CTA (ExpertMatrix).
  const uint8_t* matrix = ExpertMatrix(a.w, a.w_experts, expert, a.expert_bytes);
  CopyRawQ2(a, matrix, sm, 0, row0, 0);
  __syncthreads();  // pair rows
  LoadX(a, sm.pt, 0, 0);
  LoadBsums(a, sm, 0, 0);
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
    // This super-block's blocks and activations have landed, and every warp is done with the
    // previous one's (the other buffers, the decoded tile): the next copies may start.
    CpAsyncWait<0>();
    __syncthreads();
    if (sb + 1 < nsb) {
      CopyRawQ2(a, matrix, sm, buf ^ 1, row0, sb + 1);
      LoadX(a, sm.pt, buf ^ 1, sb + 1);
      LoadBsums(a, sm, buf ^ 1, sb + 1);
    }
    CpAsyncCommit();
    Q2Raw<BN> raw;
    ReadRawQ2(sm, buf, raw);
    DecodeQ2(sm, raw);
    __syncthreads();  // the decoded tile

    int isum[kMt][kNt][4], summs[kMt][kNt][4];
#pragma unroll
    for (int i = 0; i < kMt; ++i) {
#pragma unroll
      for (int j = 0; j < kNt; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) isum[i][j][e] = 0;
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
#pragma unroll
        for (int j = 0; j < kNt; ++j) MmaAcc(af, bf[2 * j], bf[2 * j + 1], isum[i][j]);
      }
    }
    // The mins part: bsums 4t … 4t + 3 of pair gq of each 8-pair tile, as low and high bytes.
    uint32_t blo[kNt], bhi[kNt];
#pragma unroll
    for (int j = 0; j < kNt; ++j) {
      const uint2 v =
          *reinterpret_cast<const uint2*>(sm.bs[buf] + (wn0 + 8 * j + gq) * 16 + 4 * tig);
      blo[j] = __byte_perm(v.x, v.y, 0x6420);
      bhi[j] = __byte_perm(v.x, v.y, 0x7531);
    }
#pragma unroll
    for (int i = 0; i < kMt; ++i) {
      const int r = wm0 + 16 * i + gq;
      const uint32_t am[2] = {MinWord(sm, r, tig), MinWord(sm, r + 8, tig)};
#pragma unroll
      for (int j = 0; j < kNt; ++j) {
        int lo[4], hi[4];
        MmaK16U8<false>(am, blo[j], lo);
        MmaK16U8<true>(am, bhi[j], hi);
#pragma unroll
        for (int e = 0; e < 4; ++e) summs[i][j][e] = hi[e] * 256 + lo[e];
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

template <int BN, int C>
bool LaunchGateUpCopies(CudaBackend::State& s, const GateUpArgs& g) {
  static const cudaError_t raised =
      AllowSharedMemory(GateUpImmaIq2Kernel<BN, C>, int(sizeof(Smem<BN, C>)));
  if (raised != cudaSuccess) return false;
  const dim3 grid(g.mv.n_tiles, CeilDiv(g.mv.rows, Shape<BN>::kBM));
  s.Launch(GateUpImmaIq2Kernel<BN, C>, grid, dim3(kThreads), unsigned(sizeof(Smem<BN, C>)), g);
  return true;
}

// The grid's copies (Smem) where the device gives a block their shared memory.
template <int BN>
bool LaunchGateUpTile(CudaBackend::State& s, const GateUpArgs& g) {
  if constexpr (BN != 32) {
    if (s.moe_grid_copies && s.prop.sharedMemPerBlockOptin >= sizeof(Smem<BN, kGridCopies>)) {
      return LaunchGateUpCopies<BN, kGridCopies>(s, g);
    }
  }
  return LaunchGateUpCopies<BN, 1>(s, g);
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
