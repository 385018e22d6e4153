// A compressor (docs/DS4_MODEL.md §4.4): projections of the step's rows, then every session's
// streaming frontier update (one backend call for the step's sessions) and the finishing
// steps of every row a session's chunk closes — RMSNorm · kv_norm, compress-RoPE at the window
// start w·m, and in official numerics the stored precision. The rows a chunk closes are
// host-computable: windows pos0/m … (pos0+T)/m − 1.
#include <vector>

#include "model/chunk_context.h"

namespace flashkv {

void ProjectCompressors(StepContext& s, int l) {
  const LayerWeights& w = s.weights.layers[l];
  Activations& a = s.act;
  // k_s = W_ckv x_s; z_s = W_cg x_s (the position bias is added inside the update)
  s.be.MatMul(w.compressor_kv, a.xn, s.n_rows, a.comp_kv, s.aq());
  s.be.MatMul(w.compressor_gate, a.xn, s.n_rows, a.comp_score, s.aq());
  if (s.cfg.has_indexer(l)) ProjectIndexer(s, l);
}

namespace {

// Where one session's compressor of a layer reads and keeps its rows.
struct CompressorSite {
  DevPtr<const float> kv;     // [T, c·d_c] the chunk's kv projections
  DevPtr<const float> score;  // [T, c·d_c] the chunk's gate projections
  const Weight* ape;          // [c·d_c, ratio]
  const Weight* norm;         // [d_c]
  int d_c;
  bool overlap;
  DevPtr<float> state_kv;
  DevPtr<float> state_score;
  DevPtr<float> rows;  // [comp_cap, d_c]
};

CompressorSite SiteOf(const ChunkContext& c, int l, CompressorKind kind) {
  const ModelConfig& cfg = c.cfg;
  const LayerWeights& w = c.weights.layers[l];
  const KvState::Layer& st = c.kv.layer(l);
  if (kind == CompressorKind::kIndexer) {  // always overlapping, width indexer_head_dim
    return {c.act.idx_comp_kv,          c.act.idx_comp_score, &w.indexer_compressor_ape,
            &w.indexer_compressor_norm, cfg.indexer_head_dim, true,
            st.index_state_kv,          st.index_state_score, st.index_rows};
  }
  const size_t at = size_t(c.row0) * cfg.compress_width(l);  // rows as wide as this layer's
  return {c.step_act.comp_kv + at,
          c.step_act.comp_score + at,
          &w.compressor_ape,
          &w.compressor_norm,
          cfg.head_dim,
          cfg.is_overlapping(l),
          st.comp_state_kv,
          st.comp_state_score,
          st.comp_rows};
}

// Feed the frontier in token order; closed windows are pooled into rows[w]
CompressorArgs UpdateOf(const ChunkContext& c, int l, const CompressorSite& s) {
  CompressorArgs args;
  args.kv = s.kv;
  args.score = s.score;
  args.ape = s.ape;
  args.state_kv = s.state_kv;
  args.state_score = s.state_score;
  args.rows = s.rows;
  args.pos0 = c.pos0;
  args.n_tokens = c.n_tokens;
  args.ratio = c.cfg.compress_ratio(l);
  args.overlap = s.overlap;
  args.d_c = s.d_c;
  return args;
}

// The rows a session's chunk closed: Ĉ_w = RMSNorm(C_w) · kv_norm; compress-RoPE at position
// w·m. Official stored precision: like ds4, the row width picks the simulation — head_dim
// rows get FP8 on the no-RoPE dims, indexer rows Hadamard + FP4 (FinishRowsBatch's
// hadamard_fp4); then F16. n_rows is 0 when the chunk closes none (the entry stays, so a
// backend can give a step of the same sessions one launch shape whatever they close).
NormRopeArgs FinishOf(const ChunkContext& c, int l, const CompressorSite& s) {
  const ModelConfig& cfg = c.cfg;
  const int m = cfg.compress_ratio(l);
  const int64_t first = c.pos0 / m;
  const int n_new = int((c.pos0 + c.n_tokens) / m - first);
  const bool fp8_rows = c.official() && s.d_c == cfg.head_dim;
  NormRopeArgs fin;
  fin.x = s.rows + size_t(first) * s.d_c;
  fin.n_rows = n_new;
  fin.head_dim = s.d_c;
  fin.weight = s.norm;
  fin.eps = cfg.rms_eps;
  fin.rope = c.compress_rope;
  fin.pos0 = first * m;
  fin.pos_step = m;
  fin.fp8_prefix = fp8_rows ? s.d_c - cfg.n_rot : 0;
  fin.f16_round = fp8_rows;
  return fin;
}

}  // namespace

void RunCompressors(StepContext& s, int l, CompressorKind kind) {
  std::vector<CompressorArgs>& updates = s.compress;
  updates.clear();
  for (const ChunkContext& c : s.chunks) updates.push_back(UpdateOf(c, l, SiteOf(c, l, kind)));
  s.be.CompressorUpdateBatch(updates.data(), int(updates.size()));
  std::vector<NormRopeArgs>& finish = s.finish;
  finish.clear();
  bool hadamard_fp4 = false;
  for (const ChunkContext& c : s.chunks) {
    const CompressorSite site = SiteOf(c, l, kind);
    finish.push_back(FinishOf(c, l, site));
    hadamard_fp4 = c.official() && site.d_c != c.cfg.head_dim;
  }
  s.be.FinishRowsBatch(finish.data(), int(finish.size()), hadamard_fp4);
}

}  // namespace flashkv
