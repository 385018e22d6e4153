#include "model/model_config.h"

#include <cmath>
#include <initializer_list>
#include <limits>

#include "gguf/ds4_keys.h"

namespace flashkv {
namespace {

// Reads `deepseek4.<key>` through one of GgufFile's typed getters, prefixing errors
// with the full key so a user sees which value is wrong.
class MetaReader {
 public:
  explicit MetaReader(const GgufFile& f) : f_(f) {}

  std::string Key(const char* key) const { return Ds4Key(key); }

  Status Int(const char* key, int* out, int64_t lo, int64_t hi) const {
    auto v = f_.GetI64(Key(key));
    if (!v.ok()) return v.status().WithContext("metadata " + Key(key));
    if (*v < lo || *v > hi) {
      return InvalidArgument("metadata {} = {} is out of range ({}..{})", Key(key), *v, lo, hi);
    }
    *out = static_cast<int>(*v);
    return Status::Ok();
  }
  Status U64(const char* key, uint64_t* out) const {
    auto v = f_.GetU64(Key(key));
    if (!v.ok()) return v.status().WithContext("metadata " + Key(key));
    *out = *v;
    return Status::Ok();
  }
  Status Float(const char* key, float* out) const {
    auto v = f_.GetF64(Key(key));
    if (!v.ok()) return v.status().WithContext("metadata " + Key(key));
    if (!std::isfinite(*v)) return InvalidArgument("metadata {} is not finite", Key(key));
    *out = static_cast<float>(*v);
    return Status::Ok();
  }
  bool Has(const char* key) const { return f_.Has(Key(key)); }

 private:
  const GgufFile& f_;
};

// Every integer hyperparameter and what the model and the formats allow, read and checked
// from this one table (FromGguf) and checked again for configs built by hand (Validate).
// Bounds are generous multiples of DeepSeek-V4-Flash's values, capped where the snapshot
// format caps them (layers 4096, vocabulary 2^24, head and indexer dims 2^16); each also
// bounds the memory and time the value costs: a window's rows are allocated per layer and
// read per token, Sinkhorn runs its iterations for every token of every layer.
struct IntField {
  const char* key;
  int ModelConfig::*field;
  int64_t lo;
  int64_t hi;
};
constexpr IntField kIntFields[] = {
    {ds4_key::kBlockCount, &ModelConfig::n_layer, 1, 4096},
    {ds4_key::kEmbeddingLength, &ModelConfig::n_embd, 1, 65536},
    {ds4_key::kVocabSize, &ModelConfig::n_vocab, 1, 1 << 24},
    {ds4_key::kHeadCount, &ModelConfig::n_head, 1, 1024},
    {ds4_key::kHeadCountKv, &ModelConfig::n_head_kv, 1, 1024},
    {ds4_key::kKeyLength, &ModelConfig::head_dim, 1, 65536},
    {ds4_key::kRopeDimensionCount, &ModelConfig::n_rot, 2, 65536},
    {ds4_key::kQLoraRank, &ModelConfig::q_lora_rank, 1, 65536},
    {ds4_key::kOutputLoraRank, &ModelConfig::o_lora_rank, 1, 65536},
    {ds4_key::kOutputGroupCount, &ModelConfig::n_out_group, 1, 1024},
    {ds4_key::kExpertCount, &ModelConfig::n_expert, 1, 1024},
    {ds4_key::kExpertUsedCount, &ModelConfig::n_expert_used, 1, 1024},
    {ds4_key::kExpertFeedForwardLength, &ModelConfig::n_ff_exp, 1, 1 << 20},
    {ds4_key::kExpertSharedCount, &ModelConfig::n_expert_shared, 0, 1024},
    {ds4_key::kHashLayerCount, &ModelConfig::n_hash_layer, 0, 4096},
    {ds4_key::kSlidingWindow, &ModelConfig::n_swa, 1, 65536},
    {ds4_key::kIndexerHeadCount, &ModelConfig::indexer_heads, 1, 1024},
    {ds4_key::kIndexerKeyLength, &ModelConfig::indexer_head_dim, 1, 65536},
    {ds4_key::kIndexerTopK, &ModelConfig::indexer_top_k, 1, 65536},
    {ds4_key::kHyperConnectionCount, &ModelConfig::n_hc, 1, 16},
    {ds4_key::kSinkhornIterations, &ModelConfig::hc_sinkhorn_iters, 1, 1000},
};

// A product of hyperparameters must fit an int; computed in 64 bits so the check itself
// cannot overflow.
Status CheckProduct(const char* what, std::initializer_list<int64_t> factors) {
  int64_t p = 1;
  for (int64_t f : factors) {
    if (__builtin_mul_overflow(p, f, &p) || p > std::numeric_limits<int>::max()) {
      return InvalidArgument("model shape: {} exceeds {}", what, std::numeric_limits<int>::max());
    }
  }
  return Status::Ok();
}

// llama.cpp GGUF sqrt-softplus gating id (llama-hparams.h LLAMA_EXPERT_GATING_FUNC_TYPE_*:
// 0 none, 1 softmax, 2 sigmoid, 3 softmax on the weights, 4 sqrt(softplus)).
constexpr int64_t kGatingSqrtSoftplus = 4;

// The keys only llama.cpp's deepseek4 files carry, and vocab_size where they leave it out.
// Any of them marks the file as GgufLayout::kLlamaCpp. Runs after the kIntFields loop, so
// c.n_layer is block_count here.
Status ReadLlamaCppKeys(const GgufFile& file, const MetaReader& m, ModelConfig& c) {
  if (m.Has(ds4_key::kNextnPredictLayers)) {
    c.layout = GgufLayout::kLlamaCpp;
    FLASHKV_RETURN_IF_ERROR(
        m.Int(ds4_key::kNextnPredictLayers, &c.n_layer_nextn, 0, c.n_layer - 1));
    c.n_layer -= c.n_layer_nextn;
  }
  if (m.Has(ds4_key::kExpertGatingFunc)) {
    c.layout = GgufLayout::kLlamaCpp;
    const std::string key = m.Key(ds4_key::kExpertGatingFunc);
    FLASHKV_ASSIGN_OR_RETURN(int64_t g, file.GetI64(key));
    if (g != kGatingSqrtSoftplus) {
      return Unsupported(
          "metadata {} = {}: DeepSeek V4 routes with sqrt(softplus) (llama.cpp id {})", key, g,
          kGatingSqrtSoftplus);
    }
  }
  if (m.Has(ds4_key::kSwigluClampShexp)) {
    c.layout = GgufLayout::kLlamaCpp;
    // flashkv clamps the shared expert with the routed experts' limit, as ds4 does.
    const std::string key = m.Key(ds4_key::kSwigluClampShexp);
    auto shexp = file.GetFloatArray(key);
    if (!shexp.ok()) return shexp.status().WithContext("metadata " + key);
    auto exp = file.GetFloatArray(m.Key(ds4_key::kSwigluClampExp));
    if (!exp.ok()) return exp.status().WithContext("metadata " + m.Key(ds4_key::kSwigluClampExp));
    for (int l = 0; l < c.n_layer; ++l) {
      if (static_cast<size_t>(l) >= shexp->size() || static_cast<size_t>(l) >= exp->size() ||
          (*shexp)[l] != (*exp)[l]) {
        return Unsupported(
            "metadata {} differs from {} at layer {} (or is shorter); flashkv "
            "clamps shared and routed experts alike",
            key, m.Key(ds4_key::kSwigluClampExp), l);
      }
    }
  }
  if (!m.Has(ds4_key::kVocabSize)) {
    // llama.cpp reads the vocabulary size from the token list.
    if (!file.Has("tokenizer.ggml.tokens")) {
      return NotFound("metadata {} is missing and there is no tokenizer.ggml.tokens to count",
                      m.Key(ds4_key::kVocabSize));
    }
    c.layout = GgufLayout::kLlamaCpp;
    FLASHKV_ASSIGN_OR_RETURN(GgufArrayInfo tokens, file.ArrayInfo("tokenizer.ggml.tokens"));
    if (tokens.count < 1 || tokens.count > (uint64_t(1) << 24)) {
      return InvalidArgument("tokenizer.ggml.tokens has {} entries (vocab_size must be 1..2^24)",
                             tokens.count);
    }
    c.n_vocab = static_cast<int>(tokens.count);
  }
  return Status::Ok();
}

}  // namespace

AttentionKind ModelConfig::attention_kind(int layer) const {
  if (!is_compressed(layer)) return AttentionKind::kSliding;
  return has_indexer(layer) ? AttentionKind::kCompressed : AttentionKind::kHeavy;
}

int ModelConfig::compressed_capacity(int layer, int ctx) const {
  const int ratio = compress_ratios[layer];
  return ratio == 0 ? 0 : ctx / ratio + 2;
}

Expected<ModelConfig> ModelConfig::FromGguf(const GgufFile& file) {
  ModelConfig c;
  if (file.Has("general.architecture")) {
    FLASHKV_ASSIGN_OR_RETURN(std::string arch, file.GetString("general.architecture"));
    if (arch != kDs4Arch) {
      return Unsupported("general.architecture is '{}', flashkv runs '{}' models", arch, kDs4Arch);
    }
  }
  if (file.Has("general.name")) {
    auto name = file.GetString("general.name");
    if (name.ok()) c.name = *name;
  }

  MetaReader m(file);
  for (const IntField& f : kIntFields) {
    if (&(c.*f.field) == &c.n_vocab && !m.Has(f.key)) continue;  // ReadLlamaCppKeys
    FLASHKV_RETURN_IF_ERROR(m.Int(f.key, &(c.*f.field), f.lo, f.hi));
  }
  FLASHKV_RETURN_IF_ERROR(ReadLlamaCppKeys(file, m, c));
  int value_length = 0;
  FLASHKV_RETURN_IF_ERROR(m.Int(ds4_key::kValueLength, &value_length, 1, 65536));
  if (value_length != c.head_dim) {
    return InvalidArgument("metadata {} = {} differs from {} = {} (DeepSeek V4 shares K and V)",
                           m.Key(ds4_key::kValueLength), value_length, m.Key(ds4_key::kKeyLength),
                           c.head_dim);
  }
  if (m.Has(ds4_key::kContextLength))
    FLASHKV_RETURN_IF_ERROR(m.U64(ds4_key::kContextLength, &c.context_length));

  FLASHKV_RETURN_IF_ERROR(m.Float(ds4_key::kRopeFreqBase, &c.rope_freq_base));
  FLASHKV_RETURN_IF_ERROR(m.Float(ds4_key::kCompressRopeFreqBase, &c.compress_rope_freq_base));
  FLASHKV_RETURN_IF_ERROR(m.Float(ds4_key::kRopeScalingFactor, &c.rope_scaling_factor));
  FLASHKV_RETURN_IF_ERROR(m.U64(ds4_key::kRopeOriginalContextLength, &c.rope_orig_ctx));
  // llama.cpp's converter writes the betas only when the checkpoint states them; absent, they
  // take its defaults (llama_hparams: 32 and 1), which are also V4's values.
  c.yarn_beta_fast = 32.0f;
  c.yarn_beta_slow = 1.0f;
  if (c.layout == GgufLayout::kDs4 || m.Has(ds4_key::kYarnBetaFast))
    FLASHKV_RETURN_IF_ERROR(m.Float(ds4_key::kYarnBetaFast, &c.yarn_beta_fast));
  if (c.layout == GgufLayout::kDs4 || m.Has(ds4_key::kYarnBetaSlow))
    FLASHKV_RETURN_IF_ERROR(m.Float(ds4_key::kYarnBetaSlow, &c.yarn_beta_slow));
  FLASHKV_RETURN_IF_ERROR(m.Float(ds4_key::kRmsEpsilon, &c.rms_eps));
  FLASHKV_RETURN_IF_ERROR(m.Float(ds4_key::kHyperConnectionEpsilon, &c.hc_eps));
  FLASHKV_RETURN_IF_ERROR(m.Float(ds4_key::kExpertWeightsScale, &c.expert_weights_scale));
  if (m.Has(ds4_key::kExpertWeightsNorm)) {
    FLASHKV_ASSIGN_OR_RETURN(bool norm, file.GetBool(m.Key(ds4_key::kExpertWeightsNorm)));
    if (!norm) {
      return Unsupported("metadata {} is false; DeepSeek V4 always normalises expert weights",
                         m.Key(ds4_key::kExpertWeightsNorm));
    }
  }
  if (m.Has(ds4_key::kExpertGroupCount)) {
    int groups = 0;
    FLASHKV_RETURN_IF_ERROR(m.Int(ds4_key::kExpertGroupCount, &groups, 0, 1024));
    if (groups > 1) {
      return Unsupported("metadata {} = {}: grouped expert routing is not DeepSeek V4",
                         m.Key(ds4_key::kExpertGroupCount), groups);
    }
  }

  {
    const std::string key = m.Key(ds4_key::kCompressRatios);
    auto ratios = file.GetIntArray(key);
    if (!ratios.ok()) return ratios.status().WithContext("metadata " + key);
    if (ratios->size() < static_cast<size_t>(c.n_layer)) {
      return InvalidArgument("metadata {} has {} entries, block_count is {}", key, ratios->size(),
                             c.n_layer);
    }
    for (int l = 0; l < c.n_layer; ++l) {
      const int64_t r = (*ratios)[l];
      if (r < 0 || r == 1 || r > (1 << 20)) {
        return InvalidArgument("metadata {}[{}] = {} is not 0 or a ratio >= 2", key, l, r);
      }
      c.compress_ratios.push_back(static_cast<int>(r));
    }
  }
  {
    const std::string key = m.Key(ds4_key::kSwigluClampExp);
    auto clamps = file.GetFloatArray(key);
    if (!clamps.ok()) return clamps.status().WithContext("metadata " + key);
    if (clamps->size() < static_cast<size_t>(c.n_layer)) {
      return InvalidArgument("metadata {} has {} entries, block_count is {}", key, clamps->size(),
                             c.n_layer);
    }
    for (int l = 0; l < c.n_layer; ++l) c.swiglu_clamp.push_back(static_cast<float>((*clamps)[l]));
  }

  FLASHKV_RETURN_IF_ERROR(c.Validate());
  return c;
}

Status ModelConfig::Validate() const {
  for (const IntField& f : kIntFields) {
    const int v = this->*f.field;
    if (v < f.lo || v > f.hi) {
      return InvalidArgument("{} = {} is out of range ({}..{})", f.key, v, f.lo, f.hi);
    }
  }
  // The bounds keep every size ModelConfig's methods hold in an int below 2^27 (q_dim at
  // most 2^10 · 2^16, hc_dim 2^4 · 2^16, ...); an expert's weight matrix is the one product
  // of in-range values that could still pass 2^31.
  FLASHKV_RETURN_IF_ERROR(
      CheckProduct("expert_feed_forward_length × embedding_length", {n_ff_exp, n_embd}));
  if (context_length > (uint64_t(1) << 40) || rope_orig_ctx > (uint64_t(1) << 40)) {
    return InvalidArgument("context lengths beyond 2^40 tokens are not a model's");
  }
  if (static_cast<int>(compress_ratios.size()) != n_layer ||
      static_cast<int>(swiglu_clamp.size()) != n_layer) {
    return InvalidArgument("per-layer arrays must have block_count = {} entries", n_layer);
  }
  if (n_head_kv != 1) {
    return InvalidArgument("attention.head_count_kv = {}; DeepSeek V4 has one shared KV head",
                           n_head_kv);
  }
  if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > head_dim) {
    return InvalidArgument("rope.dimension_count = {} must be even and at most key_length = {}",
                           n_rot, head_dim);
  }
  if (n_head % n_out_group != 0) {
    return InvalidArgument(
        "attention.output_group_count = {} does not divide attention.head_count = {}", n_out_group,
        n_head);
  }
  if (n_expert_used > n_expert) {
    return InvalidArgument("expert_used_count = {} exceeds expert_count = {}", n_expert_used,
                           n_expert);
  }
  if (n_expert_shared != 1) {
    return InvalidArgument("expert_shared_count = {}; DeepSeek V4 has exactly one shared expert",
                           n_expert_shared);
  }
  if (n_expert > 1024) return InvalidArgument("expert_count = {} exceeds 1024", n_expert);
  if (n_hash_layer > n_layer) {
    return InvalidArgument("hash_layer_count = {} exceeds block_count = {}", n_hash_layer, n_layer);
  }
  if (n_hc < 1 || n_hc > 16)
    return InvalidArgument("hyper_connection.count = {} is outside 1..16", n_hc);
  bool any_indexer = false;
  for (int l = 0; l < n_layer; ++l) any_indexer |= has_indexer(l);
  if (any_indexer && n_rot > indexer_head_dim) {
    return InvalidArgument("rope.dimension_count = {} exceeds attention.indexer.key_length = {}",
                           n_rot, indexer_head_dim);
  }
  if (!(rms_eps > 0 && rms_eps < 1) || !(hc_eps >= 0 && hc_eps < 1)) {
    return InvalidArgument("epsilons must be in (0, 1), hyper_connection.epsilon in [0, 1)");
  }
  if (!(rope_freq_base > 1) || !(compress_rope_freq_base > 1) || !std::isfinite(rope_freq_base) ||
      !std::isfinite(compress_rope_freq_base)) {
    return InvalidArgument("rope frequency bases must be finite and > 1");
  }
  if (!std::isfinite(rope_scaling_factor) || rope_scaling_factor < 0 ||
      !std::isfinite(yarn_beta_fast) || !std::isfinite(yarn_beta_slow) ||
      !std::isfinite(expert_weights_scale) || expert_weights_scale <= 0) {
    return InvalidArgument(
        "rope scaling factor and YaRN betas must be finite (the factor >= 0), "
        "expert_weights_scale finite and > 0");
  }
  for (int l = 0; l < n_layer; ++l) {
    if (!std::isfinite(swiglu_clamp[l]) || swiglu_clamp[l] < 0) {
      return InvalidArgument("swiglu_clamp_exp[{}] = {} must be finite and >= 0", l,
                             swiglu_clamp[l]);
    }
  }
  if (rope_scaling_factor > 1 && rope_orig_ctx == 0) {
    return InvalidArgument("rope.scaling.original_context_length must be set when YaRN is on");
  }
  return Status::Ok();
}

}  // namespace flashkv
