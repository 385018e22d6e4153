#include "convert/ds4_hparams.h"

#include <limits>

namespace flashkv {
namespace {

std::string Key(const char* suffix) {
  return std::string(kDs4Arch) + "." + suffix;
}

// Table of the scalar u32 keys in file order, with the field each maps to. The float keys
// are interleaved at fixed points below, so the table is split where they go.
struct U32Key {
  const char* key;
  uint32_t Ds4Hparams::*field;
  bool optional;
};

constexpr U32Key kCountKeys[] = {
    {"block_count", &Ds4Hparams::n_layer, false},
    {"context_length", &Ds4Hparams::n_ctx_train, true},
    {"embedding_length", &Ds4Hparams::n_embd, false},
    {"vocab_size", &Ds4Hparams::n_vocab, false},
    {"attention.head_count", &Ds4Hparams::n_head, false},
    {"attention.head_count_kv", &Ds4Hparams::n_head_kv, false},
    {"attention.key_length", &Ds4Hparams::head_dim, false},
    {"attention.value_length", &Ds4Hparams::head_dim, false},
    {"rope.dimension_count", &Ds4Hparams::n_rot, false},
    {"attention.q_lora_rank", &Ds4Hparams::q_lora_rank, false},
    {"attention.output_lora_rank", &Ds4Hparams::o_lora_rank, false},
    {"attention.output_group_count", &Ds4Hparams::o_groups, false},
    {"expert_count", &Ds4Hparams::n_expert, false},
    {"expert_used_count", &Ds4Hparams::n_expert_used, false},
    {"expert_feed_forward_length", &Ds4Hparams::n_ff_exp, false},
    {"expert_shared_count", &Ds4Hparams::n_expert_shared, false},
    {"hash_layer_count", &Ds4Hparams::n_hash_layer, false},
    {"expert_group_count", &Ds4Hparams::n_expert_group, true},
    {"expert_group_used_count", &Ds4Hparams::n_expert_group_used, true},
    {"attention.sliding_window", &Ds4Hparams::n_swa, false},
    {"attention.indexer.head_count", &Ds4Hparams::n_indexer_head, false},
    {"attention.indexer.key_length", &Ds4Hparams::indexer_head_dim, false},
    {"attention.indexer.top_k", &Ds4Hparams::indexer_top_k, false},
    {"hyper_connection.count", &Ds4Hparams::n_hc, false},
    {"hyper_connection.sinkhorn_iterations", &Ds4Hparams::hc_sinkhorn_iters, false},
    {"rope.scaling.original_context_length", &Ds4Hparams::rope_orig_ctx, false},
};

struct F32Key {
  const char* key;
  float Ds4Hparams::*field;
};

constexpr F32Key kFloatKeys[] = {
    {"rope.freq_base", &Ds4Hparams::rope_freq_base},
    {"rope.scaling.factor", &Ds4Hparams::rope_scaling_factor},
    {"rope.scaling.yarn_beta_fast", &Ds4Hparams::yarn_beta_fast},
    {"rope.scaling.yarn_beta_slow", &Ds4Hparams::yarn_beta_slow},
    {"attention.compress_rope_freq_base", &Ds4Hparams::compress_rope_freq_base},
    {"expert_weights_scale", &Ds4Hparams::expert_weights_scale},
    {"attention.layer_norm_rms_epsilon", &Ds4Hparams::rms_eps},
    {"hyper_connection.epsilon", &Ds4Hparams::hc_eps},
};

constexpr const char* kWeightsNormKey = "expert_weights_norm";
constexpr const char* kRatiosKey = "attention.compress_ratios";
constexpr const char* kClampKey = "swiglu_clamp_exp";

}  // namespace

Status Ds4Hparams::Validate() const {
  auto positive = [](const char* what, uint64_t v) -> Status {
    if (v == 0) return InvalidArgument("{} must be positive", what);
    return Status::Ok();
  };
  FLASHKV_RETURN_IF_ERROR(positive("block_count", n_layer));
  FLASHKV_RETURN_IF_ERROR(positive("embedding_length", n_embd));
  FLASHKV_RETURN_IF_ERROR(positive("vocab_size", n_vocab));
  FLASHKV_RETURN_IF_ERROR(positive("attention.head_count", n_head));
  FLASHKV_RETURN_IF_ERROR(positive("attention.key_length", head_dim));
  FLASHKV_RETURN_IF_ERROR(positive("attention.q_lora_rank", q_lora_rank));
  FLASHKV_RETURN_IF_ERROR(positive("attention.output_lora_rank", o_lora_rank));
  FLASHKV_RETURN_IF_ERROR(positive("attention.output_group_count", o_groups));
  FLASHKV_RETURN_IF_ERROR(positive("expert_count", n_expert));
  FLASHKV_RETURN_IF_ERROR(positive("expert_used_count", n_expert_used));
  FLASHKV_RETURN_IF_ERROR(positive("expert_feed_forward_length", n_ff_exp));
  FLASHKV_RETURN_IF_ERROR(positive("hyper_connection.count", n_hc));
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
    FLASHKV_RETURN_IF_ERROR(positive("attention.indexer.head_count", n_indexer_head));
    FLASHKV_RETURN_IF_ERROR(positive("attention.indexer.key_length", indexer_head_dim));
    FLASHKV_RETURN_IF_ERROR(positive("attention.indexer.top_k", indexer_top_k));
  }
  return Status::Ok();
}

void WriteDs4Metadata(const Ds4Hparams& hp, const std::string& name, GgufWriter& w) {
  w.SetString("general.architecture", kDs4Arch);
  w.SetString("general.name", name);
  w.SetU32("general.alignment", 32);
  for (const U32Key& k : kCountKeys) w.SetU32(Key(k.key), hp.*(k.field));
  for (const F32Key& k : kFloatKeys) w.SetF32(Key(k.key), hp.*(k.field));
  w.SetBool(Key(kWeightsNormKey), hp.expert_weights_norm);
  w.SetU32Array(Key(kRatiosKey), hp.compress_ratios);
  w.SetF32Array(Key(kClampKey), hp.swiglu_clamp);
}

Expected<Ds4Hparams> ReadDs4Hparams(const GgufFile& g) {
  Ds4Hparams hp;
  for (const U32Key& k : kCountKeys) {
    std::string key = Key(k.key);
    if (k.optional && !g.Has(key)) continue;
    FLASHKV_ASSIGN_OR_RETURN(uint64_t v, g.GetU64(key));
    if (v > std::numeric_limits<uint32_t>::max())
      return OutOfRange("{} = {} does not fit in 32 bits", key, v);
    hp.*(k.field) = static_cast<uint32_t>(v);
  }
  for (const F32Key& k : kFloatKeys) {
    FLASHKV_ASSIGN_OR_RETURN(double v, g.GetF64(Key(k.key)));
    hp.*(k.field) = static_cast<float>(v);
  }
  FLASHKV_ASSIGN_OR_RETURN(hp.expert_weights_norm, g.GetBool(Key(kWeightsNormKey)));
  FLASHKV_ASSIGN_OR_RETURN(std::vector<int64_t> ratios, g.GetIntArray(Key(kRatiosKey)));
  for (int64_t r : ratios) {
    if (r < 0 || r > std::numeric_limits<uint32_t>::max())
      return OutOfRange("{} holds {}, not a valid ratio", Key(kRatiosKey), r);
    hp.compress_ratios.push_back(static_cast<uint32_t>(r));
  }
  FLASHKV_ASSIGN_OR_RETURN(std::vector<double> clamp, g.GetFloatArray(Key(kClampKey)));
  for (double c : clamp) hp.swiglu_clamp.push_back(static_cast<float>(c));
  // ds4 files may carry extra entries (the MTP layer); keep one per trunk layer.
  if (hp.compress_ratios.size() > hp.n_layer) hp.compress_ratios.resize(hp.n_layer);
  if (hp.swiglu_clamp.size() > hp.n_layer) hp.swiglu_clamp.resize(hp.n_layer);
  return hp;
}

}  // namespace flashkv
