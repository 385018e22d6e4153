// The coarse ops' default implementations: exactly the chains of fine ops they name
// (backend.h), in the order the model ran them before the ops existed. A backend that
// fuses a chain overrides the op and must reproduce these bits (docs/CUDA.md "How to add a
// fusion").
#include "backend/backend.h"
#include "backend/moe_route.h"

namespace flashkv {

void Backend::SublayerInput(const SublayerInputArgs& a) {
  const int T = a.n_tokens;
  HcPre(a.x_hc, T, *a.hc_fn, *a.hc_scale, *a.hc_base, a.hc, a.u, a.post, a.comb);
  RmsNorm(a.u, T, a.hc.n_embd, a.norm, a.eps, a.xn);
  for (int i = 0; i < a.n_proj; ++i) MatMul(*a.proj[i].w, a.xn, T, a.proj[i].y, a.aq);
}

void Backend::NormRope(const NormRopeArgs& a) {
  const int rows = a.n_rows * a.n_heads;
  RmsNorm(a.x, rows, a.head_dim, a.weight, a.eps, a.x);
  if (a.positions) {
    RopeAt(a.x, a.n_rows, a.n_heads, a.head_dim, a.rope, a.positions, false);
  } else {
    Rope(a.x, a.n_rows, a.n_heads, a.head_dim, a.rope, a.pos0, a.pos_step, false);
  }
  if (a.fp8_prefix > 0) Fp8RoundTrip(a.x, rows, a.head_dim, a.fp8_prefix);
  if (a.f16_round) F16Round(a.x, size_t(rows) * a.head_dim);
}

void Backend::FinishRowsBatch(const NormRopeArgs* rows, int n, bool hadamard_fp4) {
  for (int i = 0; i < n; ++i) {
    const NormRopeArgs& a = rows[i];
    if (a.n_rows <= 0) continue;
    NormRope(a);
    if (hadamard_fp4) {
      HadamardFp4(a.x, a.n_rows * a.n_heads, a.head_dim);
      F16Round(a.x, size_t(a.n_rows) * a.n_heads * a.head_dim);
    }
  }
}

void Backend::MoeBlock(const MoeBlockArgs& a) {
  const int T = a.n_tokens;
  const int n_embd = a.hc.n_embd;
  RouteMoeBlock(*this, a);

  MoeArgs moe;
  moe.x = a.x;
  moe.selected = a.selected;
  moe.weights = a.weights;
  moe.gate = a.gate;
  moe.up = a.up;
  moe.down = a.down;
  Weight gathered[3];
  if (a.gather != nullptr && GatherExperts(*a.gather, a.selected, T * a.n_used)) {
    const Weight* stacks[3] = {a.gate, a.up, a.down};
    for (int i = 0; i < 3; ++i) {
      gathered[i] = *stacks[i];
      gathered[i].experts =
          DevPtr<const uint8_t* const>(a.gather->out_tables.get() + size_t(i) * a.gather->n_expert);
    }
    moe.gate = &gathered[0];
    moe.up = &gathered[1];
    moe.down = &gathered[2];
  }
  moe.out = a.routed;
  moe.n_tokens = T;
  moe.n_used = a.n_used;
  moe.clamp = a.clamp;
  moe.act_quant = a.aq;
  MoeExperts(moe);

  const size_t n_ff_shared = size_t(a.shared_gate->ne[1]);
  MatMul(*a.shared_gate, a.x, T, a.shared_gate_out, a.aq);
  MatMul(*a.shared_up, a.x, T, a.shared_up_out, a.aq);
  SwiGlu(a.shared_gate_out, a.shared_up_out, a.shared_mid, size_t(T) * n_ff_shared, a.clamp);
  MatMul(*a.shared_down, a.shared_mid, T, a.f, a.aq);
  Add(a.routed, a.f, a.f, size_t(T) * n_embd);
  HcPost(a.x_hc, a.f, a.post, a.comb, T, a.hc, a.out);
}

}  // namespace flashkv
