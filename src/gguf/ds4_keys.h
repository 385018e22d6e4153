// The DS4 GGUF metadata keys (docs/GGUF.md, docs/DS4_MODEL.md §8.2): the one table of
// their names, read by model/model_config.cpp, written by convert/ds4_hparams.cpp and by
// the tests' hand-made files (tests/model/model_test_util.h, llama_layout_files.h). A key
// is "deepseek4." + a suffix below (Ds4Key). Here in gguf/, the lowest module both the
// model and the converter depend on (docs/DESIGN.md). Must not: say what a value means or
// allows (the reader's bounds and the converter's mapping stay with them).
#pragma once

#include <string>
#include <string_view>

namespace flashkv {

// general.architecture of a DS4 file.
inline constexpr const char* kDs4Arch = "deepseek4";

// "deepseek4.<suffix>".
inline std::string Ds4Key(std::string_view suffix) {
  return std::string(kDs4Arch) + "." + std::string(suffix);
}

namespace ds4_key {

// Integers.
inline constexpr const char* kBlockCount = "block_count";
inline constexpr const char* kContextLength = "context_length";
inline constexpr const char* kEmbeddingLength = "embedding_length";
inline constexpr const char* kVocabSize = "vocab_size";
inline constexpr const char* kHeadCount = "attention.head_count";
inline constexpr const char* kHeadCountKv = "attention.head_count_kv";
inline constexpr const char* kKeyLength = "attention.key_length";
inline constexpr const char* kValueLength = "attention.value_length";
inline constexpr const char* kRopeDimensionCount = "rope.dimension_count";
inline constexpr const char* kQLoraRank = "attention.q_lora_rank";
inline constexpr const char* kOutputLoraRank = "attention.output_lora_rank";
inline constexpr const char* kOutputGroupCount = "attention.output_group_count";
inline constexpr const char* kExpertCount = "expert_count";
inline constexpr const char* kExpertUsedCount = "expert_used_count";
inline constexpr const char* kExpertFeedForwardLength = "expert_feed_forward_length";
inline constexpr const char* kExpertSharedCount = "expert_shared_count";
inline constexpr const char* kHashLayerCount = "hash_layer_count";
inline constexpr const char* kExpertGroupCount = "expert_group_count";
inline constexpr const char* kExpertGroupUsedCount = "expert_group_used_count";
inline constexpr const char* kSlidingWindow = "attention.sliding_window";
inline constexpr const char* kIndexerHeadCount = "attention.indexer.head_count";
inline constexpr const char* kIndexerKeyLength = "attention.indexer.key_length";
inline constexpr const char* kIndexerTopK = "attention.indexer.top_k";
inline constexpr const char* kHyperConnectionCount = "hyper_connection.count";
inline constexpr const char* kSinkhornIterations = "hyper_connection.sinkhorn_iterations";
inline constexpr const char* kRopeOriginalContextLength = "rope.scaling.original_context_length";
// Floats.
inline constexpr const char* kRopeFreqBase = "rope.freq_base";
inline constexpr const char* kRopeScalingFactor = "rope.scaling.factor";
inline constexpr const char* kYarnBetaFast = "rope.scaling.yarn_beta_fast";
inline constexpr const char* kYarnBetaSlow = "rope.scaling.yarn_beta_slow";
inline constexpr const char* kCompressRopeFreqBase = "attention.compress_rope_freq_base";
inline constexpr const char* kExpertWeightsScale = "expert_weights_scale";
inline constexpr const char* kRmsEpsilon = "attention.layer_norm_rms_epsilon";
inline constexpr const char* kHyperConnectionEpsilon = "hyper_connection.epsilon";
// A bool and the per-layer arrays.
inline constexpr const char* kExpertWeightsNorm = "expert_weights_norm";
inline constexpr const char* kCompressRatios = "attention.compress_ratios";
inline constexpr const char* kSwigluClampExp = "swiglu_clamp_exp";
// Only llama.cpp's deepseek4 files carry these (model/model_config.h GgufLayout).
inline constexpr const char* kNextnPredictLayers = "nextn_predict_layers";
inline constexpr const char* kExpertGatingFunc = "expert_gating_func";
inline constexpr const char* kSwigluClampShexp = "swiglu_clamp_shexp";

}  // namespace ds4_key
}  // namespace flashkv
