// The MoE FFN sublayer (docs/DS4_MODEL.md §5): router (hash or biased top-k), routed experts with
// the clamped SwiGLU, the shared expert, then HC_post. Reads act.x_hc, writes act.x_hc_next.
#include "model/chunk_context.h"
#include "model/expert_cache.h"
#include "model/sharded_moe.h"

namespace flashkv {

void FfnSublayer(StepContext& s, int l) {
  Backend& be = s.be;
  const ModelConfig& cfg = s.cfg;
  const LayerWeights& w = s.weights.layers[l];
  Activations& a = s.act;
  const int T = s.n_rows;  // every row of the step: the FFN reads no sequence state
  const ActQuantMode aq = s.aq();

  // u, post, comb = HC_pre(X); x = RMSNorm(u) · ffn_norm
  be.SublayerInput(SublayerInputOf(s, w.hc_ffn_fn, w.hc_ffn_scale, w.hc_ffn_base, w.ffn_norm));

  MoeBlockArgs moe;
  moe.x = a.xn;
  moe.n_tokens = T;
  moe.aq = aq;
  // s = sqrt(softplus(W_gate x)); experts: tid2eid[token] or top-k(s + bias); weights
  // ρ · s_e / Σ s
  moe.router = &w.ffn_gate_inp;
  moe.router_bias = w.ffn_exp_probs_b.present() ? &w.ffn_exp_probs_b : nullptr;
  moe.tid2eid = cfg.is_hash_layer(l) ? &w.ffn_gate_tid2eid : nullptr;
  moe.tokens = a.tokens;
  moe.logits = a.router;
  moe.selected = a.experts;
  moe.weights = a.expert_w;
  moe.n_used = cfg.n_expert_used;
  moe.weight_scale = cfg.expert_weights_scale;
  // routed = Σ_e w_e · W2_e(silu(min(W1_e x, λ)) ⊙ clamp(W3_e x, ±λ))
  moe.gate = &w.ffn_gate_exps;
  moe.up = &w.ffn_up_exps;
  moe.down = &w.ffn_down_exps;
  if (s.staged_experts) {
    moe.gate = &s.cache->StagedStack(l, 0);
    moe.up = &s.cache->StagedStack(l, 1);
    moe.down = &s.cache->StagedStack(l, 2);
  } else if (s.gathered_experts) {
    moe.gather = s.cache->Gather(l);
  }
  moe.clamp = cfg.swiglu_limit(l);
  moe.routed = a.moe_out;
  // shared = W2_s(silu(min(W1_s x, λ)) ⊙ clamp(W3_s x, ±λ)); f = routed + shared
  moe.shared_gate = &w.ffn_gate_shexp;
  moe.shared_up = &w.ffn_up_shexp;
  moe.shared_down = &w.ffn_down_shexp;
  moe.shared_gate_out = a.sh_gate;
  moe.shared_up_out = a.sh_up;
  moe.shared_mid = a.sh_mid;
  moe.f = a.sub_out;
  // X' = post · f + combᵀ X
  moe.x_hc = a.x_hc;
  moe.post = a.post;
  moe.comb = a.comb;
  moe.hc = s.hc;
  moe.out = a.x_hc_next;
  if (s.experts != nullptr) {
    s.experts->MoeBlock(be, l, moe);
  } else {
    be.MoeBlock(moe);
  }
  if (s.cache != nullptr) {
    be.CountRoutes(a.experts, T * cfg.n_expert_used, cfg.n_expert, s.cache->counts(l));
  }
}

}  // namespace flashkv
