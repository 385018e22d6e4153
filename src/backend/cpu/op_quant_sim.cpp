// Fp8RoundTrip, HadamardFp4, F16Round: the official model's KV / indexer precision steps,
// applied row by row (see quant_sim.h for the formulas).
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_parallel.h"
#include "backend/cpu/quant_sim.h"
#include "tensor/half.h"

namespace flashkv {

void CpuBackend::Fp8RoundTrip(DevPtr<float> x, int n_rows, int row_dim, int n_prefix) {
  float* xs = x.get();
  Parallel(n_rows, 16, [&](size_t r0, size_t r1, int) {
    for (size_t r = r0; r < r1; ++r) cpu::Fp8RoundTripBlocks(xs + r * row_dim, n_prefix);
  });
}

void CpuBackend::HadamardFp4(DevPtr<float> x, int n_rows, int row_dim) {
  float* xs = x.get();
  Parallel(n_rows, 16, [&](size_t r0, size_t r1, int) {
    for (size_t r = r0; r < r1; ++r) {
      cpu::HadamardScaled(xs + r * row_dim, row_dim);
      cpu::Fp4RoundTripBlocks(xs + r * row_dim, row_dim);
    }
  });
}

void CpuBackend::F16Round(DevPtr<float> x, size_t n) {
  float* xs = x.get();
  for (size_t i = 0; i < n; ++i) xs[i] = F16ToF32(F32ToF16(xs[i]));
}

}  // namespace flashkv
