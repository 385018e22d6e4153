// Reads a Hugging Face DeepSeek V4 `config.json` into DS4 GGUF hyperparameters, following
// transformers' DeepseekV4Config rules: per-layer `layer_types` (else legacy
// `compress_ratios`, else the V4-Pro default pattern), `compress_rates` per type, the MLP
// schedule from `mlp_layer_types` (else `num_hash_layers`, default 3), the nested
// `rope_parameters` {main, compress} (or a flat YaRN dict), and the class defaults (Flash
// values) for absent fields. Must not: read weights.
//
// A config that a DS4 GGUF cannot express is an Unsupported error naming the field: hash
// layers that are not a prefix, a CSA rate other than 4 (ds4 keys overlap and the indexer on
// ratio 4), several KV heads, a non-sqrtsoftplus router, a non-default main RoPE.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "convert/ds4_hparams.h"
#include "util/status.h"

namespace flashkv {

struct HfModelConfig {
  Ds4Hparams hp;
  // [n_layer] "sliding_attention" | "compressed_sparse_attention" | "heavily_compressed_attention"
  std::vector<std::string> layer_types;
  // Decisions worth a log line (defaults taken, keys ignored).
  std::vector<std::string> notes;
};

Expected<HfModelConfig> ParseHfConfig(std::string_view json_text);
// Reads <dir>/config.json (or the file itself when given a file).
Expected<HfModelConfig> LoadHfConfig(const std::string& path);

}  // namespace flashkv
