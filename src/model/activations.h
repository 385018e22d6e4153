// Activations: the device scratch of one forward chunk, allocated once for the largest
// chunk a Model runs (so the per-token path never allocates). Every buffer is sized for
// `capacity` tokens; shapes use ModelConfig names with T = tokens in the chunk.
// Must not: hold sequence state (that is KvState) or outlive its backend.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "model/model_config.h"
#include "util/status.h"

namespace flashkv {

struct Activations {
  int capacity = 0;  // most tokens per chunk

  DevPtr<int32_t> tokens;     // [T]
  DevPtr<int64_t> positions;  // [T] each row's position in its session
  DevPtr<float> x_hc;         // [T, hc_dim] residual streams
  DevPtr<float> x_hc_next;    // [T, hc_dim] the sublayer's output streams
  DevPtr<float> u;            // [T, n_embd] HC_pre output (sublayer input, un-normed)
  DevPtr<float> xn;           // [T, n_embd] RMSNorm(u): input of every projection
  DevPtr<float> post;         // [T, n_hc]
  DevPtr<float> comb;         // [T, n_hc·n_hc]

  // Attention.
  DevPtr<float> q_lat;           // [T, q_lora_rank]
  DevPtr<float> q;               // [T, n_head, head_dim]
  DevPtr<float> kv;              // [T, head_dim] this chunk's raw KV rows
  DevPtr<float> heads;           // [T, n_head, head_dim]
  DevPtr<float> low;             // [T, n_out_group·o_lora_rank]
  DevPtr<float> sub_out;         // [T, n_embd] sublayer output (attention or FFN)
  DevPtr<float> comp_kv;         // [T, the layer's compress width] compressor kv projections
  DevPtr<float> comp_score;      // [T, the layer's compress width] gate projections
  DevPtr<float> idx_comp_kv;     // [T, indexer compress width] the indexer compressor's
  DevPtr<float> idx_comp_score;  // [T, indexer compress width]
  DevPtr<float> idx_q;           // [T, indexer_heads, indexer_head_dim]
  DevPtr<float> idx_w;           // [T, indexer_heads]
  DevPtr<int32_t> idx_sel;       // [T, indexer_top_k]

  // MoE.
  DevPtr<float> router;     // [T, n_expert]
  DevPtr<int32_t> experts;  // [T, n_expert_used]
  DevPtr<float> expert_w;   // [T, n_expert_used]
  DevPtr<float> moe_out;    // [T, n_embd]
  DevPtr<float> sh_gate;    // [T, n_ff_exp]
  DevPtr<float> sh_up;      // [T, n_ff_exp]
  DevPtr<float> sh_mid;     // [T, n_ff_exp]

  // Head.
  DevPtr<float> y;       // [T, n_embd]
  DevPtr<float> logits;  // [logits_rows, n_vocab]
  int logits_rows = 0;   // 1 unless a chunk asked for every position's logits

  std::vector<DeviceBuffer> storage;

  // Sizes everything for `capacity` tokens and `logits_rows` rows of logits (a prefill that
  // only needs the last token's logits keeps the [T, n_vocab] buffer out of memory).
  static Expected<Activations> Allocate(Backend& backend, const ModelConfig& c, int capacity,
                                        int logits_rows);

  // The same buffers from token row `row0` on, owning nothing: one session's rows of a
  // multi-session step (Model::ForwardBatch), which the per-session blocks read and write
  // as if they were a chunk of their own. The logits stay whole. comp_kv and comp_score are
  // null in a view: their rows are as wide as the layer's compressor, so a chunk's rows
  // start at row0 · compress_width(layer) of the whole buffer.
  Activations RowView(const ModelConfig& c, int row0) const;
};

}  // namespace flashkv
