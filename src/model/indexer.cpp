// The lightning indexer of a CSA layer (docs/DS4_MODEL.md §4.5): its own overlapping compressor
// over the layer input, then per token the top-k compressed rows by Σ_h ω_h · ReLU(qI_h · K^I_w),
// written to act.idx_sel for the attention step. Projections run over the step's rows, the
// compressor over the step's sessions (RunCompressors); the query's RoPE and the choice per
// session.
#include <cmath>

#include "model/chunk_context.h"

namespace flashkv {
namespace {

// Tokens that see at most top_k rows select all of them; scoring is needed only when the
// chunk's last token sees more.
bool NeedsScores(const ModelConfig& cfg, int l, int64_t pos0, int n_tokens) {
  return (pos0 + n_tokens) / cfg.compress_ratio(l) > cfg.indexer_top_k;
}

}  // namespace

void ProjectIndexer(StepContext& s, int l) {
  Backend& be = s.be;
  const LayerWeights& w = s.weights.layers[l];
  Activations& a = s.act;
  const int R = s.n_rows;
  // K^I projections: the indexer's compressor (always overlapping, width indexer_head_dim)
  be.MatMul(w.indexer_compressor_kv, a.xn, R, a.idx_comp_kv, s.aq());
  be.MatMul(w.indexer_compressor_gate, a.xn, R, a.idx_comp_score, s.aq());
  bool scores = false;
  for (const ChunkContext& c : s.chunks) scores |= NeedsScores(s.cfg, l, c.pos0, c.n_tokens);
  if (!scores) return;
  // qI = W_Iq q_lat; ω = W_Iw x (scaled by (H_I·d_I)^-1/2 inside the selection)
  be.MatMul(w.indexer_q_b, a.q_lat, R, a.idx_q, s.aq());
  be.MatMul(w.indexer_proj, a.xn, R, a.idx_w, s.aq());
}

void IndexerSelect(ChunkContext& c, int l) {
  Backend& be = c.be;
  const ModelConfig& cfg = c.cfg;
  const KvState::Layer& st = c.kv.layer(l);
  Activations& a = c.act;
  const int T = c.n_tokens;

  if (NeedsScores(cfg, l, c.pos0, T)) {
    // qI at pos: compress-RoPE; official: Hadamard + FP4
    be.Rope(a.idx_q, T, cfg.indexer_heads, cfg.indexer_head_dim, c.compress_rope, c.pos0, 1, false);
    if (c.official()) be.HadamardFp4(a.idx_q, T * cfg.indexer_heads, cfg.indexer_head_dim);
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
  args.ratio = cfg.compress_ratio(l);
  args.top_k = cfg.indexer_top_k;
  be.IndexerTopK(args);
}

}  // namespace flashkv
