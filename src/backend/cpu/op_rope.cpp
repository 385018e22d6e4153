// Rope: interleaved rotation of the trailing n_rot channels of each head (spec §4.2).
// The angle pos·ω is formed and its cos/sin evaluated in double, then rounded to float,
// so large positions keep full precision; the rotation itself is fp32.
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_parallel.h"

namespace flashkv {

void CpuBackend::Rope(DevPtr<float> x, int n_rows, int n_heads, int head_dim, int n_rot,
                      int64_t pos0, int64_t pos_step, DevPtr<const float> freqs, bool inverse) {
  float* xs = x.get();
  const float* f = freqs.get();
  const int n_nope = head_dim - n_rot;
  const int n_pairs = n_rot / 2;
  Parallel(n_rows, 4, [&](size_t r0, size_t r1, int) {
    for (size_t r = r0; r < r1; ++r) {
      const double pos = double(pos0 + int64_t(r) * pos_step);
      for (int i = 0; i < n_pairs; ++i) {
        const double angle = pos * double(f[i]);
        const float c = float(std::cos(angle));
        const float s = inverse ? -float(std::sin(angle)) : float(std::sin(angle));
        for (int h = 0; h < n_heads; ++h) {
          float* tail = xs + (r * n_heads + h) * size_t(head_dim) + n_nope;
          const float x0 = tail[2 * i];
          const float x1 = tail[2 * i + 1];
          tail[2 * i] = x0 * c - x1 * s;
          tail[2 * i + 1] = x0 * s + x1 * c;
        }
      }
    }
  });
}

}  // namespace flashkv
