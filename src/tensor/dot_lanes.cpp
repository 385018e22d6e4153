// The host side of quant_lanes.h: the GPU kernels' split of a DotQ8, run on the CPU so the
// split is held to ref::DotQ8 where no GPU is (compiled with -ffp-contract=off, like the
// reference).
#include <limits>
#include <type_traits>

#include "tensor/dot_internal.h"
#include "tensor/iq1_tables.h"
#include "tensor/iq2_tables.h"
#include "tensor/iq3_tables.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_lanes.h"

namespace flashkv::internal {
namespace {

template <DType T>
const void* HostGrid() {
  if constexpr (T == DType::kIQ2_XS) return kIq2xsGrid;
  if constexpr (T == DType::kIQ2_S) return kIq2sGrid;
  if constexpr (T == DType::kIQ1_M || T == DType::kIQ1_S) return kIq1sGrid;
  if constexpr (T == DType::kIQ3_XXS) return kIq3xxsGrid;
  if constexpr (T == DType::kIQ3_S) return kIq3sGrid;
  return nullptr;
}

template <DType T>
float ByLanes(const uint8_t* w, const BlockQ8_K* y, int64_t n) {
  constexpr int kBytes = lanes::LanesBlockBytes(T);
  lanes::Fold f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * kBytes;
    int32_t tot[8] = {};
    for (int t = 0; t < 32; ++t) {
      int32_t c[8];
      lanes::BlockTerms<T>(blk, y[b].qs, t, HostGrid<T>(), c);
      for (int k = 0; k < 8; ++k) tot[k] += c[k];
    }
    lanes::FoldBlock<T>(f, blk, y[b].d, y[b].bsums, tot);
  }
  return lanes::FinishFold<T>(f);
}

template <DType T>
void DequantByLanes(const uint8_t* w, float* out, int64_t n) {
  constexpr int kBytes = lanes::LanesBlockBytes(T);
  for (int64_t b = 0; b < n / kQK_K; ++b)
    for (int t = 0; t < 32; ++t)
      lanes::DequantValues8<T>(w + b * kBytes, t, HostGrid<T>(), out + 256 * b + 8 * t);
}

// Calls fn(integral_constant<DType, T>) for the types DequantValues8 takes; false otherwise.
template <typename Fn>
bool WithLaneType(DType t, Fn&& fn) {
  switch (t) {
#define FLASHKV_LANE_CASE(T)                       \
  case DType::T:                                   \
    fn(std::integral_constant<DType, DType::T>{}); \
    return true;
    FLASHKV_LANE_CASE(kQ3_K)
    FLASHKV_LANE_CASE(kQ5_K)
    FLASHKV_LANE_CASE(kQ6_K)
    FLASHKV_LANE_CASE(kIQ2_XS)
    FLASHKV_LANE_CASE(kIQ1_M)
    FLASHKV_LANE_CASE(kIQ3_XXS)
    FLASHKV_LANE_CASE(kIQ3_S)
    FLASHKV_LANE_CASE(kIQ2_S)
    FLASHKV_LANE_CASE(kIQ1_S)
    FLASHKV_LANE_CASE(kIQ4_XS)
    FLASHKV_LANE_CASE(kIQ4_NL)
    FLASHKV_LANE_CASE(kMXFP4)
#undef FLASHKV_LANE_CASE
    default:
      return false;
  }
}

}  // namespace

bool DequantizeRowByLanes(DType wtype, const void* wrow, float* out, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(wrow);
  return WithLaneType(wtype, [&](auto t) { DequantByLanes<decltype(t)::value>(w, out, n); });
}

float DotQ8ByLanes(DType wtype, const void* wrow, const void* xq, int64_t n) {
  float r = std::numeric_limits<float>::quiet_NaN();
  if (!lanes::HasLanes(wtype)) return r;
  const auto* w = static_cast<const uint8_t*>(wrow);
  const auto* y = static_cast<const BlockQ8_K*>(xq);
  WithLaneType(wtype, [&](auto t) {
    if constexpr (lanes::HasLanes(decltype(t)::value)) r = ByLanes<decltype(t)::value>(w, y, n);
  });
  return r;
}

}  // namespace flashkv::internal
