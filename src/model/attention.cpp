// The attention sublayer (docs/DS4_MODEL.md §4), one step per line, for a step of rows from one
// or more sessions, each session's chunk at its positions pos0 … pos0+T−1. Reads act.x_hc,
// writes act.x_hc_next, appends to each session's KvState (raw window, compressed rows,
// frontiers). The projections (the compressors' and the indexer's included) are row-wise and
// run once over all rows, and so do q/kv norm + RoPE and the inverse RoPE (each row at its
// own position); what reads or writes a session's KV (compressors, the indexer's choice,
// attention, window stores) runs for every session in one backend call or per session.
#include <cmath>
#include <vector>

#include "model/chunk_context.h"

namespace flashkv {
namespace {

// q and c of every row of the step, each at its own position (act.positions): per-head
// RMS_1 on q; c_t = RMSNorm(c) · kv_norm; RoPE; the stored precision of c (official: FP8 on
// the no-RoPE dims, then F16; docs/DS4_MODEL.md §9 #1, #5). Row-wise, so one call each for
// the rows of every session.
void NormRopeRows(StepContext& s, int l) {
  const ModelConfig& cfg = s.cfg;
  const bool official = s.opt.numerics == NumericsMode::kOfficial;
  NormRopeArgs q;
  q.x = s.act.q;
  q.n_rows = s.n_rows;
  q.n_heads = cfg.n_head;
  q.head_dim = cfg.head_dim;
  q.eps = cfg.rms_eps;
  q.rope = s.chunks.front().rope(l);  // the same for every session
  q.positions = s.act.positions;
  s.be.NormRope(q);

  NormRopeArgs kv = q;
  kv.x = s.act.kv;
  kv.n_heads = 1;
  kv.weight = &s.weights.layers[l].attn_kv_norm;
  kv.fp8_prefix = official ? cfg.n_nope() : 0;
  kv.f16_round = official;
  s.be.NormRope(kv);
}

// One session's attention over its window ring and compressed rows (and the indexer's
// choice among them when `selected` is set); c.act views its rows.
AttentionArgs AttentionOf(const ChunkContext& c, int l, DevPtr<const int32_t> selected) {
  const ModelConfig& cfg = c.cfg;
  const LayerWeights& w = c.weights.layers[l];
  const Activations& a = c.act;
  const KvState::Layer& st = c.kv.layer(l);
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
  args.n_tokens = c.n_tokens;
  args.n_head = cfg.n_head;
  args.head_dim = cfg.head_dim;
  args.n_swa = cfg.n_swa;
  args.ratio = cfg.compress_ratio(l);
  args.top_k = cfg.indexer_top_k;
  args.scale = 1.0f / std::sqrt(float(cfg.head_dim));
  return args;
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

  // Positions, KV and attention. Row-wise steps run once over every row (each at its own
  // position); what reads or writes a session's state runs for every session in one backend
  // call (a backend may launch it once for all of them) or session by session. A session
  // only ever touches its own rows and state, so this order gives each the bits of a step
  // alone.
  NormRopeRows(s, l);
  // Compressed rows: the main compressor, and for CSA the indexer's choice among them.
  const bool indexed = cfg.is_compressed(l) && cfg.has_indexer(l);
  if (cfg.is_compressed(l)) {
    RunCompressors(s, l, CompressorKind::kMain);
    if (indexed) RunCompressors(s, l, CompressorKind::kIndexer);
  }
  std::vector<AttentionArgs>& attention = s.attention;
  attention.clear();
  for (ChunkContext& c : s.chunks) {
    if (indexed) IndexerSelect(c, l);
    attention.push_back(AttentionOf(c, l, indexed ? c.act.idx_sel : DevPtr<int32_t>()));
  }
  be.AttentionBatch(attention.data(), int(attention.size()));

  // After the attention: the chunks' raw rows join their window rings (only after every
  // token has attended), and the values lose the rotation they carried (RoPE at −pos on each
  // head's tail).
  std::vector<WindowStoreArgs>& stores = s.stores;
  stores.clear();
  for (const ChunkContext& c : s.chunks) {
    stores.push_back({c.act.kv, c.pos0, c.n_tokens, c.kv.layer(l).ring});
  }
  be.StoreWindowRowsBatch(stores.data(), int(stores.size()), cfg.n_swa, cfg.head_dim);
  be.RopeAt(a.heads, R, cfg.n_head, cfg.head_dim, s.chunks.front().rope(l), a.positions, true);

  // out = W_ob · concat_j(W_oa[j] · heads of group j)
  be.MatMulGrouped(w.attn_output_a, a.heads, R, cfg.n_out_group, a.low, aq);
  be.MatMul(w.attn_output_b, a.low, R, a.sub_out, aq);

  // X' = post · out + combᵀ X
  be.HcPost(a.x_hc, a.sub_out, a.post, a.comb, R, s.hc, a.x_hc_next);
}

}  // namespace flashkv
