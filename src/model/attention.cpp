// The attention sublayer (docs/DS4_MODEL.md §4), one step per line, for a chunk of T tokens at
// positions pos0 … pos0+T−1. Reads act.x_hc, writes act.x_hc_next, appends to the layer's
// KvState (raw window, compressed rows, frontiers).
#include <cmath>

#include "model/chunk_context.h"

namespace flashkv {
namespace {

// The precision a stored KV row has in official numerics: FP8 on the no-RoPE dims, then
// F16 (docs/DS4_MODEL.md §9 #1, #5). rows: [n, head_dim].
void RoundStoredKvRows(ChunkContext& c, DevPtr<float> rows, int n) {
  if (!c.official() || n == 0) return;
  c.be.Fp8RoundTrip(rows, n, c.cfg.head_dim, c.cfg.n_nope());
  c.be.F16Round(rows, size_t(n) * c.cfg.head_dim);
}

}  // namespace

void AttentionSublayer(ChunkContext& c, int l) {
  Backend& be = c.be;
  const ModelConfig& cfg = c.cfg;
  const LayerWeights& w = c.weights.layers[l];
  Activations& a = c.act;
  const KvState::Layer& st = c.kv.layer(l);
  const int T = c.n_tokens;
  const float eps = cfg.rms_eps;
  const ActQuantMode aq = c.aq();

  // u, post, comb = HC_pre(X); x = RMSNorm(u) · attn_norm
  be.HcPre(a.x_hc, T, w.hc_attn_fn, w.hc_attn_scale, w.hc_attn_base, c.hc, a.u, a.post, a.comb);
  be.RmsNorm(a.u, T, cfg.n_embd, &w.attn_norm, eps, a.xn);

  // q_lat = RMSNorm(W_qa x) · q_a_norm; q = W_qb q_lat; per-head RMS_1; RoPE at pos
  be.MatMul(w.attn_q_a, a.xn, T, a.q_lat, aq);
  be.RmsNorm(a.q_lat, T, cfg.q_lora_rank, &w.attn_q_a_norm, eps, a.q_lat);
  be.MatMul(w.attn_q_b, a.q_lat, T, a.q, aq);
  be.RmsNorm(a.q, T * cfg.n_head, cfg.head_dim, nullptr, eps, a.q);
  be.Rope(a.q, T, cfg.n_head, cfg.head_dim, c.rope(l), c.pos0, 1, false);

  // c_t = RMSNorm(W_kv x) · kv_norm; RoPE at pos; stored precision (official: FP8 + F16)
  be.MatMul(w.attn_kv, a.xn, T, a.kv, aq);
  be.RmsNorm(a.kv, T, cfg.head_dim, &w.attn_kv_norm, eps, a.kv);
  be.Rope(a.kv, T, 1, cfg.head_dim, c.rope(l), c.pos0, 1, false);
  RoundStoredKvRows(c, a.kv, T);

  // Compressed rows: the main compressor, and for CSA the indexer's choice among them.
  DevPtr<const int32_t> selected;
  if (cfg.is_compressed(l)) {
    RunCompressor(c, l,
                  CompressorSite{&w.compressor_kv, &w.compressor_gate, &w.compressor_ape,
                                 &w.compressor_norm, cfg.head_dim, cfg.is_overlapping(l),
                                 st.comp_state_kv, st.comp_state_score, st.comp_rows});
    if (cfg.has_indexer(l)) {
      IndexerSelect(c, l);
      selected = a.idx_sel;
    }
  }

  // heads = softmax over [window rows, compressed rows, sink] of q·kv/sqrt(d), times kv
  AttentionArgs args;
  args.q = a.q;
  args.kv_new = a.kv;
  args.ring = st.ring;
  args.comp_rows = st.comp_rows;
  args.selected = selected;
  args.sinks = &w.attn_sinks;
  args.out = a.heads;
  args.pos0 = c.pos0;
  args.n_tokens = T;
  args.n_head = cfg.n_head;
  args.head_dim = cfg.head_dim;
  args.n_swa = cfg.n_swa;
  args.ratio = cfg.compress_ratio(l);
  args.top_k = cfg.indexer_top_k;
  args.scale = 1.0f / std::sqrt(float(cfg.head_dim));
  be.Attention(args);
  // The chunk's raw rows join the window ring only after every token has attended.
  be.StoreWindowRows(a.kv, c.pos0, T, cfg.n_swa, cfg.head_dim, st.ring);

  // Undo the rotation the values carried: RoPE at −pos on each head's tail
  be.Rope(a.heads, T, cfg.n_head, cfg.head_dim, c.rope(l), c.pos0, 1, true);

  // out = W_ob · concat_j(W_oa[j] · heads of group j)
  be.MatMulGrouped(w.attn_output_a, a.heads, T, cfg.n_out_group, a.low, aq);
  be.MatMul(w.attn_output_b, a.low, T, a.sub_out, aq);

  // X' = post · out + combᵀ X
  be.HcPost(a.x_hc, a.sub_out, a.post, a.comb, T, c.hc, a.x_hc_next);
}

}  // namespace flashkv
