// StepContext and ChunkContext: everything one forward step's blocks share — the backend,
// the shapes and options, the scratch activations — and, per session of the step, where its
// chunk sits (its KvState, pos0, n_tokens, its rows of the activations). A step carries the
// rows of one session (Model::Forward) or of several (Model::ForwardBatch): the row-wise
// parts of a layer run once over all rows, the parts that read or write sequence state run
// per session. Blocks (attention.cpp, compressor.cpp, indexer.cpp, moe.cpp,
// hyper_connections.cpp) take them and issue backend ops; nothing here computes.
// Must not: be kept beyond one Model::Forward / ForwardBatch call.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "model/activations.h"
#include "model/model_config.h"
#include "model/model_options.h"
#include "model/model_weights.h"
#include "state/kv_state.h"

namespace flashkv {

class ExpertShards;  // model/sharded_moe.h
class ExpertCache;   // model/expert_cache.h

// One session's chunk of a step: its tokens are rows [row0, row0 + n_tokens) of the step,
// and `act` views the activations from row0 on, so a block sees the chunk as if it ran alone.
struct ChunkContext {
  Backend& be;
  const ModelConfig& cfg;
  const ModelOptions& opt;
  const ModelWeights& weights;
  Activations& act;             // the step's activations from row0 on (Activations::RowView)
  const Activations& step_act;  // the whole step's (comp_kv / comp_score: see RowView)
  KvState& kv;
  const RopeParams& main_rope;      // sliding layers
  const RopeParams& compress_rope;  // compressed layers, their compressors and indexer
  HcParams hc;
  int64_t pos0;  // position of the chunk's first token
  int n_tokens;
  int row0;  // the chunk's first row in the step

  bool official() const { return opt.numerics == NumericsMode::kOfficial; }
  ActQuantMode aq() const { return opt.act_quant; }
  // The RoPE of a layer's attention (docs/DS4_MODEL.md §4.2).
  const RopeParams& rope(int layer) const {
    return cfg.is_compressed(layer) ? compress_rope : main_rope;
  }
};

// A whole step: n_rows token rows, the chunks of its sessions in row order.
struct StepContext {
  Backend& be;
  const ModelConfig& cfg;
  const ModelOptions& opt;
  const ModelWeights& weights;
  Activations& act;
  HcParams hc;
  int n_rows;
  std::span<ChunkContext> chunks;
  std::vector<AttentionArgs>& attention;  // a layer's per-session attention (kept: no allocation)
  std::vector<CompressorArgs>& compress;  // a layer's per-session compressor updates (kept)
  std::vector<WindowStoreArgs>& stores;   // a layer's per-session window stores (kept)
  std::vector<NormRopeArgs>& finish;      // a compressor's per-session closed rows (kept)
  ExpertShards* experts = nullptr;        // set: the routed experts run on its shards
  ExpertCache* cache = nullptr;           // set: each MoE block counts its routes for it
  bool staged_experts = false;            // the MoE blocks read cache->StagedStack
  bool gathered_experts = false;          // the MoE blocks gather (cache->Gather)

  ActQuantMode aq() const { return opt.act_quant; }
};

// Blocks, in the order a layer runs them. Each reads act.x_hc and writes act.x_hc_next.
void AttentionSublayer(StepContext& s, int layer);
void FfnSublayer(StepContext& s, int layer);

// Compressors (compressor.cpp): a compressed layer's main compressor, or a CSA layer's
// indexer compressor, over every session of the step — each session's frontier update (one
// backend call for all of them) and the finishing steps of the rows its chunk closes. The
// projections themselves are row-wise and run over the whole step first (ProjectCompressors).
enum class CompressorKind { kMain, kIndexer };
void RunCompressors(StepContext& s, int layer, CompressorKind kind);

// Every row's projections for a compressed layer's compressor into act.comp_kv / comp_score,
// and for a CSA layer the indexer's (ProjectIndexer).
void ProjectCompressors(StepContext& s, int layer);

// Indexer (indexer.cpp). ProjectIndexer: every row's indexer compressor projections into
// act.idx_comp_kv / idx_comp_score, and when a chunk of the step scores rows, every row's
// query and head-weight projections. IndexerSelect: a chunk's top-k choice into act.idx_sel
// (after RunCompressors of the indexer).
void ProjectIndexer(StepContext& s, int layer);
void IndexerSelect(ChunkContext& c, int layer);

// Hyper-connection ends (hyper_connections.cpp).
HcParams MakeHcParams(const ModelConfig& cfg);
// A sublayer's input step over act.x_hc into act.u / post / comb / xn, with its HC_pre
// weights and norm; no projections yet (the caller adds them).
SublayerInputArgs SublayerInputOf(const StepContext& s, const Weight& hc_fn, const Weight& hc_scale,
                                  const Weight& hc_base, const Weight& norm);
// act.tokens → act.x_hc: each token's embedding copied into every stream.
void EmbedRows(StepContext& s);
// n rows of residual streams x_hc [n, hc_dim] → act.logits rows [0, n).
void OutputHead(StepContext& s, DevPtr<const float> x_hc, int n);

}  // namespace flashkv
