// The lightning indexer of a CSA layer (docs/DS4_MODEL.md §4.5): its own overlapping compressor
// over the layer input, then per token the top-k compressed rows by Σ_h ω_h · ReLU(qI_h · K^I_w),
// written to act.idx_sel for the attention step.
#include <cmath>

#include "model/chunk_context.h"

namespace flashkv {

void IndexerSelect(ChunkContext& c, int l) {
  Backend& be = c.be;
  const ModelConfig& cfg = c.cfg;
  const LayerWeights& w = c.weights.layers[l];
  const KvState::Layer& st = c.kv.layer(l);
  Activations& a = c.act;
  const int T = c.n_tokens;
  const int m = cfg.compress_ratio(l);

  // K^I rows: the indexer's compressor (always overlapping, width indexer_head_dim)
  RunCompressor(
      c, l,
      CompressorSite{&w.indexer_compressor_kv, &w.indexer_compressor_gate,
                     &w.indexer_compressor_ape, &w.indexer_compressor_norm, cfg.indexer_head_dim,
                     true, st.index_state_kv, st.index_state_score, st.index_rows});

  // Tokens that see at most top_k rows select all of them; scoring is needed only when
  // the chunk's last token sees more.
  const bool needs_scores = (c.pos0 + T) / m > cfg.indexer_top_k;
  if (needs_scores) {
    // qI = W_Iq q_lat, compress-RoPE at pos; official: Hadamard + FP4
    be.MatMul(w.indexer_q_b, a.q_lat, T, a.idx_q, c.aq());
    be.Rope(a.idx_q, T, cfg.indexer_heads, cfg.indexer_head_dim, c.compress_rope, c.pos0, 1, false);
    if (c.official()) be.HadamardFp4(a.idx_q, T * cfg.indexer_heads, cfg.indexer_head_dim);
    // ω = W_Iw x (scaled by (H_I·d_I)^-1/2 inside the selection)
    be.MatMul(w.indexer_proj, a.xn, T, a.idx_w, c.aq());
  }

  IndexerArgs args;
  args.q = a.idx_q;
  args.weights = a.idx_w;
  args.weight_scale = 1.0f / std::sqrt(float(cfg.indexer_q_dim()));
  args.rows = st.index_rows;
  args.selected = a.idx_sel;
  args.pos0 = c.pos0;
  args.n_tokens = T;
  args.n_heads = cfg.indexer_heads;
  args.dim = cfg.indexer_head_dim;
  args.ratio = m;
  args.top_k = cfg.indexer_top_k;
  be.IndexerTopK(args);
}

}  // namespace flashkv
