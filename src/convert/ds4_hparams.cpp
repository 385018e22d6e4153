#include "convert/ds4_hparams.h"

#include <limits>

namespace flashkv {
namespace {

// Table of the scalar u32 keys in file order, with the field each maps to. The float keys
// are interleaved at fixed points below, so the table is split where they go.
struct U32Key {
  const char* key;
  uint32_t Ds4Hparams::*field;
  bool optional;
};

constexpr U32Key kCountKeys[] = {
    {ds4_key::kBlockCount, &Ds4Hparams::n_layer, false},
    {ds4_key::kContextLength, &Ds4Hparams::n_ctx_train, true},
    {ds4_key::kEmbeddingLength, &Ds4Hparams::n_embd, false},
    {ds4_key::kVocabSize, &Ds4Hparams::n_vocab, false},
    {ds4_key::kHeadCount, &Ds4Hparams::n_head, false},
    {ds4_key::kHeadCountKv, &Ds4Hparams::n_head_kv, false},
    {ds4_key::kKeyLength, &Ds4Hparams::head_dim, false},
    {ds4_key::kValueLength, &Ds4Hparams::head_dim, false},
    {ds4_key::kRopeDimensionCount, &Ds4Hparams::n_rot, false},
    {ds4_key::kQLoraRank, &Ds4Hparams::q_lora_rank, false},
    {ds4_key::kOutputLoraRank, &Ds4Hparams::o_lora_rank, false},
    {ds4_key::kOutputGroupCount, &Ds4Hparams::o_groups, false},
    {ds4_key::kExpertCount, &Ds4Hparams::n_expert, false},
    {ds4_key::kExpertUsedCount, &Ds4Hparams::n_expert_used, false},
    {ds4_key::kExpertFeedForwardLength, &Ds4Hparams::n_ff_exp, false},
    {ds4_key::kExpertSharedCount, &Ds4Hparams::n_expert_shared, false},
    {ds4_key::kHashLayerCount, &Ds4Hparams::n_hash_layer, false},
    {ds4_key::kExpertGroupCount, &Ds4Hparams::n_expert_group, true},
    {ds4_key::kExpertGroupUsedCount, &Ds4Hparams::n_expert_group_used, true},
    {ds4_key::kSlidingWindow, &Ds4Hparams::n_swa, false},
    {ds4_key::kIndexerHeadCount, &Ds4Hparams::n_indexer_head, false},
    {ds4_key::kIndexerKeyLength, &Ds4Hparams::indexer_head_dim, false},
    {ds4_key::kIndexerTopK, &Ds4Hparams::indexer_top_k, false},
    {ds4_key::kHyperConnectionCount, &Ds4Hparams::n_hc, false},
    {ds4_key::kSinkhornIterations, &Ds4Hparams::hc_sinkhorn_iters, false},
    {ds4_key::kRopeOriginalContextLength, &Ds4Hparams::rope_orig_ctx, false},
};

struct F32Key {
  const char* key;
  float Ds4Hparams::*field;
};

constexpr F32Key kFloatKeys[] = {
    {ds4_key::kRopeFreqBase, &Ds4Hparams::rope_freq_base},
    {ds4_key::kRopeScalingFactor, &Ds4Hparams::rope_scaling_factor},
    {ds4_key::kYarnBetaFast, &Ds4Hparams::yarn_beta_fast},
    {ds4_key::kYarnBetaSlow, &Ds4Hparams::yarn_beta_slow},
    {ds4_key::kCompressRopeFreqBase, &Ds4Hparams::compress_rope_freq_base},
    {ds4_key::kExpertWeightsScale, &Ds4Hparams::expert_weights_scale},
    {ds4_key::kRmsEpsilon, &Ds4Hparams::rms_eps},
    {ds4_key::kHyperConnectionEpsilon, &Ds4Hparams::hc_eps},
};

}  // namespace

Status Ds4Hparams::Validate() const {
  auto positive = [](const char* what, uint64_t v) -> Status {
    if (v == 0) return InvalidArgument("{} must be positive", what);
    return Status::Ok();
  };
  FLASHKV_RETURN_IF_ERROR(positive(ds4_key::kBlockCount, n_layer));
  FLASHKV_RETURN_IF_ERROR(positive(ds4_key::kEmbeddingLength, n_embd));
  FLASHKV_RETURN_IF_ERROR(positive(ds4_key::kVocabSize, n_vocab));
  FLASHKV_RETURN_IF_ERROR(positive(ds4_key::kHeadCount, n_head));
  FLASHKV_RETURN_IF_ERROR(positive(ds4_key::kKeyLength, head_dim));
  FLASHKV_RETURN_IF_ERROR(positive(ds4_key::kQLoraRank, q_lora_rank));
  FLASHKV_RETURN_IF_ERROR(positive(ds4_key::kOutputLoraRank, o_lora_rank));
  FLASHKV_RETURN_IF_ERROR(positive(ds4_key::kOutputGroupCount, o_groups));
  FLASHKV_RETURN_IF_ERROR(positive(ds4_key::kExpertCount, n_expert));
  FLASHKV_RETURN_IF_ERROR(positive(ds4_key::kExpertUsedCount, n_expert_used));
  FLASHKV_RETURN_IF_ERROR(positive(ds4_key::kExpertFeedForwardLength, n_ff_exp));
  FLASHKV_RETURN_IF_ERROR(positive(ds4_key::kHyperConnectionCount, n_hc));
  if (n_head_kv != 1)
    return Unsupported("attention.head_count_kv is {}; DS4 has one shared KV head", n_head_kv);
  if (n_expert_shared != 1)
    return Unsupported("expert_shared_count is {}; DS4 has exactly one shared expert",
                       n_expert_shared);
  if (n_rot > head_dim || n_rot % 2 != 0)
    return InvalidArgument("rope.dimension_count {} must be even and at most key_length {}", n_rot,
                           head_dim);
  if ((static_cast<uint64_t>(n_head) * head_dim) % o_groups != 0)
    return InvalidArgument("head_count x key_length ({} x {}) is not divisible by {} groups",
                           n_head, head_dim, o_groups);
  if (n_expert_used > n_expert)
    return InvalidArgument("expert_used_count {} exceeds expert_count {}", n_expert_used, n_expert);
  if (n_hash_layer > n_layer)
    return InvalidArgument("hash_layer_count {} exceeds block_count {}", n_hash_layer, n_layer);
  if (compress_ratios.size() != n_layer)
    return InvalidArgument("attention.compress_ratios has {} entries for {} layers",
                           compress_ratios.size(), n_layer);
  if (swiglu_clamp.size() != n_layer)
    return InvalidArgument("swiglu_clamp_exp has {} entries for {} layers", swiglu_clamp.size(),
                           n_layer);
  bool any_indexer = false;
  for (uint32_t r : compress_ratios) any_indexer |= HasIndexer(r);
  if (any_indexer) {
    FLASHKV_RETURN_IF_ERROR(positive(ds4_key::kIndexerHeadCount, n_indexer_head));
    FLASHKV_RETURN_IF_ERROR(positive(ds4_key::kIndexerKeyLength, indexer_head_dim));
    FLASHKV_RETURN_IF_ERROR(positive(ds4_key::kIndexerTopK, indexer_top_k));
  }
  return Status::Ok();
}

void WriteDs4Metadata(const Ds4Hparams& hp, const std::string& name, GgufWriter& w) {
  w.SetString("general.architecture", kDs4Arch);
  w.SetString("general.name", name);
  w.SetU32("general.alignment", 32);
  for (const U32Key& k : kCountKeys) w.SetU32(Ds4Key(k.key), hp.*(k.field));
  for (const F32Key& k : kFloatKeys) w.SetF32(Ds4Key(k.key), hp.*(k.field));
  w.SetBool(Ds4Key(ds4_key::kExpertWeightsNorm), hp.expert_weights_norm);
  w.SetU32Array(Ds4Key(ds4_key::kCompressRatios), hp.compress_ratios);
  w.SetF32Array(Ds4Key(ds4_key::kSwigluClampExp), hp.swiglu_clamp);
}

Expected<Ds4Hparams> ReadDs4Hparams(const GgufFile& g) {
  Ds4Hparams hp;
  for (const U32Key& k : kCountKeys) {
    std::string key = Ds4Key(k.key);
    if (k.optional && !g.Has(key)) continue;
    FLASHKV_ASSIGN_OR_RETURN(uint64_t v, g.GetU64(key));
    if (v > std::numeric_limits<uint32_t>::max())
      return OutOfRange("{} = {} does not fit in 32 bits", key, v);
    hp.*(k.field) = static_cast<uint32_t>(v);
  }
  for (const F32Key& k : kFloatKeys) {
    FLASHKV_ASSIGN_OR_RETURN(double v, g.GetF64(Ds4Key(k.key)));
    hp.*(k.field) = static_cast<float>(v);
  }
  FLASHKV_ASSIGN_OR_RETURN(hp.expert_weights_norm, g.GetBool(Ds4Key(ds4_key::kExpertWeightsNorm)));
  FLASHKV_ASSIGN_OR_RETURN(std::vector<int64_t> ratios,
                           g.GetIntArray(Ds4Key(ds4_key::kCompressRatios)));
  for (int64_t r : ratios) {
    if (r < 0 || r > std::numeric_limits<uint32_t>::max())
      return OutOfRange("{} holds {}, not a valid ratio", Ds4Key(ds4_key::kCompressRatios), r);
    hp.compress_ratios.push_back(static_cast<uint32_t>(r));
  }
  FLASHKV_ASSIGN_OR_RETURN(std::vector<double> clamp,
                           g.GetFloatArray(Ds4Key(ds4_key::kSwigluClampExp)));
  for (double c : clamp) hp.swiglu_clamp.push_back(static_cast<float>(c));
  // ds4 files may carry extra entries (the MTP layer); keep one per trunk layer.
  if (hp.compress_ratios.size() > hp.n_layer) hp.compress_ratios.resize(hp.n_layer);
  if (hp.swiglu_clamp.size() > hp.n_layer) hp.swiglu_clamp.resize(hp.n_layer);
  return hp;
}

}  // namespace flashkv
