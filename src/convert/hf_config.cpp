#include "convert/hf_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

namespace flashkv {
namespace {

using nlohmann::json;

constexpr const char* kSliding = "sliding_attention";
constexpr const char* kCsa = "compressed_sparse_attention";
constexpr const char* kHca = "heavily_compressed_attention";

// Typed field access with DeepseekV4Config's defaults; `null` counts as absent.
class Fields {
 public:
  explicit Fields(const json& j) : j_(j) {}

  bool Has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

  Expected<uint32_t> U32(const char* key, std::optional<uint32_t> def) const {
    if (!Has(key)) {
      if (def) return *def;
      return InvalidArgument("config.json: '{}' is missing", key);
    }
    const json& v = j_[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        v.get<int64_t>() > std::numeric_limits<uint32_t>::max())
      return InvalidArgument("config.json: '{}' must be a non-negative integer, got {}", key,
                             v.dump());
    return static_cast<uint32_t>(v.get<int64_t>());
  }

  Expected<double> F64(const char* key, std::optional<double> def) const {
    if (!Has(key)) {
      if (def) return *def;
      return InvalidArgument("config.json: '{}' is missing", key);
    }
    const json& v = j_[key];
    if (!v.is_number()) return InvalidArgument("config.json: '{}' must be a number", key);
    return v.get<double>();
  }

  Expected<bool> Bool(const char* key, bool def) const {
    if (!Has(key)) return def;
    if (!j_[key].is_boolean()) return InvalidArgument("config.json: '{}' must be a bool", key);
    return j_[key].get<bool>();
  }

  Expected<std::string> String(const char* key, const std::string& def) const {
    if (!Has(key)) return def;
    if (!j_[key].is_string()) return InvalidArgument("config.json: '{}' must be a string", key);
    return j_[key].get<std::string>();
  }

 private:
  const json& j_;
};

Expected<std::vector<std::string>> StringList(const json& v, const char* key) {
  if (!v.is_array()) return InvalidArgument("config.json: '{}' must be a list", key);
  std::vector<std::string> out;
  for (const json& e : v) {
    if (!e.is_string()) return InvalidArgument("config.json: '{}' entries must be strings", key);
    out.push_back(e.get<std::string>());
  }
  return out;
}

// Fills the rope fields from the compress rope's parameters.
Status ParseRope(const json& j, const Fields& f, HfModelConfig& cfg) {
  Ds4Hparams& hp = cfg.hp;
  json rp = json::object();
  if (f.Has("rope_parameters")) {
    rp = j["rope_parameters"];
  } else if (f.Has("rope_scaling")) {
    rp = j["rope_scaling"];
  }
  if (!rp.is_object()) return InvalidArgument("config.json: rope_parameters must be an object");
  FLASHKV_ASSIGN_OR_RETURN(double top_theta, f.F64("rope_theta", 10000.0));
  FLASHKV_ASSIGN_OR_RETURN(double top_ctheta, f.F64("compress_rope_theta", 160000.0));
  FLASHKV_ASSIGN_OR_RETURN(uint32_t max_pos, f.U32("max_position_embeddings", 1048576));

  json main = json::object(), compress = json::object();
  if (rp.contains("main") && rp["main"].is_object() && rp.contains("compress") &&
      rp["compress"].is_object()) {
    main = rp["main"];
    compress = rp["compress"];
  } else {
    // A flat dict is the compress branch's scaling; as in transformers, the thetas come from
    // rope_theta / compress_rope_theta, not from the dict.
    for (auto it = rp.begin(); it != rp.end(); ++it)
      if (it.key() != "main" && it.key() != "compress" && it.key() != "rope_theta")
        compress[it.key()] = it.value();
  }
  auto rope_type = [](const json& d) -> std::string {
    for (const char* k : {"rope_type", "type"})
      if (d.contains(k) && d[k].is_string()) return d[k].get<std::string>();
    return "default";
  };
  auto number = [](const json& d, const char* k, double def) -> Expected<double> {
    if (!d.contains(k) || d[k].is_null()) return def;
    if (!d[k].is_number()) return InvalidArgument("config.json: rope '{}' must be a number", k);
    return d[k].get<double>();
  };

  if (rope_type(main) != "default")
    return Unsupported("config.json: main RoPE type '{}' (DS4 uses plain RoPE there)",
                       rope_type(main));
  FLASHKV_ASSIGN_OR_RETURN(double theta_m, number(main, "rope_theta", top_theta));
  FLASHKV_ASSIGN_OR_RETURN(double theta_c, number(compress, "rope_theta", top_ctheta));
  hp.rope_freq_base = static_cast<float>(theta_m);
  hp.compress_rope_freq_base = static_cast<float>(theta_c);

  const std::string ctype = rope_type(compress);
  if (ctype == "yarn") {
    if (!compress.contains("factor"))
      return InvalidArgument("config.json: the compress YaRN rope has no 'factor'");
    FLASHKV_ASSIGN_OR_RETURN(double factor, number(compress, "factor", 1.0));
    FLASHKV_ASSIGN_OR_RETURN(double orig,
                             number(compress, "original_max_position_embeddings", max_pos));
    FLASHKV_ASSIGN_OR_RETURN(double bf, number(compress, "beta_fast", 32.0));
    FLASHKV_ASSIGN_OR_RETURN(double bs, number(compress, "beta_slow", 1.0));
    FLASHKV_ASSIGN_OR_RETURN(double af, number(compress, "attention_factor", 1.0));
    if (!compress.contains("original_max_position_embeddings"))
      cfg.notes.push_back(
          fmt::format("compress YaRN has no original_max_position_embeddings; using {}", max_pos));
    if (af != 1.0)
      cfg.notes.push_back(fmt::format(
          "compress YaRN attention_factor {} ignored: DS4 applies no YaRN magnitude scale", af));
    if (factor < 1.0 || orig < 1.0 || orig > std::numeric_limits<uint32_t>::max())
      return InvalidArgument("config.json: compress YaRN factor {} / original context {} invalid",
                             factor, orig);
    hp.rope_scaling_factor = static_cast<float>(factor);
    hp.rope_orig_ctx = static_cast<uint32_t>(orig);
    hp.yarn_beta_fast = static_cast<float>(bf);
    hp.yarn_beta_slow = static_cast<float>(bs);
  } else if (ctype == "default") {
    // YaRN with factor 1 interpolates nothing: its table is the plain RoPE table.
    FLASHKV_ASSIGN_OR_RETURN(double orig,
                             number(compress, "original_max_position_embeddings", max_pos));
    hp.rope_scaling_factor = 1.0f;
    hp.rope_orig_ctx = static_cast<uint32_t>(orig);
    hp.yarn_beta_fast = 32.0f;
    hp.yarn_beta_slow = 1.0f;
    cfg.notes.push_back("compress RoPE is plain ('default'): written as YaRN factor 1");
  } else {
    return Unsupported("config.json: compress RoPE type '{}' (DS4 supports default and yarn)",
                       ctype);
  }
  return Status::Ok();
}

Expected<HfModelConfig> ParseJson(const json& j) {
  if (!j.is_object()) return InvalidArgument("config.json is not a JSON object");
  Fields f(j);
  HfModelConfig cfg;
  Ds4Hparams& hp = cfg.hp;

  FLASHKV_ASSIGN_OR_RETURN(std::string model_type, f.String("model_type", "deepseek_v4"));
  if (model_type != "deepseek_v4")
    return Unsupported("config.json: model_type '{}' is not deepseek_v4", model_type);
  FLASHKV_ASSIGN_OR_RETURN(hp.n_vocab, f.U32("vocab_size", 129280));
  FLASHKV_ASSIGN_OR_RETURN(hp.n_embd, f.U32("hidden_size", 4096));
  FLASHKV_ASSIGN_OR_RETURN(hp.n_ff_exp, f.U32("moe_intermediate_size", 2048));
  FLASHKV_ASSIGN_OR_RETURN(hp.n_layer, f.U32("num_hidden_layers", 43));
  FLASHKV_ASSIGN_OR_RETURN(hp.n_head, f.U32("num_attention_heads", 64));
  FLASHKV_ASSIGN_OR_RETURN(hp.n_head_kv, f.U32("num_key_value_heads", 1));
  FLASHKV_ASSIGN_OR_RETURN(hp.head_dim, f.U32("head_dim", 512));
  FLASHKV_ASSIGN_OR_RETURN(hp.q_lora_rank, f.U32("q_lora_rank", 1024));
  FLASHKV_ASSIGN_OR_RETURN(hp.n_expert_used, f.U32("num_experts_per_tok", 6));
  FLASHKV_ASSIGN_OR_RETURN(hp.n_expert, f.U32("n_routed_experts", 256));
  FLASHKV_ASSIGN_OR_RETURN(hp.n_expert_shared, f.U32("n_shared_experts", 1));
  FLASHKV_ASSIGN_OR_RETURN(hp.n_ctx_train, f.U32("max_position_embeddings", 1048576));
  FLASHKV_ASSIGN_OR_RETURN(hp.n_hc, f.U32("hc_mult", 4));
  FLASHKV_ASSIGN_OR_RETURN(hp.hc_sinkhorn_iters, f.U32("hc_sinkhorn_iters", 20));
  FLASHKV_ASSIGN_OR_RETURN(hp.n_swa, f.U32("sliding_window", 128));
  FLASHKV_ASSIGN_OR_RETURN(hp.o_groups, f.U32("o_groups", 8));
  FLASHKV_ASSIGN_OR_RETURN(hp.o_lora_rank, f.U32("o_lora_rank", 1024));
  FLASHKV_ASSIGN_OR_RETURN(hp.n_indexer_head, f.U32("index_n_heads", 64));
  FLASHKV_ASSIGN_OR_RETURN(hp.indexer_head_dim, f.U32("index_head_dim", 128));
  FLASHKV_ASSIGN_OR_RETURN(hp.indexer_top_k, f.U32("index_topk", 512));
  FLASHKV_ASSIGN_OR_RETURN(hp.n_expert_group, f.U32("n_group", 0));
  FLASHKV_ASSIGN_OR_RETURN(hp.n_expert_group_used, f.U32("topk_group", 0));
  FLASHKV_ASSIGN_OR_RETURN(hp.expert_weights_norm, f.Bool("norm_topk_prob", true));
  FLASHKV_ASSIGN_OR_RETURN(double scale, f.F64("routed_scaling_factor", 1.5));
  FLASHKV_ASSIGN_OR_RETURN(double eps, f.F64("rms_norm_eps", 1e-6));
  FLASHKV_ASSIGN_OR_RETURN(double hc_eps, f.F64("hc_eps", 1e-6));
  FLASHKV_ASSIGN_OR_RETURN(double swiglu, f.F64("swiglu_limit", 10.0));
  hp.expert_weights_scale = static_cast<float>(scale);
  hp.rms_eps = static_cast<float>(eps);
  hp.hc_eps = static_cast<float>(hc_eps);

  FLASHKV_ASSIGN_OR_RETURN(std::string scoring, f.String("scoring_func", "sqrtsoftplus"));
  if (scoring != "sqrtsoftplus")
    return Unsupported("config.json: scoring_func '{}' (DS4 routes with sqrtsoftplus)", scoring);
  FLASHKV_ASSIGN_OR_RETURN(std::string act, f.String("hidden_act", "silu"));
  if (act != "silu") return Unsupported("config.json: hidden_act '{}' (DS4 uses silu)", act);

  // Rotary dims: partial_rotary_factor, else legacy qk_rope_head_dim, else 64/512.
  if (f.Has("partial_rotary_factor")) {
    FLASHKV_ASSIGN_OR_RETURN(double prf, f.F64("partial_rotary_factor", 0.125));
    hp.n_rot = static_cast<uint32_t>(static_cast<double>(hp.head_dim) * prf);
  } else if (f.Has("qk_rope_head_dim")) {
    FLASHKV_ASSIGN_OR_RETURN(hp.n_rot, f.U32("qk_rope_head_dim", 64));
  } else {
    hp.n_rot = static_cast<uint32_t>(static_cast<double>(hp.head_dim) * (64.0 / 512.0));
  }

  const uint32_t n = hp.n_layer;
  // Attention schedule.
  uint32_t rate_csa = 4, rate_hca = 128;
  if (f.Has("compress_rates")) {
    const json& r = j["compress_rates"];
    if (!r.is_object()) return InvalidArgument("config.json: compress_rates must be an object");
    for (auto [key, out] : {std::pair{kCsa, &rate_csa}, std::pair{kHca, &rate_hca}}) {
      if (!r.contains(key)) continue;
      if (!r[key].is_number_unsigned())
        return InvalidArgument("config.json: compress_rates.{} must be a positive integer", key);
      *out = r[key].get<uint32_t>();
    }
  }
  FLASHKV_ASSIGN_OR_RETURN(rate_csa, f.U32("compress_rate_csa", rate_csa));
  FLASHKV_ASSIGN_OR_RETURN(rate_hca, f.U32("compress_rate_hca", rate_hca));
  if (f.Has("layer_types")) {
    FLASHKV_ASSIGN_OR_RETURN(cfg.layer_types, StringList(j["layer_types"], "layer_types"));
  } else if (f.Has("compress_ratios")) {
    const json& r = j["compress_ratios"];
    if (!r.is_array()) return InvalidArgument("config.json: compress_ratios must be a list");
    for (const json& e : r) {
      if (!e.is_number_unsigned())
        return InvalidArgument("config.json: compress_ratios entries must be integers");
      uint32_t v = e.get<uint32_t>();
      cfg.layer_types.push_back(v == 0 ? kSliding : v == 4 ? kCsa : kHca);
      if (v != 0 && v != 4) rate_hca = v;
    }
  } else {
    cfg.notes.push_back("config.json has no layer_types: using transformers' V4-Pro default");
    for (uint32_t i = 0; i < n; ++i)
      cfg.layer_types.push_back(i < 2 ? kHca : ((i - 2) % 2 ? kCsa : kHca));
  }
  if (cfg.layer_types.size() < n)
    return InvalidArgument("config.json: {} layer types for {} layers", cfg.layer_types.size(), n);
  cfg.layer_types.resize(n);  // extra entries describe MTP layers
  if (rate_csa != 4)
    return Unsupported("config.json: CSA compress rate {} (a DS4 GGUF marks CSA layers by ratio 4)",
                       rate_csa);
  if (rate_hca == 0 || rate_hca == 4)
    return Unsupported("config.json: HCA compress rate {} (must be neither 0 nor 4 in DS4)",
                       rate_hca);
  for (uint32_t i = 0; i < n; ++i) {
    const std::string& t = cfg.layer_types[i];
    if (t == kSliding)
      hp.compress_ratios.push_back(0);
    else if (t == kCsa)
      hp.compress_ratios.push_back(rate_csa);
    else if (t == kHca)
      hp.compress_ratios.push_back(rate_hca);
    else
      return InvalidArgument("config.json: layer_types[{}] = '{}' is not a DeepSeek V4 type", i, t);
  }
  hp.swiglu_clamp.assign(n, static_cast<float>(swiglu));

  // MLP schedule: hash-routed layers must be a prefix (a DS4 GGUF stores a count).
  std::vector<std::string> mlp;
  if (f.Has("mlp_layer_types")) {
    FLASHKV_ASSIGN_OR_RETURN(mlp, StringList(j["mlp_layer_types"], "mlp_layer_types"));
    if (mlp.size() < n)
      return InvalidArgument("config.json: {} mlp_layer_types for {} layers", mlp.size(), n);
  } else {
    FLASHKV_ASSIGN_OR_RETURN(uint32_t nh, f.U32("num_hash_layers", 3));
    for (uint32_t i = 0; i < n; ++i) mlp.push_back(i < nh ? "hash_moe" : "moe");
  }
  hp.n_hash_layer = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (mlp[i] == "hash_moe") {
      if (hp.n_hash_layer != i)
        return Unsupported(
            "config.json: layer {} is hash-routed after a top-k layer; DS4 needs "
            "hash layers first",
            i);
      ++hp.n_hash_layer;
    } else if (mlp[i] != "moe") {
      return InvalidArgument("config.json: mlp_layer_types[{}] = '{}' is not hash_moe or moe", i,
                             mlp[i]);
    }
  }

  FLASHKV_RETURN_IF_ERROR(ParseRope(j, f, cfg));
  FLASHKV_RETURN_IF_ERROR(hp.Validate().WithContext("config.json"));
  return cfg;
}

}  // namespace

Expected<HfModelConfig> ParseHfConfig(std::string_view json_text) {
  json j = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("config.json does not parse as JSON");
  try {
    return ParseJson(j);
  } catch (const std::exception& e) {  // a json type misuse missed above
    return InvalidArgument("config.json: {}", e.what());
  }
}

Expected<HfModelConfig> LoadHfConfig(const std::string& path) {
  std::filesystem::path p(path);
  std::error_code ec;
  if (std::filesystem::is_directory(p, ec)) p /= "config.json";
  std::ifstream in(p, std::ios::binary);
  if (!in) return IoError("cannot open {}", p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  auto cfg = ParseHfConfig(ss.str());
  if (!cfg.ok()) return cfg.status().WithContext(p.string());
  return cfg;
}

}  // namespace flashkv
