// The `deepseek4.*` hyperparameters of a DS4 GGUF as one struct, and the code that writes
// (and, for checks, reads) them with exactly the key names, value types and order of
// antirez's DS4 files: u32 counts, f32 floats, a bool `expert_weights_norm`, a u32 array
// `attention.compress_ratios` and an f32 array `swiglu_clamp_exp`.
// Must not: run the model (model/ModelConfig is the engine's reader of these keys).
//
// Shared by `flashkv convert` (filled from an HF config.json) and `flashkv make-tiny` (filled
// from a preset), so both write the same key set as the shipped files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/ds4_keys.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "util/status.h"

namespace flashkv {

struct Ds4Hparams {
  uint32_t n_layer = 0;        // block_count, L
  uint32_t n_ctx_train = 0;    // context_length (printed only)
  uint32_t n_embd = 0;         // embedding_length, D
  uint32_t n_vocab = 0;        // vocab_size, V
  uint32_t n_head = 0;         // attention.head_count, H
  uint32_t n_head_kv = 1;      // attention.head_count_kv
  uint32_t head_dim = 0;       // attention.key_length = value_length, d
  uint32_t n_rot = 0;          // rope.dimension_count, d_r
  uint32_t q_lora_rank = 0;    // r_q
  uint32_t o_lora_rank = 0;    // r_o
  uint32_t o_groups = 0;       // g
  uint32_t n_expert = 0;       // E
  uint32_t n_expert_used = 0;  // k
  uint32_t n_ff_exp = 0;       // F
  uint32_t n_expert_shared = 1;
  uint32_t n_hash_layer = 0;  // layers [0, n_hash_layer) are hash-routed
  uint32_t n_expert_group = 0;
  uint32_t n_expert_group_used = 0;
  uint32_t n_swa = 0;              // attention.sliding_window, W
  uint32_t n_indexer_head = 0;     // H_I
  uint32_t indexer_head_dim = 0;   // d_I
  uint32_t indexer_top_k = 0;      // k_I
  uint32_t n_hc = 0;               // hyper_connection.count, n
  uint32_t hc_sinkhorn_iters = 0;  // T
  uint32_t rope_orig_ctx = 0;      // rope.scaling.original_context_length, L0
  float rope_freq_base = 0;        // θ_m
  float rope_scaling_factor = 1;   // s (1 = plain RoPE for the compressed branches)
  float yarn_beta_fast = 32;
  float yarn_beta_slow = 1;
  float compress_rope_freq_base = 0;  // θ_c
  float expert_weights_scale = 0;     // ρ
  float rms_eps = 0;
  float hc_eps = 0;
  bool expert_weights_norm = true;
  std::vector<uint32_t> compress_ratios;  // [n_layer]: 0 (sliding), 4 (CSA) or m_H (HCA)
  std::vector<float> swiglu_clamp;        // [n_layer]

  // Derived sizes, named as docs/DS4_MODEL.md §1 names them.
  uint32_t n_hc_mix() const { return (2 + n_hc) * n_hc; }  // HC fn rows: pre, post, comb
  // Compressor width multiplier: ratio-4 layers overlap two windows (ds4 keys it on ratio).
  static uint32_t CompressorOverlap(uint32_t ratio) { return ratio == 4 ? 2 : 1; }
  static bool HasIndexer(uint32_t ratio) { return ratio == 4; }

  // Sizes consistent with each other (arrays one entry per layer, divisibility of heads by
  // groups, hash layers within range, ...). Names the offending field.
  Status Validate() const;
};

// Writes general.architecture, general.name, general.alignment (32) and every deepseek4.*
// key in the order of the DS4 files. The tokenizer keys follow separately
// (tokenizer/vocab.h WriteVocabToGguf).
void WriteDs4Metadata(const Ds4Hparams& hp, const std::string& name, GgufWriter& writer);

// Reads the same keys back (any integer/float type accepted). For tests and `convert`
// self-checks; the engine reads them through model/ModelConfig.
Expected<Ds4Hparams> ReadDs4Hparams(const GgufFile& gguf);

}  // namespace flashkv
