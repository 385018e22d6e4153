// MoeExperts: the routed experts of a token batch (docs/DS4_MODEL.md §5 steps 4-5), ds4's order:
// for each chosen expert slot, mid = silu(min(gate·x, λ)) · clamp(up·x, ±λ) · w_slot
// (the route weight goes in before the down projection), then out[row] = Σ_slot
// down_e[row] · mid_slot, summed in slot order from 0. With kQ8 the input is quantized once
// per token and every mid is requantized before the down projection (ds4's CPU path).
//
// Batching: the (token, slot) pairs are grouped by expert so each chosen expert's matrices
// are read once per batch (tensor/'s multi-token kernels give every output the bits of a
// single-token dot). The down projections run one slot at a time, each slot's result added
// to the running sums in slot order, so the float order per token equals a batch of one.
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_math.h"
#include "backend/cpu/cpu_parallel.h"
#include "tensor/dot.h"
#include "tensor/matmul.h"
#include "tensor/quant.h"

namespace flashkv {

void CpuBackend::MoeExperts(const MoeArgs& a) {
  const Weight& gate = *a.gate;
  const Weight& up = *a.up;
  const Weight& down = *a.down;
  const int64_t D = static_cast<int64_t>(gate.ne[0]);
  const int64_t F = static_cast<int64_t>(gate.ne[1]);
  const int64_t n_expert = static_cast<int64_t>(gate.ne[2]);
  const int k = a.n_used;
  const int T = a.n_tokens;
  const size_t n_slots = size_t(T) * k;
  const bool q8 = a.act_quant == ActQuantMode::kQ8;
  const int32_t* sel = a.selected.get();
  const float* wts = a.weights.get();

  // Activation rows as the dots take them: quantized blocks (q8) or f32.
  const ActQuant q_in = q8 ? ActQuantFor(gate.type) : ActQuant::kNone;
  const ActQuant q_mid = q8 ? ActQuantFor(down.type) : ActQuant::kNone;
  const size_t in_bytes = size_t(ActQuantBytes(q_in, D));
  const size_t mid_bytes = size_t(ActQuantBytes(q_mid, F));
  auto matmul = [&](const Weight& w, int64_t e, const uint8_t* acts, int64_t n_tok, float* y) {
    const uint8_t* we = w.experts ? w.experts.get()[e] : w.data.get() + e * w.matrix_bytes();
    const int64_t rows = int64_t(w.ne[1]);
    const int64_t n = int64_t(w.ne[0]);
    if (q8) {
      MatMulQ8Prequantized(w.type, we, rows, n, acts, n_tok, y, pool_);
    } else {
      MatMulF32(w.type, we, rows, n, reinterpret_cast<const float*>(acts), n_tok, y, pool_);
    }
  };

  // Slots grouped by expert (counting sort): order[first[e] .. first[e+1]) are e's slots,
  // ascending.
  int32_t* first = reinterpret_cast<int32_t*>(Grow(moe_first_, sizeof(int32_t) * (n_expert + 1)));
  int32_t* order = reinterpret_cast<int32_t*>(Grow(moe_order_, sizeof(int32_t) * n_slots));
  std::memset(first, 0, sizeof(int32_t) * (n_expert + 1));
  for (size_t s = 0; s < n_slots; ++s) ++first[sel[s] + 1];
  for (int64_t e = 0; e < n_expert; ++e) first[e + 1] += first[e];
  {
    int32_t* fill = reinterpret_cast<int32_t*>(Grow(moe_fill_, sizeof(int32_t) * n_expert));
    std::memcpy(fill, first, sizeof(int32_t) * n_expert);
    for (size_t s = 0; s < n_slots; ++s) order[fill[sel[s]]++] = int32_t(s);
  }

  // 1. Input rows, quantized once per token.
  uint8_t* xin = Grow(moe_xq_, in_bytes * T);
  Parallel(size_t(T), 1, [&](size_t t0, size_t t1, int) {
    for (size_t t = t0; t < t1; ++t) QuantizeAct(q_in, a.x.get() + t * D, xin + t * in_bytes, D);
  });

  // 2. Gate/up per expert over its slots' tokens → mid [n_slots, F].
  float* mid = reinterpret_cast<float*>(Grow(moe_mid_, sizeof(float) * n_slots * F));
  uint8_t* gathered = Grow(moe_gather_, std::max(in_bytes, mid_bytes) * n_slots);
  float* g = reinterpret_cast<float*>(Grow(moe_gate_, sizeof(float) * 2 * n_slots * F));
  float* u = g + n_slots * F;
  for (int64_t e = 0; e < n_expert; ++e) {
    const int32_t c = first[e + 1] - first[e];
    if (c == 0) continue;
    const int32_t* slots = order + first[e];
    for (int32_t i = 0; i < c; ++i) {
      std::memcpy(gathered + i * in_bytes, xin + size_t(slots[i] / k) * in_bytes, in_bytes);
    }
    matmul(gate, e, gathered, c, g);
    matmul(up, e, gathered, c, u);
    for (int32_t i = 0; i < c; ++i) {
      const float w_slot = wts[slots[i]];
      float* m = mid + size_t(slots[i]) * F;
      for (int64_t f = 0; f < F; ++f) {
        float gv = g[size_t(i) * F + f];
        float uv = u[size_t(i) * F + f];
        if (a.clamp > 1.0e-6f) {
          if (gv > a.clamp) gv = a.clamp;
          if (uv > a.clamp) uv = a.clamp;
          if (uv < -a.clamp) uv = -a.clamp;
        }
        m[f] = cpu::Silu(gv) * uv * w_slot;
      }
    }
  }

  // 3. Mids requantized for the down projection.
  uint8_t* midq = Grow(moe_midq_, mid_bytes * n_slots);
  Parallel(n_slots, 1, [&](size_t s0, size_t s1, int) {
    for (size_t s = s0; s < s1; ++s) QuantizeAct(q_mid, mid + s * F, midq + s * mid_bytes, F);
  });

  // 4. Down projections, slot by slot, each added to out in slot order.
  float* out = a.out.get();
  float* y = reinterpret_cast<float*>(Grow(moe_down_, sizeof(float) * size_t(T) * D));
  std::memset(out, 0, sizeof(float) * size_t(T) * D);
  for (int s = 0; s < k; ++s) {
    for (int64_t e = 0; e < n_expert; ++e) {
      // This slot's tokens routed to e, in token order.
      int32_t c = 0;
      for (int32_t i = first[e]; i < first[e + 1]; ++i) {
        if (order[i] % k != s) continue;
        std::memcpy(gathered + size_t(c) * mid_bytes, midq + size_t(order[i]) * mid_bytes,
                    mid_bytes);
        ++c;
      }
      if (c == 0) continue;
      matmul(down, e, gathered, c, y);
      int32_t j = 0;
      for (int32_t i = first[e]; i < first[e + 1]; ++i) {
        if (order[i] % k != s) continue;
        float* o = out + size_t(order[i] / k) * D;
        const float* yr = y + size_t(j++) * D;
        for (int64_t d = 0; d < D; ++d) o[d] += yr[d];
      }
    }
  }
}

}  // namespace flashkv
