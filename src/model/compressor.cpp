// A compressor (docs/DS4_MODEL.md §4.4): projections of the chunk, the streaming frontier update,
// then the finishing steps of every row the chunk closes — RMSNorm · kv_norm, compress-RoPE at the
// window start w·m, and in official numerics the stored precision. The rows a chunk closes are
// host-computable: windows pos0/m … (pos0+T)/m − 1.
#include "model/chunk_context.h"

namespace flashkv {

void RunCompressor(ChunkContext& c, int l, const CompressorSite& s) {
  Backend& be = c.be;
  const ModelConfig& cfg = c.cfg;
  Activations& a = c.act;
  const int T = c.n_tokens;
  const int m = cfg.compress_ratio(l);

  // k_s = W_ckv x_s; z_s = W_cg x_s (the position bias is added inside the update)
  be.MatMul(*s.kv, a.xn, T, a.comp_kv, c.aq());
  be.MatMul(*s.gate, a.xn, T, a.comp_score, c.aq());

  // Feed the frontier in token order; closed windows are pooled into rows[w]
  CompressorArgs args;
  args.kv = a.comp_kv;
  args.score = a.comp_score;
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

  // Ĉ_w = RMSNorm(C_w) · kv_norm; compress-RoPE at position w·m
  be.RmsNorm(rows, n_new, s.d_c, s.norm, cfg.rms_eps, rows);
  be.Rope(rows, n_new, 1, s.d_c, c.compress_rope, first * m, m, false);

  // Official stored precision. Like ds4, the row width picks the simulation: head_dim
  // rows get FP8 on the no-RoPE dims, indexer rows Hadamard + FP4; then F16.
  if (!c.official()) return;
  if (s.d_c == cfg.head_dim) {
    be.Fp8RoundTrip(rows, n_new, s.d_c, s.d_c - cfg.n_rot);
  } else {
    be.HadamardFp4(rows, n_new, s.d_c);
  }
  be.F16Round(rows, size_t(n_new) * s.d_c);
}

}  // namespace flashkv
