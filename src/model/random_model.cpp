// Random-weight models: the two shapes, the weight generator (one slot of ModelWeights at
// a time, in a fixed order so the seeds and therefore the bytes are fixed for a shape) and
// the `random:` source syntax.
#include "model/random_model.h"

#include <charconv>
#include <cmath>
#include <random>

#include <fmt/format.h>

namespace flashkv {
namespace {

constexpr std::string_view kPrefix = "random:";
// Bump when the generator changes what a shape's weights are (it is in the fingerprint,
// so snapshots of an older generator are not resumed).
constexpr int kGeneratorVersion = 1;

struct ShapeInfo {
  std::string_view name;
  int layers;
  std::string_view title;
};
constexpr ShapeInfo kShapes[] = {
    {"flash", 43, "DeepSeek-V4-Flash shape"},
    {"tiny", 6, "flashkv-tiny shape"},
};

const ShapeInfo* FindShape(std::string_view name) {
  for (const ShapeInfo& s : kShapes) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// Constants every DeepSeek V4 shape shares.
ModelConfig CommonConfig() {
  ModelConfig c;
  c.n_vocab = 129280;
  c.n_head_kv = 1;
  c.n_rot = 64;
  c.n_expert_shared = 1;
  c.n_hash_layer = 3;
  c.indexer_head_dim = 128;
  c.n_hc = 4;
  c.hc_sinkhorn_iters = 20;
  c.context_length = 1048576;
  c.rope_freq_base = 10000;
  c.compress_rope_freq_base = 160000;
  c.rope_scaling_factor = 16;
  c.rope_orig_ctx = 65536;
  c.yarn_beta_fast = 32;
  c.yarn_beta_slow = 1;
  c.rms_eps = 1e-6f;
  c.hc_eps = 1e-6f;
  c.expert_weights_scale = 1.5f;
  return c;
}

ModelConfig FlashConfig(int n_layer) {
  ModelConfig c = CommonConfig();
  c.n_embd = 4096;
  c.n_head = 64;
  c.head_dim = 512;
  c.q_lora_rank = 1024;
  c.o_lora_rank = 1024;
  c.n_out_group = 8;
  c.n_expert = 256;
  c.n_expert_used = 6;
  c.n_ff_exp = 2048;
  c.n_swa = 128;
  c.indexer_heads = 64;
  c.indexer_top_k = 512;
  for (int l = 0; l < n_layer; ++l) {
    c.compress_ratios.push_back(l < 2 ? 0 : (l % 2 == 0 ? 4 : 128));
  }
  return c;
}

// `flashkv make-tiny --preset tiny` (convert/tiny_model.cpp), which the KV figures of the
// bench tests are derived from.
ModelConfig TinyConfig(int n_layer) {
  ModelConfig c = CommonConfig();
  c.n_embd = 256;
  c.n_head = 4;
  c.head_dim = 192;
  c.q_lora_rank = 128;
  c.o_lora_rank = 64;
  c.n_out_group = 2;
  c.n_expert = 8;
  c.n_expert_used = 2;
  c.n_ff_exp = 256;
  c.n_swa = 32;
  c.indexer_heads = 8;
  c.indexer_top_k = 8;
  const int ratios[] = {0, 0, 4, 16, 4, 16};
  c.compress_ratios.assign(ratios, ratios + n_layer);
  return c;
}

// Builds every weight slot on the backend and counts bytes.
class WeightMaker {
 public:
  explicit WeightMaker(Backend& be, RandomWeights& out) : be_(be), out_(out) {}

  // A generated tensor of which one decoded token reads `rows_per_token` rows.
  Expected<Weight> Random(const std::string& name, DType t, std::array<uint64_t, 3> ne, float scale,
                          uint64_t rows_per_token) {
    if (ne[0] % GetDTypeInfo(t).block_size != 0) t = DType::kF16;  // as the GGUF layout does
    auto w = be_.RandomWeight(name, t, ne, seed_++ * 0x9e3779b9ull, scale);
    if (w.ok()) {
      out_.total_bytes += w->row_bytes * ne[1] * ne[2];
      out_.bytes_per_token += w->row_bytes * rows_per_token;
    }
    return w;
  }
  // A dense [in, out] matrix read whole by every token, values of order in^-1/2.
  Expected<Weight> Dense(const std::string& name, DType t, uint64_t in, uint64_t out) {
    return Random(name, t, {in, out, 1}, 1.0f / std::sqrt(float(in)), out);
  }
  Expected<Weight> Vector(const std::string& name, const std::vector<float>& v) {
    FLASHKV_ASSIGN_OR_RETURN(
        Weight w, Place(name, DType::kF32, {v.size(), 1, 1}, v.data(), v.size() * sizeof(float)));
    out_.bytes_per_token += v.size() * sizeof(float);
    return w;
  }
  // [k, n / k] I32.
  Expected<Weight> Table(const std::string& name, const std::vector<int32_t>& v, uint64_t k) {
    return Place(name, DType::kI32, {k, v.size() / k, 1}, v.data(), v.size() * sizeof(int32_t));
  }

 private:
  Expected<Weight> Place(const std::string& name, DType t, std::array<uint64_t, 3> ne,
                         const void* host, size_t bytes) {
    auto buf = be_.Alloc(bytes);
    if (!buf.ok()) return buf.status().WithContext(name);
    Status s = be_.Write(buf->as<void>(), host, bytes);
    if (!s.ok()) return s.WithContext(name);
    Weight w;
    w.name = name;
    w.type = t;
    w.ne = ne;
    w.row_bytes = bytes / (ne[1] * ne[2]);
    w.data = buf->as<const uint8_t>();
    out_.storage.push_back(std::move(*buf));
    out_.total_bytes += bytes;
    return w;
  }

  Backend& be_;
  RandomWeights& out_;
  uint64_t seed_ = 1;
};

std::vector<float> Constant(size_t n, float v) {
  return std::vector<float>(n, v);
}
std::vector<float> Uniform(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

Status MakeLayer(const ModelConfig& c, int l, WeightMaker& m, LayerWeights& L) {
  const uint64_t D = c.n_embd, V = c.n_vocab, hc = c.hc_dim(), mix = c.hc_mix_dim();
  const std::string p = "blk." + std::to_string(l) + ".";
  const int ratio = c.compress_ratio(l);
  FLASHKV_ASSIGN_OR_RETURN(L.hc_attn_fn, m.Dense(p + "hc_attn_fn", DType::kF16, hc, mix));
  FLASHKV_ASSIGN_OR_RETURN(L.hc_attn_scale, m.Vector(p + "hc_attn_scale", {1.0f, 1.0f, 1.0f}));
  FLASHKV_ASSIGN_OR_RETURN(L.hc_attn_base,
                           m.Vector(p + "hc_attn_base", Uniform(mix, -0.1f, 0.1f, l)));
  FLASHKV_ASSIGN_OR_RETURN(L.hc_ffn_fn, m.Dense(p + "hc_ffn_fn", DType::kF16, hc, mix));
  FLASHKV_ASSIGN_OR_RETURN(L.hc_ffn_scale, m.Vector(p + "hc_ffn_scale", {1.0f, 1.0f, 1.0f}));
  FLASHKV_ASSIGN_OR_RETURN(L.hc_ffn_base,
                           m.Vector(p + "hc_ffn_base", Uniform(mix, -0.1f, 0.1f, 100 + l)));
  FLASHKV_ASSIGN_OR_RETURN(L.attn_norm, m.Vector(p + "attn_norm", Constant(D, 1.0f)));
  FLASHKV_ASSIGN_OR_RETURN(L.attn_q_a, m.Dense(p + "attn_q_a", DType::kQ8_0, D, c.q_lora_rank));
  FLASHKV_ASSIGN_OR_RETURN(L.attn_q_a_norm,
                           m.Vector(p + "attn_q_a_norm", Constant(c.q_lora_rank, 1.0f)));
  FLASHKV_ASSIGN_OR_RETURN(L.attn_q_b,
                           m.Dense(p + "attn_q_b", DType::kQ8_0, c.q_lora_rank, c.q_dim()));
  FLASHKV_ASSIGN_OR_RETURN(L.attn_kv, m.Dense(p + "attn_kv", DType::kQ8_0, D, c.head_dim));
  FLASHKV_ASSIGN_OR_RETURN(L.attn_kv_norm,
                           m.Vector(p + "attn_kv_norm", Constant(c.head_dim, 1.0f)));
  FLASHKV_ASSIGN_OR_RETURN(L.attn_sinks,
                           m.Vector(p + "attn_sinks", Uniform(c.n_head, -1, 1, 200 + l)));
  FLASHKV_ASSIGN_OR_RETURN(L.attn_output_a,
                           m.Dense(p + "attn_output_a", DType::kQ8_0, c.group_in_dim(),
                                   uint64_t(c.n_out_group) * c.o_lora_rank));
  FLASHKV_ASSIGN_OR_RETURN(L.attn_output_b, m.Dense(p + "attn_output_b", DType::kQ8_0,
                                                    uint64_t(c.n_out_group) * c.o_lora_rank, D));
  if (ratio != 0) {
    const uint64_t width = c.compress_width(l);
    FLASHKV_ASSIGN_OR_RETURN(L.compressor_ape, m.Random(p + "compressor_ape", DType::kF16,
                                                        {width, uint64_t(ratio), 1}, 0.5f, 0));
    FLASHKV_ASSIGN_OR_RETURN(L.compressor_kv, m.Dense(p + "compressor_kv", DType::kF16, D, width));
    FLASHKV_ASSIGN_OR_RETURN(L.compressor_gate,
                             m.Dense(p + "compressor_gate", DType::kF16, D, width));
    FLASHKV_ASSIGN_OR_RETURN(L.compressor_norm,
                             m.Vector(p + "compressor_norm", Constant(c.head_dim, 1.0f)));
  }
  if (c.has_indexer(l)) {
    const uint64_t iw = c.indexer_compress_width();
    FLASHKV_ASSIGN_OR_RETURN(
        L.indexer_q_b, m.Dense(p + "indexer_q_b", DType::kF16, c.q_lora_rank, c.indexer_q_dim()));
    FLASHKV_ASSIGN_OR_RETURN(L.indexer_proj,
                             m.Dense(p + "indexer_proj", DType::kF16, D, c.indexer_heads));
    FLASHKV_ASSIGN_OR_RETURN(L.indexer_compressor_ape, m.Random(p + "indexer_ape", DType::kF16,
                                                                {iw, uint64_t(ratio), 1}, 0.5f, 0));
    FLASHKV_ASSIGN_OR_RETURN(L.indexer_compressor_kv,
                             m.Dense(p + "indexer_kv", DType::kF16, D, iw));
    FLASHKV_ASSIGN_OR_RETURN(L.indexer_compressor_gate,
                             m.Dense(p + "indexer_gate", DType::kF16, D, iw));
    FLASHKV_ASSIGN_OR_RETURN(L.indexer_compressor_norm,
                             m.Vector(p + "indexer_norm", Constant(c.indexer_head_dim, 1.0f)));
  }
  FLASHKV_ASSIGN_OR_RETURN(L.ffn_norm, m.Vector(p + "ffn_norm", Constant(D, 1.0f)));
  FLASHKV_ASSIGN_OR_RETURN(L.ffn_gate_inp, m.Dense(p + "ffn_gate_inp", DType::kF16, D, c.n_expert));
  if (c.is_hash_layer(l)) {
    std::vector<int32_t> table(size_t(V) * c.n_expert_used);
    std::mt19937 rng(300 + l);
    for (auto& e : table) e = int32_t(rng() % uint32_t(c.n_expert));
    FLASHKV_ASSIGN_OR_RETURN(L.ffn_gate_tid2eid, m.Table(p + "tid2eid", table, c.n_expert_used));
  } else {
    FLASHKV_ASSIGN_OR_RETURN(
        L.ffn_exp_probs_b, m.Vector(p + "exp_probs_b", Uniform(c.n_expert, -0.1f, 0.1f, 400 + l)));
  }
  const uint64_t F = c.n_ff_exp, E = c.n_expert, k = c.n_expert_used;
  const float s_in = 1.0f / std::sqrt(float(D)), s_mid = 1.0f / std::sqrt(float(F));
  FLASHKV_ASSIGN_OR_RETURN(L.ffn_gate_exps,
                           m.Random(p + "ffn_gate_exps", DType::kIQ2_XXS, {D, F, E}, s_in, F * k));
  FLASHKV_ASSIGN_OR_RETURN(L.ffn_up_exps,
                           m.Random(p + "ffn_up_exps", DType::kIQ2_XXS, {D, F, E}, s_in, F * k));
  FLASHKV_ASSIGN_OR_RETURN(L.ffn_down_exps,
                           m.Random(p + "ffn_down_exps", DType::kQ2_K, {F, D, E}, s_mid, D * k));
  FLASHKV_ASSIGN_OR_RETURN(L.ffn_gate_shexp, m.Dense(p + "ffn_gate_shexp", DType::kQ8_0, D, F));
  FLASHKV_ASSIGN_OR_RETURN(L.ffn_up_shexp, m.Dense(p + "ffn_up_shexp", DType::kQ8_0, D, F));
  FLASHKV_ASSIGN_OR_RETURN(L.ffn_down_shexp, m.Dense(p + "ffn_down_shexp", DType::kQ8_0, F, D));
  return Status::Ok();
}

}  // namespace

std::string RandomModelSpec::Source() const {
  return reduced() ? fmt::format("random:{}:{}", shape, n_layer) : fmt::format("random:{}", shape);
}

std::string RandomModelSpec::Describe() const {
  const ShapeInfo* info = FindShape(shape);
  return fmt::format("{} ({}, {} of {} layers, random weights)", Source(),
                     info ? info->title : shape, n_layer, full_layers);
}

bool IsRandomModelSource(std::string_view source) {
  return source.substr(0, kPrefix.size()) == kPrefix;
}

Expected<RandomModelSpec> ParseRandomModelSource(std::string_view source) {
  if (!IsRandomModelSource(source)) {
    return InvalidArgument("'{}' is not a random model source (random:SHAPE[:LAYERS])", source);
  }
  std::string_view rest = source.substr(kPrefix.size());
  std::string_view layers;
  if (const size_t colon = rest.find(':'); colon != std::string_view::npos) {
    layers = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
  }
  const ShapeInfo* info = FindShape(rest);
  if (info == nullptr) {
    return InvalidArgument("'{}': unknown random model shape '{}' (expected flash or tiny)", source,
                           rest);
  }
  RandomModelSpec spec;
  spec.shape = std::string(info->name);
  spec.full_layers = info->layers;
  spec.n_layer = info->layers;
  if (!layers.empty() || source.back() == ':') {
    int n = 0;
    const auto [end, ec] = std::from_chars(layers.data(), layers.data() + layers.size(), n);
    if (ec != std::errc() || end != layers.data() + layers.size() || n < 1 || n > info->layers) {
      return InvalidArgument("'{}': the layer count must be 1..{} for shape {}", source,
                             info->layers, info->name);
    }
    spec.n_layer = n;
  }
  return spec;
}

ModelConfig RandomModelConfig(const RandomModelSpec& spec) {
  ModelConfig c = spec.shape == "flash" ? FlashConfig(spec.n_layer) : TinyConfig(spec.n_layer);
  c.name = spec.Describe();
  c.n_layer = spec.n_layer;
  c.n_hash_layer = std::min(c.n_hash_layer, c.n_layer);
  c.swiglu_clamp.assign(size_t(c.n_layer), 10.0f);
  return c;
}

Expected<RandomWeights> MakeRandomWeights(const ModelConfig& c, Backend& backend) {
  RandomWeights out;
  WeightMaker m(backend, out);
  ModelWeights& w = out.weights;
  const uint64_t D = c.n_embd, V = c.n_vocab, hc = c.hc_dim();
  // The embedding: one row per token.
  FLASHKV_ASSIGN_OR_RETURN(w.token_embd, m.Random("token_embd", DType::kF16, {D, V, 1}, 1.0f, 1));
  FLASHKV_ASSIGN_OR_RETURN(w.output_hc_fn,
                           m.Dense("output_hc_fn", DType::kF16, hc, uint64_t(c.n_hc)));
  FLASHKV_ASSIGN_OR_RETURN(w.output_hc_scale, m.Vector("output_hc_scale", {1.0f}));
  FLASHKV_ASSIGN_OR_RETURN(w.output_hc_base, m.Vector("output_hc_base", Constant(c.n_hc, 0.0f)));
  FLASHKV_ASSIGN_OR_RETURN(w.output_norm, m.Vector("output_norm", Constant(D, 1.0f)));
  FLASHKV_ASSIGN_OR_RETURN(w.output, m.Dense("output", DType::kQ8_0, D, V));
  w.layers.resize(size_t(c.n_layer));
  for (int l = 0; l < c.n_layer; ++l) FLASHKV_RETURN_IF_ERROR(MakeLayer(c, l, m, w.layers[l]));
  FLASHKV_RETURN_IF_ERROR(backend.Synchronize());
  return out;
}

Sha1Digest RandomModelFingerprint(const RandomModelSpec& spec) {
  return Sha1Of(
      fmt::format("flashkv random model {} generator {}", spec.Source(), kGeneratorVersion));
}

Expected<std::unique_ptr<Model>> MakeRandomModel(const RandomModelSpec& spec, Backend& backend,
                                                 const ModelOptions* options,
                                                 RandomWeights* weights_info) {
  ModelConfig config = RandomModelConfig(spec);
  FLASHKV_RETURN_IF_ERROR(config.Validate());
  auto weights = MakeRandomWeights(config, backend);
  if (!weights.ok()) return weights.status().WithContext(spec.Source());
  if (weights_info != nullptr) {
    weights_info->total_bytes = weights->total_bytes;
    weights_info->bytes_per_token = weights->bytes_per_token;
  }
  return Model::FromWeights(spec.Source(), std::move(config), std::move(weights->weights),
                            std::move(weights->storage), backend, options);
}

}  // namespace flashkv
