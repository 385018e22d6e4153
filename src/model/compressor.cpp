// A compressor (docs/DS4_MODEL.md §4.4): projections of the step's rows, then per session the
// streaming frontier update and the finishing steps of every row its chunk closes — RMSNorm ·
// kv_norm, compress-RoPE at the window start w·m, and in official numerics the stored
// precision. The rows a chunk closes are host-computable: windows pos0/m … (pos0+T)/m − 1.
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

void RunCompressor(ChunkContext& c, int l, const CompressorSite& s) {
  Backend& be = c.be;
  const ModelConfig& cfg = c.cfg;
  const int T = c.n_tokens;
  const int m = cfg.compress_ratio(l);

  // Feed the frontier in token order; closed windows are pooled into rows[w]
  CompressorArgs args;
  args.kv = s.kv;
  args.score = s.score;
  args.ape = s.ape;
  args.state_kv = s.state_kv;
  args.state_score = s.state_score;
  args.rows = s.rows;
  args.pos0 = c.pos0;
  args.n_tokens = T;
  args.ratio = m;
  args.overlap = s.overlap;
  args.d_c = s.d_c;
  be.CompressorUpdate(args);

  const int64_t first = c.pos0 / m;
  const int n_new = int((c.pos0 + T) / m - first);
  if (n_new == 0) return;
  DevPtr<float> rows = s.rows + size_t(first) * s.d_c;

  // Ĉ_w = RMSNorm(C_w) · kv_norm; compress-RoPE at position w·m. Official stored precision:
  // like ds4, the row width picks the simulation — head_dim rows get FP8 on the no-RoPE dims,
  // indexer rows Hadamard + FP4; then F16.
  const bool fp8_rows = c.official() && s.d_c == cfg.head_dim;
  NormRopeArgs fin;
  fin.x = rows;
  fin.n_rows = n_new;
  fin.head_dim = s.d_c;
  fin.weight = s.norm;
  fin.eps = cfg.rms_eps;
  fin.rope = c.compress_rope;
  fin.pos0 = first * m;
  fin.pos_step = m;
  fin.fp8_prefix = fp8_rows ? s.d_c - cfg.n_rot : 0;
  fin.f16_round = fp8_rows;
  be.NormRope(fin);
  if (c.official() && !fp8_rows) {
    be.HadamardFp4(rows, n_new, s.d_c);
    be.F16Round(rows, size_t(n_new) * s.d_c);
  }
}

}  // namespace flashkv
