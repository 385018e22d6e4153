// RmsNorm: x / sqrt(mean(x²) + eps) [· w], the sum of squares in double as ds4 does.
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_parallel.h"

namespace flashkv {

void CpuBackend::RmsNorm(DevPtr<const float> x, int n_rows, int n, const Weight* weight, float eps,
                         DevPtr<float> out) {
  const float* xs = x.get();
  float* os = out.get();
  const float* w = weight ? reinterpret_cast<const float*>(weight->data.get()) : nullptr;
  Parallel(n_rows, 8, [&](size_t r0, size_t r1, int) {
    for (size_t r = r0; r < r1; ++r) {
      const float* xr = xs + r * n;
      float* orow = os + r * n;
      double ss = 0.0;
      for (int i = 0; i < n; ++i) ss += double(xr[i]) * xr[i];
      const float scale = 1.0f / std::sqrt(float(ss / double(n)) + eps);
      if (w != nullptr) {
        for (int i = 0; i < n; ++i) orow[i] = xr[i] * scale * w[i];
      } else {
        for (int i = 0; i < n; ++i) orow[i] = xr[i] * scale;
      }
    }
  });
}

}  // namespace flashkv
