#include "convert/hf_tensor_map.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>

#include "convert/hf_dequant.h"
#include "tensor/quant_blocks.h"

namespace flashkv {
namespace {

struct PartNames {
  const char* part;                   // GGUF name without "blk.N."
  std::vector<const char*> suffixes;  // checkpoint names after the layer prefix
};

// Per-layer names: upstream first, then transformers' in-memory names.
const std::vector<PartNames>& LayerTable() {
  static const std::vector<PartNames> table = {
      {"hc_attn_fn.weight", {"hc_attn_fn", "attn_hc.fn"}},
      {"hc_attn_scale.weight", {"hc_attn_scale", "attn_hc.scale"}},
      {"hc_attn_base.weight", {"hc_attn_base", "attn_hc.base"}},
      {"hc_ffn_fn.weight", {"hc_ffn_fn", "ffn_hc.fn"}},
      {"hc_ffn_scale.weight", {"hc_ffn_scale", "ffn_hc.scale"}},
      {"hc_ffn_base.weight", {"hc_ffn_base", "ffn_hc.base"}},
      {"attn_norm.weight", {"attn_norm.weight", "input_layernorm.weight"}},
      {"attn_q_a.weight", {"attn.wq_a.weight", "self_attn.q_a_proj.weight"}},
      {"attn_q_a_norm.weight", {"attn.q_norm.weight", "self_attn.q_a_norm.weight"}},
      {"attn_q_b.weight", {"attn.wq_b.weight", "self_attn.q_b_proj.weight"}},
      {"attn_kv.weight", {"attn.wkv.weight", "self_attn.kv_proj.weight"}},
      // transformers' save_pretrained writes the KV norm as attn.norm.weight.
      {"attn_kv_a_norm.weight",
       {"attn.kv_norm.weight", "attn.norm.weight", "self_attn.kv_norm.weight"}},
      {"attn_sinks.weight", {"attn.attn_sink", "self_attn.sinks"}},
      {"attn_output_a.weight", {"attn.wo_a.weight", "self_attn.o_a_proj.weight"}},
      {"attn_output_b.weight", {"attn.wo_b.weight", "self_attn.o_b_proj.weight"}},
      {"attn_compressor_ape.weight", {"attn.compressor.ape", "self_attn.compressor.position_bias"}},
      {"attn_compressor_kv.weight",
       {"attn.compressor.wkv.weight", "self_attn.compressor.kv_proj.weight"}},
      {"attn_compressor_gate.weight",
       {"attn.compressor.wgate.weight", "self_attn.compressor.gate_proj.weight"}},
      {"attn_compressor_norm.weight",
       {"attn.compressor.norm.weight", "self_attn.compressor.kv_norm.weight"}},
      {"indexer.attn_q_b.weight",
       {"attn.indexer.wq_b.weight", "self_attn.compressor.indexer.q_b_proj.weight"}},
      {"indexer.proj.weight",
       {"attn.indexer.weights_proj.weight",
        "self_attn.compressor.indexer.scorer.weights_proj.weight",
        "self_attn.compressor.indexer.weights_proj.weight"}},
      {"indexer_compressor_ape.weight",
       {"attn.indexer.compressor.ape", "self_attn.compressor.indexer.position_bias"}},
      {"indexer_compressor_kv.weight",
       {"attn.indexer.compressor.wkv.weight", "self_attn.compressor.indexer.kv_proj.weight"}},
      {"indexer_compressor_gate.weight",
       {"attn.indexer.compressor.wgate.weight", "self_attn.compressor.indexer.gate_proj.weight"}},
      {"indexer_compressor_norm.weight",
       {"attn.indexer.compressor.norm.weight", "self_attn.compressor.indexer.kv_norm.weight"}},
      {"ffn_norm.weight", {"ffn_norm.weight", "post_attention_layernorm.weight"}},
      {"ffn_gate_inp.weight", {"ffn.gate.weight", "mlp.gate.weight"}},
      {"exp_probs_b.bias", {"ffn.gate.bias", "mlp.gate.e_score_correction_bias"}},
      {"ffn_gate_tid2eid.weight", {"ffn.gate.tid2eid", "mlp.gate.tid2eid"}},
      {"ffn_gate_shexp.weight",
       {"ffn.shared_experts.w1.weight", "mlp.shared_experts.gate_proj.weight"}},
      {"ffn_up_shexp.weight",
       {"ffn.shared_experts.w3.weight", "mlp.shared_experts.up_proj.weight"}},
      {"ffn_down_shexp.weight",
       {"ffn.shared_experts.w2.weight", "mlp.shared_experts.down_proj.weight"}},
  };
  return table;
}

// Global tensors: full names, upstream-with-prefix first.
const std::map<std::string, std::vector<const char*>>& GlobalTable() {
  static const std::map<std::string, std::vector<const char*>> table = {
      {"token_embd.weight", {"model.embed_tokens.weight", "embed.weight", "model.embed.weight"}},
      {"output.weight", {"head.weight", "lm_head.weight", "model.head.weight"}},
      {"output_norm.weight", {"model.norm.weight", "norm.weight"}},
      {"output_hc_fn.weight", {"model.hc_head.hc_fn", "hc_head_fn", "model.hc_head_fn"}},
      {"output_hc_base.weight", {"model.hc_head.hc_base", "hc_head_base", "model.hc_head_base"}},
      {"output_hc_scale.weight",
       {"model.hc_head.hc_scale", "hc_head_scale", "model.hc_head_scale"}},
  };
  return table;
}

// Per-expert name patterns ({} = expert index) and fused names, per GGUF expert tensor.
struct ExpertNames {
  const char* part;
  std::vector<const char*> per_expert;
  std::vector<const char*> fused;
  HfTensorSource::Kind fused_kind;
};

const std::vector<ExpertNames>& ExpertTable() {
  static const std::vector<ExpertNames> table = {
      {"ffn_gate_exps.weight",
       {"ffn.experts.{}.w1.weight", "mlp.experts.{}.gate_proj.weight"},
       {"mlp.experts.gate_up_proj", "ffn.experts.gate_up_proj"},
       HfTensorSource::Kind::kFusedGate},
      {"ffn_up_exps.weight",
       {"ffn.experts.{}.w3.weight", "mlp.experts.{}.up_proj.weight"},
       {"mlp.experts.gate_up_proj", "ffn.experts.gate_up_proj"},
       HfTensorSource::Kind::kFusedUp},
      {"ffn_down_exps.weight",
       {"ffn.experts.{}.w2.weight", "mlp.experts.{}.down_proj.weight"},
       {"mlp.experts.down_proj", "ffn.experts.down_proj"},
       HfTensorSource::Kind::kFusedDown},
  };
  return table;
}

std::vector<std::string> LayerPrefixes(int il) {
  return {fmt::format("model.layers.{}.", il), fmt::format("layers.{}.", il)};
}

std::vector<uint64_t> Reversed(const std::vector<uint64_t>& ne) {
  return std::vector<uint64_t>(ne.rbegin(), ne.rend());
}

std::string ShapeText(const std::vector<uint64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

// One checkpoint tensor as f32 in its logical shape, FP8 / FP4 weights dequantized.
Expected<std::vector<float>> LoadF32(const SafetensorsCheckpoint& ck, const std::string& name) {
  FLASHKV_ASSIGN_OR_RETURN(HfWeight w, InspectHfWeight(ck, name));
  return DequantHfWeight(w);
}

Expected<std::vector<uint8_t>> LoadMxfp4(const SafetensorsCheckpoint& ck, const std::string& name) {
  FLASHKV_ASSIGN_OR_RETURN(HfWeight w, InspectHfWeight(ck, name));
  return Fp4ToMxfp4(w);
}

// gate_up_proj [E, 2F, D] holds, per expert, F gate rows then F up rows: the rows of one half,
// `unit` elements (floats or bytes) to a row.
template <typename T>
std::vector<T> SplitFusedGateUp(const std::vector<T>& all, uint64_t unit, uint64_t F, uint64_t E,
                                bool up) {
  std::vector<T> out(unit * F * E);
  const uint64_t skip = up ? F * unit : 0;
  for (uint64_t e = 0; e < E; ++e)
    std::copy_n(all.begin() + static_cast<ptrdiff_t>(e * 2 * F * unit + skip), F * unit,
                out.begin() + static_cast<ptrdiff_t>(e * F * unit));
  return out;
}

}  // namespace

Expected<HfTensorPlan> PlanHfTensors(const std::vector<Ds4TensorSpec>& layout, const Ds4Hparams& hp,
                                     const SafetensorsCheckpoint& ck) {
  HfTensorPlan plan;
  std::vector<std::string> missing, mismatched;
  std::set<std::string> used;

  // Records `name` (and its FP8 / FP4 scale) as read and checks its logical shape; returns
  // whether it is FP4-packed.
  auto use = [&](const std::string& name, const std::vector<uint64_t>& want,
                 const std::string& what) {
    used.insert(name);
    auto w = InspectHfWeight(ck, name);
    if (!w.ok()) {
      mismatched.push_back(fmt::format("{} ({}): {}", name, what, w.status().message()));
      return false;
    }
    if (w->scale) used.insert(w->scale_name);
    if (w->shape != want)
      mismatched.push_back(fmt::format("{} ({}): {} in the checkpoint, expected {}", name, what,
                                       ShapeText(w->shape), ShapeText(want)));
    return w->format == HfWeightFormat::kFp4Packed;
  };
  auto first_present = [&](const std::vector<std::string>& candidates) -> std::string {
    for (const std::string& c : candidates)
      if (ck.Find(c)) return c;
    return "";
  };

  for (const Ds4TensorSpec& spec : layout) {
    HfTensorSource src{HfTensorSource::Kind::kSingle, {}};
    const std::vector<uint64_t> want = Reversed(spec.ne);
    if (spec.layer < 0) {
      std::vector<std::string> cands;
      for (const char* c : GlobalTable().at(spec.name)) cands.emplace_back(c);
      std::string name = first_present(cands);
      if (name.empty()) {
        missing.push_back(fmt::format("{} (tried {})", spec.name, fmt::join(cands, ", ")));
      } else {
        src.fp4 = use(name, want, spec.name);
        src.names = {name};
      }
      plan.sources.push_back(std::move(src));
      continue;
    }
    const std::vector<std::string> prefixes = LayerPrefixes(spec.layer);
    auto expert = std::find_if(ExpertTable().begin(), ExpertTable().end(),
                               [&](const ExpertNames& e) { return spec.part == e.part; });
    if (expert != ExpertTable().end()) {
      const uint64_t E = spec.ne[2];
      // Per-expert tensors first; fall back to the fused form.
      std::vector<std::string> per;
      for (const std::string& prefix : prefixes) {
        for (const char* pattern : expert->per_expert) {
          std::string e0 = prefix + fmt::format(fmt::runtime(pattern), 0);
          if (!ck.Find(e0)) continue;
          for (uint64_t e = 0; e < E; ++e)
            per.push_back(prefix + fmt::format(fmt::runtime(pattern), e));
          break;
        }
        if (!per.empty()) break;
      }
      if (!per.empty()) {
        src.kind = HfTensorSource::Kind::kStackExperts;
        const std::vector<uint64_t> one = {spec.ne[1], spec.ne[0]};
        src.fp4 = true;
        for (const std::string& n : per) {
          if (!ck.Find(n)) {
            missing.push_back(fmt::format("{} (expert tensor for {})", n, spec.name));
            src.fp4 = false;
            continue;
          }
          src.fp4 = use(n, one, spec.name) && src.fp4;
        }
        src.names = std::move(per);
      } else {
        std::vector<std::string> cands;
        for (const std::string& prefix : prefixes)
          for (const char* f : expert->fused) cands.push_back(prefix + f);
        std::string name = first_present(cands);
        if (name.empty()) {
          missing.push_back(fmt::format("{} (tried per-expert {}{} and fused {})", spec.name,
                                        prefixes[0], expert->per_expert[0],
                                        fmt::join(cands, ", ")));
        } else {
          src.kind = expert->fused_kind;
          std::vector<uint64_t> fused_want = want;  // [E, F, D] or [E, D, F]
          if (src.kind != HfTensorSource::Kind::kFusedDown) fused_want[1] *= 2;
          src.fp4 = use(name, fused_want, spec.name);
          src.names = {name};
        }
      }
      plan.sources.push_back(std::move(src));
      continue;
    }
    auto part = std::find_if(LayerTable().begin(), LayerTable().end(),
                             [&](const PartNames& p) { return spec.part == p.part; });
    if (part == LayerTable().end())
      return Internal("no checkpoint names known for GGUF tensor {}", spec.name);
    std::vector<std::string> cands;
    for (const char* s : part->suffixes)
      for (const std::string& prefix : prefixes) cands.push_back(prefix + s);
    std::string name = first_present(cands);
    if (name.empty()) {
      missing.push_back(fmt::format("{} (tried {})", spec.name, fmt::join(cands, ", ")));
    } else {
      if (spec.role == Ds4Role::kTokenExperts) src.kind = HfTensorSource::Kind::kTokenExperts;
      src.fp4 = use(name, want, spec.name);
      src.names = {name};
    }
    plan.sources.push_back(std::move(src));
  }

  // Everything in the checkpoint must be accounted for: read, or a known kind to skip.
  std::vector<std::string> unknown;
  for (const std::string& name : ck.names()) {
    if (used.count(name)) continue;
    bool mtp = name.rfind("mtp.", 0) == 0 || name.rfind("model.mtp.", 0) == 0;
    int layer = -1;
    for (const char* p : {"model.layers.", "layers."}) {
      if (name.rfind(p, 0) == 0) {
        layer = std::atoi(name.c_str() + std::strlen(p));
        break;
      }
    }
    if (layer >= static_cast<int>(hp.n_layer)) mtp = true;  // MTP blocks numbered after the trunk
    bool hash_bias =
        layer >= 0 && layer < static_cast<int>(hp.n_hash_layer) &&
        (name.ends_with("ffn.gate.bias") || name.ends_with("mlp.gate.e_score_correction_bias"));
    if (mtp || hash_bias)
      plan.ignored.push_back(name);
    else
      unknown.push_back(name);
  }

  if (!missing.empty() || !mismatched.empty() || !unknown.empty()) {
    std::string msg;
    if (!missing.empty())
      msg += fmt::format("{} tensors missing: {}", missing.size(), fmt::join(missing, "; "));
    if (!mismatched.empty())
      msg += fmt::format("{}{} shape mismatches: {}", msg.empty() ? "" : "; and ",
                         mismatched.size(), fmt::join(mismatched, "; "));
    if (!unknown.empty())
      msg += fmt::format("{}{} checkpoint tensors map to nothing: {}", msg.empty() ? "" : "; and ",
                         unknown.size(), fmt::join(unknown, ", "));
    return InvalidArgument("{}", msg);
  }
  plan.used.assign(used.begin(), used.end());
  return plan;
}

Expected<std::vector<float>> ReadHfFloat(const HfTensorSource& src, const Ds4TensorSpec& spec,
                                         const SafetensorsCheckpoint& ck) {
  using Kind = HfTensorSource::Kind;
  switch (src.kind) {
    case Kind::kSingle:
    case Kind::kFusedDown:
      return LoadF32(ck, src.names.at(0));
    case Kind::kStackExperts: {
      std::vector<float> out;
      out.reserve(spec.ne[0] * spec.ne[1] * spec.ne[2]);
      for (const std::string& n : src.names) {
        FLASHKV_ASSIGN_OR_RETURN(std::vector<float> e, LoadF32(ck, n));
        out.insert(out.end(), e.begin(), e.end());
      }
      return out;
    }
    case Kind::kFusedGate:
    case Kind::kFusedUp: {
      FLASHKV_ASSIGN_OR_RETURN(std::vector<float> all, LoadF32(ck, src.names.at(0)));
      return SplitFusedGateUp(all, spec.ne[0], spec.ne[1], spec.ne[2], src.kind == Kind::kFusedUp);
    }
    case Kind::kTokenExperts:
      return InvalidArgument("{} is an integer table", spec.name);
  }
  return Internal("unhandled source kind for {}", spec.name);
}

Expected<std::vector<float>> ReadHfExpertFloat(const HfTensorSource& src, uint64_t e,
                                               const SafetensorsCheckpoint& ck) {
  if (src.kind != HfTensorSource::Kind::kStackExperts || e >= src.names.size())
    return Internal("expert {} requested from a source that does not hold it per expert", e);
  return LoadF32(ck, src.names[e]);
}

Expected<std::vector<uint8_t>> ReadHfMxfp4(const HfTensorSource& src, const Ds4TensorSpec& spec,
                                           const SafetensorsCheckpoint& ck) {
  using Kind = HfTensorSource::Kind;
  switch (src.kind) {
    case Kind::kSingle:
    case Kind::kFusedDown:
      return LoadMxfp4(ck, src.names.at(0));
    case Kind::kStackExperts: {
      std::vector<uint8_t> out;
      for (const std::string& n : src.names) {
        FLASHKV_ASSIGN_OR_RETURN(std::vector<uint8_t> e, LoadMxfp4(ck, n));
        out.insert(out.end(), e.begin(), e.end());
      }
      return out;
    }
    case Kind::kFusedGate:
    case Kind::kFusedUp: {
      FLASHKV_ASSIGN_OR_RETURN(std::vector<uint8_t> all, LoadMxfp4(ck, src.names.at(0)));
      const uint64_t row_bytes = spec.ne[0] / kQKMxfp4 * sizeof(BlockMXFP4);
      return SplitFusedGateUp(all, row_bytes, spec.ne[1], spec.ne[2], src.kind == Kind::kFusedUp);
    }
    case Kind::kTokenExperts:
      break;
  }
  return InvalidArgument("{} is an integer table", spec.name);
}

Expected<std::vector<int32_t>> ReadHfTokenExperts(const HfTensorSource& src,
                                                  const Ds4TensorSpec& spec, uint32_t n_expert,
                                                  const SafetensorsCheckpoint& ck) {
  const SafetensorsTensor* t = ck.Find(src.names.at(0));
  if (!t) return NotFound("checkpoint tensor '{}' not found", src.names.at(0));
  FLASHKV_ASSIGN_OR_RETURN(std::vector<int64_t> ids, t->ToI64());
  std::vector<int32_t> out(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n_expert)
      return Corrupt("{} ({}): entry {} is expert {}, outside [0, {})", t->name, spec.name, i,
                     ids[i], n_expert);
    out[i] = static_cast<int32_t>(ids[i]);
  }
  return out;
}

}  // namespace flashkv
