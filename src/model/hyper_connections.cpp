// The two ends of the hyper-connection residual (docs/DS4_MODEL.md §2, §3, §6): the embedding
// broadcast into n_hc streams, and the final HC head → norm → lm head. The per-sublayer
// HC_pre / HC_post steps are single backend ops called from attention.cpp and moe.cpp.
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

void EmbedChunk(ChunkContext& c) {
  // X = [e, e, …, e]: n_hc identical streams (no scaling, no position embedding).
  c.be.EmbedRows(c.weights.token_embd, c.act.tokens, c.n_tokens, c.cfg.n_hc, c.act.x_hc);
}

void OutputHead(ChunkContext& c, int first, int n) {
  const ModelWeights& w = c.weights;
  Activations& a = c.act;
  const ModelConfig& cfg = c.cfg;
  // y = HC_head(X)
  c.be.HcHead(a.x_hc + size_t(first) * cfg.hc_dim(), n, w.output_hc_fn, w.output_hc_scale,
              w.output_hc_base, c.hc, a.y);
  // y = RMSNorm(y) · output_norm
  c.be.RmsNorm(a.y, n, cfg.n_embd, &w.output_norm, cfg.rms_eps, a.y);
  // logits = W_head · y
  c.be.MatMul(w.output, a.y, n, a.logits, c.aq());
}

}  // namespace flashkv
