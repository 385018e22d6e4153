// The host side of quant_lanes.h: the GPU kernels' split of a DotQ8, run on the CPU so the
// split is held to ref::DotQ8 where no GPU is (compiled with -ffp-contract=off, like the
// reference).
#include <limits>

#include "tensor/dot_internal.h"
#include "tensor/iq1_tables.h"
#include "tensor/iq2_tables.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_lanes.h"

namespace flashkv::internal {
namespace {

template <DType T>
float ByLanes(const uint8_t* w, const BlockQ8_K* y, int64_t n, const uint64_t* grid) {
  const int bytes = static_cast<int>(GetDTypeInfo(T).block_bytes);
  lanes::Fold f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* blk = w + b * bytes;
    int32_t tot[8] = {};
    for (int t = 0; t < 32; ++t) {
      int32_t c[8];
      lanes::BlockTerms<T>(blk, y[b].qs, t, grid, c);
      for (int k = 0; k < 8; ++k) tot[k] += c[k];
    }
    lanes::FoldBlock<T>(f, blk, y[b].d, y[b].bsums, tot);
  }
  return lanes::FinishFold<T>(f);
}

template <DType T>
void DequantByLanes(const uint8_t* w, float* out, int64_t n, const uint64_t* grid) {
  const int bytes = static_cast<int>(GetDTypeInfo(T).block_bytes);
  for (int64_t b = 0; b < n / kQK_K; ++b)
    for (int t = 0; t < 32; ++t)
      lanes::DequantValues8<T>(w + b * bytes, t, grid, out + 256 * b + 8 * t);
}

}  // namespace

bool DequantizeRowByLanes(DType wtype, const void* wrow, float* out, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(wrow);
  switch (wtype) {
    case DType::kQ3_K:
      DequantByLanes<DType::kQ3_K>(w, out, n, nullptr);
      return true;
    case DType::kQ5_K:
      DequantByLanes<DType::kQ5_K>(w, out, n, nullptr);
      return true;
    case DType::kQ6_K:
      DequantByLanes<DType::kQ6_K>(w, out, n, nullptr);
      return true;
    case DType::kIQ2_XS:
      DequantByLanes<DType::kIQ2_XS>(w, out, n, kIq2xsGrid);
      return true;
    case DType::kIQ1_M:
      DequantByLanes<DType::kIQ1_M>(w, out, n, kIq1sGrid);
      return true;
    default:
      return false;
  }
}

float DotQ8ByLanes(DType wtype, const void* wrow, const void* xq, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(wrow);
  const auto* y = static_cast<const BlockQ8_K*>(xq);
  switch (wtype) {
    case DType::kQ3_K:
      return ByLanes<DType::kQ3_K>(w, y, n, nullptr);
    case DType::kQ5_K:
      return ByLanes<DType::kQ5_K>(w, y, n, nullptr);
    case DType::kQ6_K:
      return ByLanes<DType::kQ6_K>(w, y, n, nullptr);
    case DType::kIQ2_XS:
      return ByLanes<DType::kIQ2_XS>(w, y, n, kIq2xsGrid);
    case DType::kIQ1_M:
      return ByLanes<DType::kIQ1_M>(w, y, n, kIq1sGrid);
    default:
      return std::numeric_limits<float>::quiet_NaN();
  }
}

}  // namespace flashkv::internal
