#include "model/model_weights.h"

#include <array>
#include <initializer_list>
#include <set>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tensor/dtype.h"
#include "tensor/quant.h"

namespace flashkv {
namespace {

// Which element types a slot accepts.
enum class Kind {
  kMatrix,  // any type flashkv can dequantize/dot (F32, F16, BF16, Q8_0, K-quants, IQ, MXFP4)
  kVector,  // F32 only: norms, sinks, HC scale/base, biases
  kSmall,   // elementwise-read tensors (compressor ape): F16 / F32, other types dequantized to F32
  kIndex,   // I32 (tid2eid)
};

bool TypeAllowed(Kind kind, DType t) {
  switch (kind) {
    case Kind::kMatrix:
      return GetDTypeInfo(t).computable && t != DType::kQ8_K;
    case Kind::kVector:
      return t == DType::kF32;
    case Kind::kSmall:
      return GetDTypeInfo(t).computable && t != DType::kQ8_K;
    case Kind::kIndex:
      return t == DType::kI32;
  }
  return false;
}

const char* KindTypes(Kind kind) {
  switch (kind) {
    case Kind::kMatrix:
      return "f32, f16, bf16, q8_0, a K-quant, an IQ type or mxfp4 (docs/GGUF.md)";
    case Kind::kVector:
      return "f32";
    case Kind::kSmall:
      return "f32, f16 or a matrix type (dequantized to f32)";
    case Kind::kIndex:
      return "i32";
  }
  return "?";
}

// One row of a binding table.
struct Binding {
  std::string name;            // full GGUF tensor name
  Weight* slot;                // where the placed weight goes
  std::array<uint64_t, 3> ne;  // expected shape, unused trailing dims = 1
  int n_dims;                  // expected rank
  Kind kind;
  bool required;
  bool place = true;  // false: checked and described, not placed (no data)
};

std::string ShapeString(const std::array<uint64_t, 3>& ne, int n_dims) {
  std::string s = "[";
  for (int i = 0; i < n_dims; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

std::string ShapeString(const std::vector<uint64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

class Binder {
 public:
  Binder(const GgufFile& file, Backend& backend, std::vector<std::vector<float>>* converted,
         const LoadProgressFn& progress)
      : file_(file), backend_(backend), converted_(converted), progress_(progress) {
    if (progress_) {
      for (const auto& t : file_.tensors()) total_bytes_ += t.nbytes;
    }
  }

  Status Bind(const Binding& b) {
    const GgufTensorInfo* t = file_.FindTensor(b.name);
    if (t == nullptr) {
      if (!b.required) return Status::Ok();
      return NotFound("tensor {} is missing (expected shape {}, type {})", b.name,
                      ShapeString(b.ne, b.n_dims), KindTypes(b.kind));
    }
    used_.insert(b.name);
    // Trailing dims of size 1 are equivalent to a lower rank.
    size_t rank = t->ne.size();
    while (rank > 1 && t->ne[rank - 1] == 1) --rank;
    bool match = rank <= static_cast<size_t>(b.n_dims);
    for (int i = 0; match && i < b.n_dims; ++i) {
      const uint64_t got = i < static_cast<int>(t->ne.size()) ? t->ne[i] : 1;
      match = got == b.ne[i];
    }
    if (!match) {
      return InvalidArgument("tensor {} has shape {}, expected {}", b.name, ShapeString(t->ne),
                             ShapeString(b.ne, b.n_dims));
    }
    if (!TypeAllowed(b.kind, t->type)) {
      return Unsupported("tensor {} has type {}, expected {}", b.name, GetDTypeInfo(t->type).name,
                         KindTypes(b.kind));
    }
    if (!b.place) {
      FLASHKV_ASSIGN_OR_RETURN(const uint64_t row_bytes, RowBytes(t->type, b.ne[0]));
      *b.slot = Weight{b.name, t->type, b.ne, row_bytes, {}, {}};
      return Status::Ok();
    }
    WeightSource src{b.name, t->type, b.ne, t->data, t->nbytes};
    if (b.kind == Kind::kSmall && t->type != DType::kF32 && t->type != DType::kF16) {
      // The elementwise kernels read F16 / F32; a block type (llama.cpp's quantizer does not
      // exclude the apes) becomes its DequantizeRow values, exact in F32.
      const uint64_t n = b.ne[0] * b.ne[1] * b.ne[2];
      std::vector<float>& f = converted_->emplace_back(n);
      const Status st = DequantizeRow(t->type, t->data, f.data(), static_cast<int64_t>(n));
      if (!st.ok()) return st.WithContext("tensor " + b.name);
      src = WeightSource{b.name, DType::kF32, b.ne, reinterpret_cast<const uint8_t*>(f.data()),
                         n * sizeof(float)};
    }
    auto placed = backend_.PlaceWeight(src);
    if (!placed.ok()) return placed.status().WithContext("tensor " + b.name);
    *b.slot = std::move(*placed);
    placed_bytes_ += t->nbytes;
    if (progress_) progress_(placed_bytes_, total_bytes_);
    return Status::Ok();
  }

  Status BindAll(const std::vector<Binding>& table) {
    for (const auto& b : table) FLASHKV_RETURN_IF_ERROR(Bind(b));
    return Status::Ok();
  }

  void LogUnused() const {
    for (const auto& t : file_.tensors()) {
      if (!used_.count(t.name)) spdlog::debug("ignoring tensor {} (not used by the model)", t.name);
    }
  }

 private:
  const GgufFile& file_;
  Backend& backend_;
  std::vector<std::vector<float>>* converted_;
  const LoadProgressFn& progress_;
  uint64_t total_bytes_ = 0;
  uint64_t placed_bytes_ = 0;
  std::set<std::string> used_;
};

using U = uint64_t;

std::vector<Binding> GlobalTable(const ModelConfig& c, ModelWeights& w) {
  return {
      {"token_embd.weight", &w.token_embd, {U(c.n_embd), U(c.n_vocab), 1}, 2, Kind::kMatrix, true},
      {"output_hc_fn.weight",
       &w.output_hc_fn,
       {U(c.hc_dim()), U(c.n_hc), 1},
       2,
       Kind::kMatrix,
       true},
      {"output_hc_scale.weight", &w.output_hc_scale, {1, 1, 1}, 1, Kind::kVector, true},
      {"output_hc_base.weight", &w.output_hc_base, {U(c.n_hc), 1, 1}, 1, Kind::kVector, true},
      {"output_norm.weight", &w.output_norm, {U(c.n_embd), 1, 1}, 1, Kind::kVector, true},
      {"output.weight", &w.output, {U(c.n_embd), U(c.n_vocab), 1}, 2, Kind::kMatrix, true},
  };
}

std::string Blk(int layer, const char* suffix) {
  return fmt::format("blk.{}.{}", layer, suffix);
}

// Hyper-connections and sublayer norms: every layer.
std::vector<Binding> HcTable(const ModelConfig& c, int l, LayerWeights& w) {
  const U hc = c.hc_dim(), mix = c.hc_mix_dim();
  return {
      {Blk(l, "hc_attn_fn.weight"), &w.hc_attn_fn, {hc, mix, 1}, 2, Kind::kMatrix, true},
      {Blk(l, "hc_attn_scale.weight"), &w.hc_attn_scale, {3, 1, 1}, 1, Kind::kVector, true},
      {Blk(l, "hc_attn_base.weight"), &w.hc_attn_base, {mix, 1, 1}, 1, Kind::kVector, true},
      {Blk(l, "hc_ffn_fn.weight"), &w.hc_ffn_fn, {hc, mix, 1}, 2, Kind::kMatrix, true},
      {Blk(l, "hc_ffn_scale.weight"), &w.hc_ffn_scale, {3, 1, 1}, 1, Kind::kVector, true},
      {Blk(l, "hc_ffn_base.weight"), &w.hc_ffn_base, {mix, 1, 1}, 1, Kind::kVector, true},
      {Blk(l, "attn_norm.weight"), &w.attn_norm, {U(c.n_embd), 1, 1}, 1, Kind::kVector, true},
      {Blk(l, "ffn_norm.weight"), &w.ffn_norm, {U(c.n_embd), 1, 1}, 1, Kind::kVector, true},
  };
}

// Attention projections: every layer.
std::vector<Binding> AttentionTable(const ModelConfig& c, int l, LayerWeights& w) {
  const U d = c.n_embd, r_q = c.q_lora_rank, hd = c.head_dim;
  const U low = U(c.n_out_group) * c.o_lora_rank;
  return {
      {Blk(l, "attn_q_a.weight"), &w.attn_q_a, {d, r_q, 1}, 2, Kind::kMatrix, true},
      {Blk(l, "attn_q_a_norm.weight"), &w.attn_q_a_norm, {r_q, 1, 1}, 1, Kind::kVector, true},
      {Blk(l, "attn_q_b.weight"), &w.attn_q_b, {r_q, U(c.q_dim()), 1}, 2, Kind::kMatrix, true},
      {Blk(l, "attn_kv.weight"), &w.attn_kv, {d, hd, 1}, 2, Kind::kMatrix, true},
      {Blk(l, "attn_kv_a_norm.weight"), &w.attn_kv_norm, {hd, 1, 1}, 1, Kind::kVector, true},
      {Blk(l, "attn_sinks.weight"), &w.attn_sinks, {U(c.n_head), 1, 1}, 1, Kind::kVector, true},
      {Blk(l, "attn_output_a.weight"),
       &w.attn_output_a,
       {U(c.group_in_dim()), low, 1},
       2,
       Kind::kMatrix,
       true},
      {Blk(l, "attn_output_b.weight"), &w.attn_output_b, {low, d, 1}, 2, Kind::kMatrix, true},
  };
}

// Main compressor: layers with ratio != 0.
std::vector<Binding> CompressorTable(const ModelConfig& c, int l, LayerWeights& w) {
  const U width = c.compress_width(l), m = c.compress_ratio(l);
  return {
      {Blk(l, "attn_compressor_ape.weight"),
       &w.compressor_ape,
       {width, m, 1},
       2,
       Kind::kSmall,
       true},
      {Blk(l, "attn_compressor_kv.weight"),
       &w.compressor_kv,
       {U(c.n_embd), width, 1},
       2,
       Kind::kMatrix,
       true},
      {Blk(l, "attn_compressor_gate.weight"),
       &w.compressor_gate,
       {U(c.n_embd), width, 1},
       2,
       Kind::kMatrix,
       true},
      {Blk(l, "attn_compressor_norm.weight"),
       &w.compressor_norm,
       {U(c.head_dim), 1, 1},
       1,
       Kind::kVector,
       true},
  };
}

// Lightning indexer and its compressor: ratio-4 layers.
std::vector<Binding> IndexerTable(const ModelConfig& c, int l, LayerWeights& w) {
  const U width = c.indexer_compress_width(), m = c.compress_ratio(l);
  return {
      {Blk(l, "indexer.attn_q_b.weight"),
       &w.indexer_q_b,
       {U(c.q_lora_rank), U(c.indexer_q_dim()), 1},
       2,
       Kind::kMatrix,
       true},
      {Blk(l, "indexer.proj.weight"),
       &w.indexer_proj,
       {U(c.n_embd), U(c.indexer_heads), 1},
       2,
       Kind::kMatrix,
       true},
      {Blk(l, "indexer_compressor_ape.weight"),
       &w.indexer_compressor_ape,
       {width, m, 1},
       2,
       Kind::kSmall,
       true},
      {Blk(l, "indexer_compressor_kv.weight"),
       &w.indexer_compressor_kv,
       {U(c.n_embd), width, 1},
       2,
       Kind::kMatrix,
       true},
      {Blk(l, "indexer_compressor_gate.weight"),
       &w.indexer_compressor_gate,
       {U(c.n_embd), width, 1},
       2,
       Kind::kMatrix,
       true},
      {Blk(l, "indexer_compressor_norm.weight"),
       &w.indexer_compressor_norm,
       {U(c.indexer_head_dim), 1, 1},
       1,
       Kind::kVector,
       true},
  };
}

// Routed and shared experts: every layer.
std::vector<Binding> MoeTable(const ModelConfig& c, int l, LayerWeights& w) {
  const U d = c.n_embd, f = c.n_ff_exp, e = c.n_expert;
  return {
      {Blk(l, "ffn_gate_inp.weight"), &w.ffn_gate_inp, {d, e, 1}, 2, Kind::kMatrix, true},
      {Blk(l, "ffn_gate_exps.weight"), &w.ffn_gate_exps, {d, f, e}, 3, Kind::kMatrix, true},
      {Blk(l, "ffn_up_exps.weight"), &w.ffn_up_exps, {d, f, e}, 3, Kind::kMatrix, true},
      {Blk(l, "ffn_down_exps.weight"), &w.ffn_down_exps, {f, d, e}, 3, Kind::kMatrix, true},
      {Blk(l, "ffn_gate_shexp.weight"), &w.ffn_gate_shexp, {d, f, 1}, 2, Kind::kMatrix, true},
      {Blk(l, "ffn_up_shexp.weight"), &w.ffn_up_shexp, {d, f, 1}, 2, Kind::kMatrix, true},
      {Blk(l, "ffn_down_shexp.weight"), &w.ffn_down_shexp, {f, d, 1}, 2, Kind::kMatrix, true},
  };
}

// The MoE table with the routed-expert stacks only described when `place` is false.
std::vector<Binding> MoeTable(const ModelConfig& c, int l, LayerWeights& w, bool place) {
  std::vector<Binding> t = MoeTable(c, l, w);
  for (Binding& b : t) {
    if (b.slot == &w.ffn_gate_exps || b.slot == &w.ffn_up_exps || b.slot == &w.ffn_down_exps) {
      b.place = place;
    }
  }
  return t;
}

// Hash routing table: the first hash_layer_count layers.
std::vector<Binding> HashRouterTable(const ModelConfig& c, int l, LayerWeights& w) {
  return {{Blk(l, "ffn_gate_tid2eid.weight"),
           &w.ffn_gate_tid2eid,
           {U(c.n_expert_used), U(c.n_vocab), 1},
           2,
           Kind::kIndex,
           true}};
}

// Selection bias: top-k layers, optional (absent means zero bias).
std::vector<Binding> BiasRouterTable(const ModelConfig& c, int l, LayerWeights& w) {
  return {{Blk(l, "exp_probs_b.bias"),
           &w.ffn_exp_probs_b,
           {U(c.n_expert), 1, 1},
           1,
           Kind::kVector,
           false}};
}

// Every expert id in a hash table must name an expert; checked on the host bytes once.
Status CheckHashTable(const GgufFile& file, const ModelConfig& c, int layer) {
  const std::string name = Blk(layer, "ffn_gate_tid2eid.weight");
  const GgufTensorInfo* t = file.FindTensor(name);
  const auto* ids = reinterpret_cast<const int32_t*>(t->data);
  const uint64_t n = uint64_t(c.n_expert_used) * c.n_vocab;
  for (uint64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= c.n_expert) {
      return InvalidArgument("tensor {}: entry for token {} slot {} is expert {}, outside 0..{}",
                             name, i / c.n_expert_used, i % c.n_expert_used, ids[i],
                             c.n_expert - 1);
    }
  }
  return Status::Ok();
}

}  // namespace

Expected<ModelWeights> BindModelWeights(const GgufFile& file, const ModelConfig& c,
                                        Backend& backend, bool place_routed_experts,
                                        const LoadProgressFn& progress) {
  ModelWeights w;
  w.layers.resize(c.n_layer);
  Binder binder(file, backend, &w.converted, progress);
  FLASHKV_RETURN_IF_ERROR(binder.BindAll(GlobalTable(c, w)));
  for (int l = 0; l < c.n_layer; ++l) {
    LayerWeights& lw = w.layers[l];
    FLASHKV_RETURN_IF_ERROR(binder.BindAll(HcTable(c, l, lw)));
    FLASHKV_RETURN_IF_ERROR(binder.BindAll(AttentionTable(c, l, lw)));
    if (c.is_compressed(l)) FLASHKV_RETURN_IF_ERROR(binder.BindAll(CompressorTable(c, l, lw)));
    if (c.has_indexer(l)) FLASHKV_RETURN_IF_ERROR(binder.BindAll(IndexerTable(c, l, lw)));
    FLASHKV_RETURN_IF_ERROR(binder.BindAll(MoeTable(c, l, lw, place_routed_experts)));
    if (c.is_hash_layer(l)) {
      FLASHKV_RETURN_IF_ERROR(binder.BindAll(HashRouterTable(c, l, lw)));
      FLASHKV_RETURN_IF_ERROR(CheckHashTable(file, c, l));
    } else {
      FLASHKV_RETURN_IF_ERROR(binder.BindAll(BiasRouterTable(c, l, lw)));
    }
  }
  binder.LogUnused();
  return w;
}

uint64_t PlacedWeightBytes(const ModelConfig& c, const ModelWeights& weights) {
  // The binding tables name every slot once; they are built over a copy because they hand
  // out writable slot pointers.
  ModelWeights w = weights;
  uint64_t total = 0;
  auto add = [&](const std::vector<Binding>& table) {
    for (const Binding& b : table) {
      // Stacks read through a table (the expert cache's) are counted by their owner.
      if (b.slot->data) total += b.slot->matrix_bytes() * b.slot->ne[2];
    }
  };
  add(GlobalTable(c, w));
  for (int l = 0; l < c.n_layer && size_t(l) < w.layers.size(); ++l) {
    LayerWeights& lw = w.layers[size_t(l)];
    add(HcTable(c, l, lw));
    add(AttentionTable(c, l, lw));
    if (c.is_compressed(l)) add(CompressorTable(c, l, lw));
    if (c.has_indexer(l)) add(IndexerTable(c, l, lw));
    add(MoeTable(c, l, lw));
    add(c.is_hash_layer(l) ? HashRouterTable(c, l, lw) : BiasRouterTable(c, l, lw));
  }
  return total;
}

}  // namespace flashkv
