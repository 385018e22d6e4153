// The two ends of the hyper-connection residual (docs/DS4_MODEL.md §2, §3, §6): the embedding
// broadcast into n_hc streams, and the final HC head → norm → lm head. The per-sublayer
// HC_pre / HC_post steps are backend ops called from attention.cpp and moe.cpp (HC_pre inside
// SublayerInput, whose arguments SublayerInputOf fills).
#include "model/chunk_context.h"

namespace flashkv {

HcParams MakeHcParams(const ModelConfig& cfg) {
  HcParams p;
  p.n_hc = cfg.n_hc;
  p.n_embd = cfg.n_embd;
  p.sinkhorn_iters = cfg.hc_sinkhorn_iters;
  p.norm_eps = cfg.rms_eps;  // the flattened-stream norm uses rms_norm_eps, not hc_eps
  p.hc_eps = cfg.hc_eps;
  return p;
}

SublayerInputArgs SublayerInputOf(const StepContext& s, const Weight& hc_fn, const Weight& hc_scale,
                                  const Weight& hc_base, const Weight& norm) {
  SublayerInputArgs in;
  in.x_hc = s.act.x_hc;
  in.n_tokens = s.n_rows;
  in.hc_fn = &hc_fn;
  in.hc_scale = &hc_scale;
  in.hc_base = &hc_base;
  in.hc = s.hc;
  in.norm = &norm;
  in.eps = s.cfg.rms_eps;
  in.u = s.act.u;
  in.post = s.act.post;
  in.comb = s.act.comb;
  in.xn = s.act.xn;
  in.aq = s.aq();
  return in;
}

void EmbedRows(StepContext& s) {
  // X = [e, e, …, e]: n_hc identical streams (no scaling, no position embedding).
  s.be.EmbedRows(s.weights.token_embd, s.act.tokens, s.n_rows, s.cfg.n_hc, s.act.x_hc);
}

void OutputHead(StepContext& s, DevPtr<const float> x_hc, int n) {
  const ModelWeights& w = s.weights;
  Activations& a = s.act;
  const ModelConfig& cfg = s.cfg;
  // y = HC_head(X)
  s.be.HcHead(x_hc, n, w.output_hc_fn, w.output_hc_scale, w.output_hc_base, s.hc, a.y);
  // y = RMSNorm(y) · output_norm
  s.be.RmsNorm(a.y, n, cfg.n_embd, &w.output_norm, cfg.rms_eps, a.y);
  // logits = W_head · y
  s.be.MatMul(w.output, a.y, n, a.logits, s.aq());
}

}  // namespace flashkv
