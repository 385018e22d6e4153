// ChunkContext: everything one forward chunk's blocks share — the backend, the shapes and
// options, the scratch activations, the sequence state, and where the chunk sits (pos0,
// n_tokens). Blocks (attention.cpp, compressor.cpp, indexer.cpp, moe.cpp,
// hyper_connections.cpp) take it and issue backend ops; nothing here computes.
// Must not: be kept beyond one Model::Forward call.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "kv/kv_state.h"
#include "model/activations.h"
#include "model/model_config.h"
#include "model/model_options.h"
#include "model/model_weights.h"

namespace flashkv {

struct ChunkContext {
  Backend& be;
  const ModelConfig& cfg;
  const ModelOptions& opt;
  const ModelWeights& weights;
  Activations& act;
  KvState& kv;
  const RopeParams& main_rope;      // sliding layers
  const RopeParams& compress_rope;  // compressed layers, their compressors and indexer
  HcParams hc;
  int64_t pos0;  // position of the chunk's first token
  int n_tokens;

  bool official() const { return opt.numerics == NumericsMode::kOfficial; }
  ActQuantMode aq() const { return opt.act_quant; }
  // The RoPE of a layer's attention (docs/DS4_MODEL.md §4.2).
  const RopeParams& rope(int layer) const {
    return cfg.is_compressed(layer) ? compress_rope : main_rope;
  }
};

// Blocks, in the order a layer runs them. Each reads act.x_hc and writes act.x_hc_next.
void AttentionSublayer(ChunkContext& c, int layer);
void FfnSublayer(ChunkContext& c, int layer);

// Compressor (compressor.cpp): one compressor's projections of act.xn, frontier update and
// the finishing steps of the rows it emits.
struct CompressorSite {
  const Weight* kv;    // [n_embd, c·d_c]
  const Weight* gate;  // [n_embd, c·d_c]
  const Weight* ape;   // [c·d_c, ratio]
  const Weight* norm;  // [d_c]
  int d_c;
  bool overlap;
  DevPtr<float> state_kv;
  DevPtr<float> state_score;
  DevPtr<float> rows;  // [comp_cap, d_c]
};
void RunCompressor(ChunkContext& c, int layer, const CompressorSite& site);

// Indexer (indexer.cpp): runs the indexer compressor and fills act.idx_sel.
void IndexerSelect(ChunkContext& c, int layer);

// Hyper-connection ends (hyper_connections.cpp).
HcParams MakeHcParams(const ModelConfig& cfg);
// act.tokens → act.x_hc: each token's embedding copied into every stream.
void EmbedChunk(ChunkContext& c);
// act.x_hc rows [first, first + n) → act.logits rows [0, n).
void OutputHead(ChunkContext& c, int first, int n);

}  // namespace flashkv
