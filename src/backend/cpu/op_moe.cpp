// MoeExperts: the routed experts of a token batch (spec §5 steps 4-5), ds4's order:
// for each chosen expert slot, mid = silu(min(gate·x, λ)) · clamp(up·x, ±λ) · w_slot
// (the route weight goes in before the down projection), then out[row] = Σ_slot
// down_e[row] · mid_slot, summed in slot order. With kQ8 the input is quantized once per
// token and every mid is requantized before the down projection (ds4's CPU path).
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_math.h"
#include "backend/cpu/cpu_parallel.h"
#include "tensor/dot.h"
#include "tensor/quant.h"

namespace flashkv {

void CpuBackend::MoeExperts(const MoeArgs& a) {
  const Weight& gate = *a.gate;
  const Weight& up = *a.up;
  const Weight& down = *a.down;
  const int64_t D = static_cast<int64_t>(gate.ne[0]);
  const int64_t F = static_cast<int64_t>(gate.ne[1]);
  const int k = a.n_used;
  const size_t n_slots = size_t(a.n_tokens) * k;
  const bool q8 = a.act_quant == ActQuantMode::kQ8;

  // Activation layouts the dots take: quantized blocks, or the f32 rows themselves.
  const ActQuant q_in = q8 ? ActQuantFor(gate.type) : ActQuant::kNone;
  const ActQuant q_mid = q8 ? ActQuantFor(down.type) : ActQuant::kNone;
  const int64_t in_bytes = ActQuantBytes(q_in, D);
  const int64_t mid_bytes = ActQuantBytes(q_mid, F);

  const float* x = a.x.get();
  const void* xin = x;
  if (q8 && q_in != ActQuant::kNone) {
    uint8_t* xq = Grow(moe_xq_, size_t(in_bytes) * a.n_tokens);
    Parallel(size_t(a.n_tokens), 1, [&](size_t t0, size_t t1, int) {
      for (size_t t = t0; t < t1; ++t) QuantizeAct(q_in, x + t * D, xq + t * in_bytes, D);
    });
    xin = xq;
  }
  const size_t in_stride = (q8 && q_in != ActQuant::kNone) ? size_t(in_bytes) : D * sizeof(float);
  auto dot = [q8](const Weight& w, const uint8_t* row, const void* act, int64_t n) {
    return q8 ? DotQ8(w.type, row, act, n) : DotF32(w.type, row, static_cast<const float*>(act), n);
  };

  // 1. Gate/up rows of every (token, slot): mid [n_tokens, k, F].
  float* mid = reinterpret_cast<float*>(Grow(moe_mid_, sizeof(float) * n_slots * F));
  const int32_t* sel = a.selected.get();
  const float* wts = a.weights.get();
  Parallel(n_slots * F, 64, [&](size_t i0, size_t i1, int) {
    for (size_t i = i0; i < i1; ++i) {
      const size_t slot = i / F;
      const int64_t row = int64_t(i % F);
      const size_t t = slot / k;
      const int64_t e = sel[slot];
      const void* act = static_cast<const uint8_t*>(xin) + t * in_stride;
      float g = dot(gate, gate.data.get() + e * gate.matrix_bytes() + row * gate.row_bytes, act, D);
      float u = dot(up, up.data.get() + e * up.matrix_bytes() + row * up.row_bytes, act, D);
      if (a.clamp > 1.0e-6f) {
        if (g > a.clamp) g = a.clamp;
        if (u > a.clamp) u = a.clamp;
        if (u < -a.clamp) u = -a.clamp;
      }
      mid[i] = cpu::Silu(g) * u * wts[slot];
    }
  });

  // 2. Requantize the mids for the down projection.
  const void* mids = mid;
  size_t mid_stride = F * sizeof(float);
  if (q8 && q_mid != ActQuant::kNone) {
    uint8_t* midq = Grow(moe_midq_, size_t(mid_bytes) * n_slots);
    Parallel(n_slots, 1, [&](size_t s0, size_t s1, int) {
      for (size_t s = s0; s < s1; ++s) QuantizeAct(q_mid, mid + s * F, midq + s * mid_bytes, F);
    });
    mids = midq;
    mid_stride = mid_bytes;
  }

  // 3. Down projections summed over slots: out [n_tokens, D].
  float* out = a.out.get();
  Parallel(size_t(a.n_tokens) * D, 64, [&](size_t i0, size_t i1, int) {
    for (size_t i = i0; i < i1; ++i) {
      const size_t t = i / D;
      const int64_t row = int64_t(i % D);
      float acc = 0.0f;
      for (int s = 0; s < k; ++s) {
        const size_t slot = t * k + s;
        const int64_t e = sel[slot];
        const void* act = static_cast<const uint8_t*>(mids) + slot * mid_stride;
        acc += dot(down, down.data.get() + e * down.matrix_bytes() + row * down.row_bytes, act, F);
      }
      out[i] = acc;
    }
  });
}

}  // namespace flashkv
