// RouterSelect: expert choice and weights (docs/DS4_MODEL.md §5 steps 1-3), ds4's order.
// s_e = sqrt(softplus(logit_e)). Hash layers take tid2eid[token]; top-k layers take the k
// best s_e + bias_e by insertion (strictly greater moves up, so an earlier expert wins a
// tie), listed best first. Weights are s_e / max(Σ s, 2⁻¹⁴) · scale over the chosen ones.
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_math.h"
#include "backend/cpu/cpu_parallel.h"

namespace flashkv {

void CpuBackend::RouterSelect(const RouterArgs& a) {
  const int E = a.n_expert;
  const int k = a.n_used;
  const float* bias = a.bias ? reinterpret_cast<const float*>(a.bias->data.get()) : nullptr;
  const int32_t* table =
      a.tid2eid ? reinterpret_cast<const int32_t*>(a.tid2eid->data.get()) : nullptr;
  Parallel(size_t(a.n_tokens), 16, [&](size_t t0, size_t t1, int) {
    // Expert counts are small (256 for Flash); the stack holds a token's scores.
    constexpr int kMaxExperts = 1024;
    float probs[kMaxExperts];
    float selection[kMaxExperts];
    for (size_t t = t0; t < t1; ++t) {
      const float* logits = a.logits.get() + t * E;
      int32_t* sel = a.selected.get() + t * k;
      float* w = a.weights.get() + t * k;
      for (int e = 0; e < E; ++e) probs[e] = std::sqrt(cpu::SoftplusStable(logits[e]));
      if (table != nullptr) {
        const int32_t token = a.tokens.get()[t];
        for (int s = 0; s < k; ++s) sel[s] = table[size_t(token) * k + s];
      } else {
        for (int e = 0; e < E; ++e) selection[e] = probs[e] + (bias ? bias[e] : 0.0f);
        for (int s = 0; s < k; ++s) sel[s] = -1;
        for (int e = 0; e < E; ++e) {
          for (int s = 0; s < k; ++s) {
            if (sel[s] < 0 || selection[e] > selection[sel[s]]) {
              for (int m = k - 1; m > s; --m) sel[m] = sel[m - 1];
              sel[s] = e;
              break;
            }
          }
        }
      }
      float sum = 0.0f;
      for (int s = 0; s < k; ++s) {
        w[s] = probs[sel[s]];
        sum += w[s];
      }
      if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
      for (int s = 0; s < k; ++s) w[s] = w[s] / sum * a.weight_scale;
    }
  });
}

}  // namespace flashkv
