// The attention sublayer (docs/DS4_MODEL.md §4), one step per line, for a step of rows from one
// or more sessions, each session's chunk at its positions pos0 … pos0+T−1. Reads act.x_hc,
// writes act.x_hc_next, appends to each session's KvState (raw window, compressed rows,
// frontiers). The projections (the compressors' and the indexer's included) are row-wise and
// run once over all rows; what reads positions or a session's KV runs per session
// (PrepareChunk, FinishChunk; the attention itself for every session at once).
#include <cmath>
#include <vector>

#include "model/chunk_context.h"

namespace flashkv {
namespace {

// One session's chunk up to its attention: q and c at its positions, its compressors and
// indexer; returns the attention it needs (over its window ring and compressed rows). c.act
// views its rows.
AttentionArgs PrepareChunk(ChunkContext& c, int l) {
  Backend& be = c.be;
  const ModelConfig& cfg = c.cfg;
  const LayerWeights& w = c.weights.layers[l];
  Activations& a = c.act;
  const KvState::Layer& st = c.kv.layer(l);
  const int T = c.n_tokens;

  // q: per-head RMS_1; RoPE at pos
  NormRopeArgs q;
  q.x = a.q;
  q.n_rows = T;
  q.n_heads = cfg.n_head;
  q.head_dim = cfg.head_dim;
  q.eps = cfg.rms_eps;
  q.rope = c.rope(l);
  q.pos0 = c.pos0;
  be.NormRope(q);

  // c_t = RMSNorm(c) · kv_norm; RoPE at pos; the stored precision (official: FP8 on the
  // no-RoPE dims, then F16; docs/DS4_MODEL.md §9 #1, #5)
  NormRopeArgs kv = q;
  kv.x = a.kv;
  kv.n_heads = 1;
  kv.weight = &w.attn_kv_norm;
  kv.fp8_prefix = c.official() ? cfg.n_nope() : 0;
  kv.f16_round = c.official();
  be.NormRope(kv);

  // Compressed rows: the main compressor, and for CSA the indexer's choice among them.
  DevPtr<const int32_t> selected;
  if (cfg.is_compressed(l)) {
    const size_t at = size_t(c.row0) * cfg.compress_width(l);  // rows as wide as this layer's
    RunCompressor(
        c, l,
        CompressorSite{c.step_act.comp_kv + at, c.step_act.comp_score + at, &w.compressor_ape,
                       &w.compressor_norm, cfg.head_dim, cfg.is_overlapping(l), st.comp_state_kv,
                       st.comp_state_score, st.comp_rows});
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
  return args;
}

// After the attention: the chunk's raw rows join the window ring (only after every token has
// attended), and the values lose the rotation they carried (RoPE at −pos on each head's tail).
void FinishChunk(ChunkContext& c, int l) {
  Backend& be = c.be;
  const ModelConfig& cfg = c.cfg;
  Activations& a = c.act;
  const int T = c.n_tokens;
  be.StoreWindowRows(a.kv, c.pos0, T, cfg.n_swa, cfg.head_dim, c.kv.layer(l).ring);
  be.Rope(a.heads, T, cfg.n_head, cfg.head_dim, c.rope(l), c.pos0, 1, true);
}

}  // namespace

void AttentionSublayer(StepContext& s, int l) {
  Backend& be = s.be;
  const ModelConfig& cfg = s.cfg;
  const LayerWeights& w = s.weights.layers[l];
  Activations& a = s.act;
  const int R = s.n_rows;
  const ActQuantMode aq = s.aq();

  // u, post, comb = HC_pre(X); x = RMSNorm(u) · attn_norm; q_lat = W_qa x; c = W_kv x
  SublayerInputArgs in =
      SublayerInputOf(s, w.hc_attn_fn, w.hc_attn_scale, w.hc_attn_base, w.attn_norm);
  in.proj[0] = {&w.attn_q_a, a.q_lat};
  in.proj[1] = {&w.attn_kv, a.kv};
  in.n_proj = 2;
  be.SublayerInput(in);

  // q_lat = RMSNorm(q_lat) · q_a_norm; q = W_qb q_lat
  be.RmsNorm(a.q_lat, R, cfg.q_lora_rank, &w.attn_q_a_norm, cfg.rms_eps, a.q_lat);
  be.MatMul(w.attn_q_b, a.q_lat, R, a.q, aq);

  // The compressors' (and the indexer's) projections of every row
  if (cfg.is_compressed(l)) ProjectCompressors(s, l);

  // Positions, KV and attention: what reads a session's positions and state runs session by
  // session, the attention of every session at once (a backend may launch it once for all of
  // them); a session only ever touches its own rows and state, so this order gives each the
  // bits of a step alone.
  std::vector<AttentionArgs>& attention = s.attention;
  attention.clear();
  for (ChunkContext& c : s.chunks) attention.push_back(PrepareChunk(c, l));
  be.AttentionBatch(attention.data(), int(attention.size()));
  for (ChunkContext& c : s.chunks) FinishChunk(c, l);

  // out = W_ob · concat_j(W_oa[j] · heads of group j)
  be.MatMulGrouped(w.attn_output_a, a.heads, R, cfg.n_out_group, a.low, aq);
  be.MatMul(w.attn_output_b, a.low, R, a.sub_out, aq);

  // X' = post · out + combᵀ X
  be.HcPost(a.x_hc, a.sub_out, a.post, a.comb, R, s.hc, a.x_hc_next);
}

}  // namespace flashkv
