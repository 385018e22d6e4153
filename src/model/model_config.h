// ModelConfig: every shape and constant of a DeepSeek V4 model, read from the GGUF
// `deepseek4.*` metadata (docs/DS4_MODEL.md §8.2) and checked for consistency. Nothing about
// Flash is hard-coded, so tiny models and the real 43-layer model run the same code. Derived
// sizes are named methods so call sites never repeat the arithmetic.
// Must not: do I/O beyond reading metadata from an already opened GgufFile.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "util/status.h"

namespace flashkv {

// What kind of attention a layer runs (docs/DS4_MODEL.md §1).
enum class AttentionKind {
  kSliding,     // ratio 0: raw window only
  kCompressed,  // CSA: overlapping ratio-4 compressor + lightning indexer
  kHeavy,       // HCA: non-overlapping compressor, every compressed row visible
};

// Which writer's conventions the file follows. Both name tensors alike; llama.cpp's
// convert_hf_to_gguf.py may count multi-token-prediction layers in block_count
// (nextn_predict_layers), writes expert_gating_func and swiglu_clamp_shexp, and may leave
// vocab_size out (docs/GGUF.md "Layouts").
enum class GgufLayout { kDs4, kLlamaCpp };

struct ModelConfig {
  std::string name;  // general.name, informational
  GgufLayout layout = GgufLayout::kDs4;
  int n_layer_nextn = 0;  // MTP layers after the n_layer trunk layers; never run

  // Shapes. Names follow ds4 / llama.cpp (n_embd = D, head_dim = d, n_rot = d_r, ...).
  int n_layer = 0;
  int n_embd = 0;
  int n_vocab = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int n_rot = 0;
  int q_lora_rank = 0;
  int o_lora_rank = 0;
  int n_out_group = 0;
  int n_expert = 0;
  int n_expert_used = 0;
  int n_expert_shared = 0;
  int n_ff_exp = 0;
  int n_hash_layer = 0;
  int n_swa = 0;
  int indexer_heads = 0;
  int indexer_head_dim = 0;
  int indexer_top_k = 0;
  int n_hc = 0;
  int hc_sinkhorn_iters = 0;
  uint64_t context_length = 0;

  // Constants.
  float rope_freq_base = 0;           // θ_m, sliding layers
  float compress_rope_freq_base = 0;  // θ_c, compressed layers
  float rope_scaling_factor = 0;      // YaRN s (<= 1: plain table with θ_c)
  uint64_t rope_orig_ctx = 0;         // YaRN L0
  float yarn_beta_fast = 0;
  float yarn_beta_slow = 0;
  float rms_eps = 0;
  float hc_eps = 0;
  float expert_weights_scale = 0;  // ρ

  // Per-layer schedule, exactly n_layer entries (the GGUF arrays may be longer: MTP).
  std::vector<int> compress_ratios;
  std::vector<float> swiglu_clamp;

  // Reads and validates the metadata; errors name the key.
  static Expected<ModelConfig> FromGguf(const GgufFile& file);
  // Consistency checks shared by FromGguf and tests that build configs by hand.
  Status Validate() const;

  // ---- derived sizes ----
  int n_nope() const { return head_dim - n_rot; }
  int q_dim() const { return n_head * head_dim; }  // [n_head, head_dim] flattened
  int hc_dim() const { return n_hc * n_embd; }     // flattened residual streams
  int hc_mix_dim() const { return (2 + n_hc) * n_hc; }
  int heads_per_group() const { return n_head / n_out_group; }
  int group_in_dim() const { return heads_per_group() * head_dim; }
  int indexer_q_dim() const { return indexer_heads * indexer_head_dim; }

  // ---- per-layer schedule ----
  int compress_ratio(int layer) const { return compress_ratios[layer]; }
  AttentionKind attention_kind(int layer) const;
  bool is_compressed(int layer) const { return compress_ratios[layer] != 0; }
  // ds4 and the official code overlap windows (and run the indexer) exactly at ratio 4.
  bool is_overlapping(int layer) const { return compress_ratios[layer] == 4; }
  bool has_indexer(int layer) const { return is_overlapping(layer); }
  int compress_coff(int layer) const { return is_overlapping(layer) ? 2 : 1; }
  // Width of one compressor projection: c·d_c.
  int compress_width(int layer) const { return compress_coff(layer) * head_dim; }
  int indexer_compress_width() const { return 2 * indexer_head_dim; }
  bool is_hash_layer(int layer) const { return layer < n_hash_layer; }
  float swiglu_limit(int layer) const { return swiglu_clamp[layer]; }
  // Compressed rows a context of ctx tokens can need at this layer (ds4: ctx/ratio + 2).
  int compressed_capacity(int layer, int ctx) const;
};

}  // namespace flashkv
