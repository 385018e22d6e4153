// The MoE FFN sublayer (docs/DS4_MODEL.md §5): router (hash or biased top-k), routed experts with
// the clamped SwiGLU, the shared expert, then HC_post. Reads act.x_hc, writes act.x_hc_next.
#include "model/chunk_context.h"

namespace flashkv {

void FfnSublayer(ChunkContext& c, int l) {
  Backend& be = c.be;
  const ModelConfig& cfg = c.cfg;
  const LayerWeights& w = c.weights.layers[l];
  Activations& a = c.act;
  const int T = c.n_tokens;
  const ActQuantMode aq = c.aq();
  const float clamp = cfg.swiglu_limit(l);

  // u, post, comb = HC_pre(X); x = RMSNorm(u) · ffn_norm
  be.HcPre(a.x_hc, T, w.hc_ffn_fn, w.hc_ffn_scale, w.hc_ffn_base, c.hc, a.u, a.post, a.comb);
  be.RmsNorm(a.u, T, cfg.n_embd, &w.ffn_norm, cfg.rms_eps, a.xn);

  // s = sqrt(softplus(W_gate x)); experts: tid2eid[token] or top-k(s + bias); weights
  // ρ · s_e / Σ s
  be.MatMul(w.ffn_gate_inp, a.xn, T, a.router, aq);
  RouterArgs route;
  route.logits = a.router;
  route.bias = w.ffn_exp_probs_b.present() ? &w.ffn_exp_probs_b : nullptr;
  route.tid2eid = cfg.is_hash_layer(l) ? &w.ffn_gate_tid2eid : nullptr;
  route.tokens = a.tokens;
  route.selected = a.experts;
  route.weights = a.expert_w;
  route.n_tokens = T;
  route.n_expert = cfg.n_expert;
  route.n_used = cfg.n_expert_used;
  route.weight_scale = cfg.expert_weights_scale;
  be.RouterSelect(route);

  // moe = Σ_e w_e · W2_e(silu(min(W1_e x, λ)) ⊙ clamp(W3_e x, ±λ))
  MoeArgs moe;
  moe.x = a.xn;
  moe.selected = a.experts;
  moe.weights = a.expert_w;
  moe.gate = &w.ffn_gate_exps;
  moe.up = &w.ffn_up_exps;
  moe.down = &w.ffn_down_exps;
  moe.out = a.moe_out;
  moe.n_tokens = T;
  moe.n_used = cfg.n_expert_used;
  moe.clamp = clamp;
  moe.act_quant = aq;
  be.MoeExperts(moe);

  // shared = W2_s(silu(min(W1_s x, λ)) ⊙ clamp(W3_s x, ±λ))
  be.MatMul(w.ffn_gate_shexp, a.xn, T, a.sh_gate, aq);
  be.MatMul(w.ffn_up_shexp, a.xn, T, a.sh_up, aq);
  be.SwiGlu(a.sh_gate, a.sh_up, a.sh_mid, size_t(T) * cfg.n_ff_exp, clamp);
  be.MatMul(w.ffn_down_shexp, a.sh_mid, T, a.sub_out, aq);

  // f = moe + shared; X' = post · f + combᵀ X
  be.Add(a.moe_out, a.sub_out, a.sub_out, size_t(T) * cfg.n_embd);
  be.HcPost(a.x_hc, a.sub_out, a.post, a.comb, T, c.hc, a.x_hc_next);
}

}  // namespace flashkv
