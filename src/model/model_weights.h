// Weight binding: maps the GGUF tensor names of a DeepSeek V4 file (ds4 layout, docs/DS4_MODEL.md
// §8.3) to the model's weight slots, checks each tensor's shape and type against the
// ModelConfig, and places it on the backend. One binding table per layer kind (shared,
// attention, compressor, indexer, MoE, hash router, biased router); every error names the
// tensor. Must not: run math or decide numerics.
#pragma once

#include <functional>

#include <vector>

#include "backend/backend.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "util/status.h"

namespace flashkv {

// Shapes in GGML order [ne0 (input, contiguous), ne1 (rows), ne2 (experts)], using
// ModelConfig names; c = compress_coff(layer), m = compress_ratio(layer).
struct LayerWeights {
  // Hyper-connections (all layers).
  Weight hc_attn_fn;     // [hc_dim, hc_mix_dim]
  Weight hc_attn_scale;  // [3] F32
  Weight hc_attn_base;   // [hc_mix_dim] F32
  Weight hc_ffn_fn;      // [hc_dim, hc_mix_dim]
  Weight hc_ffn_scale;   // [3] F32
  Weight hc_ffn_base;    // [hc_mix_dim] F32

  // Attention (all layers).
  Weight attn_norm;      // [n_embd] F32
  Weight attn_q_a;       // [n_embd, q_lora_rank]
  Weight attn_q_a_norm;  // [q_lora_rank] F32
  Weight attn_q_b;       // [q_lora_rank, n_head·head_dim]
  Weight attn_kv;        // [n_embd, head_dim]
  Weight attn_kv_norm;   // [head_dim] F32
  Weight attn_sinks;     // [n_head] F32
  Weight attn_output_a;  // [group_in_dim, n_out_group·o_lora_rank]
  Weight attn_output_b;  // [n_out_group·o_lora_rank, n_embd]

  // Compressor (ratio != 0).
  Weight compressor_ape;   // [c·head_dim, m]
  Weight compressor_kv;    // [n_embd, c·head_dim]
  Weight compressor_gate;  // [n_embd, c·head_dim]
  Weight compressor_norm;  // [head_dim] F32

  // Lightning indexer (ratio 4).
  Weight indexer_q_b;              // [q_lora_rank, indexer_heads·indexer_head_dim]
  Weight indexer_proj;             // [n_embd, indexer_heads]
  Weight indexer_compressor_ape;   // [2·indexer_head_dim, m]
  Weight indexer_compressor_kv;    // [n_embd, 2·indexer_head_dim]
  Weight indexer_compressor_gate;  // [n_embd, 2·indexer_head_dim]
  Weight indexer_compressor_norm;  // [indexer_head_dim] F32

  // MoE (all layers).
  Weight ffn_norm;          // [n_embd] F32
  Weight ffn_gate_inp;      // [n_embd, n_expert] router
  Weight ffn_exp_probs_b;   // [n_expert] F32, top-k layers, optional
  Weight ffn_gate_tid2eid;  // [n_expert_used, n_vocab] I32, hash layers
  Weight ffn_gate_exps;     // [n_embd, n_ff_exp, n_expert]
  Weight ffn_up_exps;       // [n_embd, n_ff_exp, n_expert]
  Weight ffn_down_exps;     // [n_ff_exp, n_embd, n_expert]
  Weight ffn_gate_shexp;    // [n_embd, n_ff_exp]
  Weight ffn_up_shexp;      // [n_embd, n_ff_exp]
  Weight ffn_down_shexp;    // [n_ff_exp, n_embd]
};

struct ModelWeights {
  Weight token_embd;       // [n_embd, n_vocab]
  Weight output_hc_fn;     // [hc_dim, n_hc]
  Weight output_hc_scale;  // [1] F32
  Weight output_hc_base;   // [n_hc] F32
  Weight output_norm;      // [n_embd] F32
  Weight output;           // [n_embd, n_vocab] lm head (untied)
  std::vector<LayerWeights> layers;
  // F32 copies of elementwise-read tensors the file stores in another type (llama.cpp's
  // quantizer gives the compressor ape its preset's type), which backends may read in place.
  std::vector<std::vector<float>> converted;
};

// Binds every tensor the config requires. The GgufFile must outlive the weights (the
// CPU backend reads them in place). Unknown extra tensors are ignored with a debug log.
// place_routed_experts false (expert parallel, docs/MULTI_GPU.md): the three routed-expert
// stacks of every layer are checked but not placed — their Weights carry name, type, shape
// and row_bytes and no data; model/sharded_moe.cpp places each shard's block of them.
// `progress`, when set, is called after each placed tensor with the tensor bytes placed so
// far and the file's total (a start-up display: an 81 GB load takes minutes).
using LoadProgressFn = std::function<void(uint64_t bytes_done, uint64_t bytes_total)>;
Expected<ModelWeights> BindModelWeights(const GgufFile& file, const ModelConfig& config,
                                        Backend& backend, bool place_routed_experts = true,
                                        const LoadProgressFn& progress = {});

// Bytes of every present weight (row_bytes · rows · experts), what the backend was asked
// to hold; the routed-expert stacks left unplaced count nothing.
uint64_t PlacedWeightBytes(const ModelConfig& config, const ModelWeights& weights);

}  // namespace flashkv
