#include "convert/ds4_layout.h"

#include <fmt/format.h>

namespace flashkv {
namespace {

// Builds the specs; `part` views point at static strings.
class LayoutBuilder {
 public:
  void Global(const char* name, std::vector<uint64_t> ne, Ds4Role role) {
    out.push_back({name, std::move(ne), role, -1, name});
  }
  void Layer(int il, const char* part, std::vector<uint64_t> ne, Ds4Role role) {
    out.push_back({fmt::format("blk.{}.{}", il, part), std::move(ne), role, il, part});
  }
  std::vector<Ds4TensorSpec> out;
};

}  // namespace

std::vector<Ds4TensorSpec> Ds4Layout(const Ds4Hparams& hp) {
  const uint64_t D = hp.n_embd, V = hp.n_vocab, n = hp.n_hc, mix = hp.n_hc_mix();
  const uint64_t H = hp.n_head, d = hp.head_dim, rq = hp.q_lora_rank;
  const uint64_t g = hp.o_groups, ro = hp.o_lora_rank;
  const uint64_t E = hp.n_expert, F = hp.n_ff_exp, k = hp.n_expert_used;
  const uint64_t HI = hp.n_indexer_head, dI = hp.indexer_head_dim;
  LayoutBuilder b;
  b.Global("token_embd.weight", {D, V}, Ds4Role::kDense);
  for (uint32_t il = 0; il < hp.n_layer; ++il) {
    const int l = static_cast<int>(il);
    const uint64_t ratio = il < hp.compress_ratios.size() ? hp.compress_ratios[il] : 0;
    b.Layer(l, "hc_attn_fn.weight", {n * D, mix}, Ds4Role::kDense);
    b.Layer(l, "hc_attn_scale.weight", {3}, Ds4Role::kF32Vector);
    b.Layer(l, "hc_attn_base.weight", {mix}, Ds4Role::kF32Vector);
    b.Layer(l, "hc_ffn_fn.weight", {n * D, mix}, Ds4Role::kDense);
    b.Layer(l, "hc_ffn_scale.weight", {3}, Ds4Role::kF32Vector);
    b.Layer(l, "hc_ffn_base.weight", {mix}, Ds4Role::kF32Vector);
    b.Layer(l, "attn_norm.weight", {D}, Ds4Role::kF32Vector);
    b.Layer(l, "attn_q_a.weight", {D, rq}, Ds4Role::kProjection);
    b.Layer(l, "attn_q_a_norm.weight", {rq}, Ds4Role::kF32Vector);
    b.Layer(l, "attn_q_b.weight", {rq, H * d}, Ds4Role::kProjection);
    b.Layer(l, "attn_kv.weight", {D, d}, Ds4Role::kProjection);
    b.Layer(l, "attn_kv_a_norm.weight", {d}, Ds4Role::kF32Vector);
    b.Layer(l, "attn_sinks.weight", {H}, Ds4Role::kF32Vector);
    b.Layer(l, "attn_output_a.weight", {H * d / g, g * ro}, Ds4Role::kProjection);
    b.Layer(l, "attn_output_b.weight", {g * ro, D}, Ds4Role::kProjection);
    if (ratio != 0) {
      const uint64_t cd = Ds4Hparams::CompressorOverlap(static_cast<uint32_t>(ratio)) * d;
      b.Layer(l, "attn_compressor_ape.weight", {cd, ratio}, Ds4Role::kDense);
      b.Layer(l, "attn_compressor_kv.weight", {D, cd}, Ds4Role::kDense);
      b.Layer(l, "attn_compressor_gate.weight", {D, cd}, Ds4Role::kDense);
      b.Layer(l, "attn_compressor_norm.weight", {d}, Ds4Role::kF32Vector);
    }
    if (Ds4Hparams::HasIndexer(static_cast<uint32_t>(ratio))) {
      const uint64_t cdI = Ds4Hparams::CompressorOverlap(static_cast<uint32_t>(ratio)) * dI;
      b.Layer(l, "indexer.attn_q_b.weight", {rq, HI * dI}, Ds4Role::kDense);
      b.Layer(l, "indexer.proj.weight", {D, HI}, Ds4Role::kDense);
      b.Layer(l, "indexer_compressor_ape.weight", {cdI, ratio}, Ds4Role::kDense);
      b.Layer(l, "indexer_compressor_kv.weight", {D, cdI}, Ds4Role::kDense);
      b.Layer(l, "indexer_compressor_gate.weight", {D, cdI}, Ds4Role::kDense);
      b.Layer(l, "indexer_compressor_norm.weight", {dI}, Ds4Role::kF32Vector);
    }
    const bool hash = il < hp.n_hash_layer;
    b.Layer(l, "ffn_norm.weight", {D}, Ds4Role::kF32Vector);
    b.Layer(l, "ffn_gate_inp.weight", {D, E}, Ds4Role::kDense);
    if (!hash) b.Layer(l, "exp_probs_b.bias", {E}, Ds4Role::kF32Vector);
    b.Layer(l, "ffn_gate_exps.weight", {D, F, E}, Ds4Role::kExpertGateUp);
    b.Layer(l, "ffn_up_exps.weight", {D, F, E}, Ds4Role::kExpertGateUp);
    b.Layer(l, "ffn_down_exps.weight", {F, D, E}, Ds4Role::kExpertDown);
    b.Layer(l, "ffn_gate_shexp.weight", {D, F}, Ds4Role::kProjection);
    b.Layer(l, "ffn_up_shexp.weight", {D, F}, Ds4Role::kProjection);
    b.Layer(l, "ffn_down_shexp.weight", {F, D}, Ds4Role::kProjection);
    if (hash) b.Layer(l, "ffn_gate_tid2eid.weight", {k, V}, Ds4Role::kTokenExperts);
  }
  b.Global("output_hc_base.weight", {n}, Ds4Role::kF32Vector);
  b.Global("output_hc_fn.weight", {n * D, n}, Ds4Role::kDense);
  b.Global("output_hc_scale.weight", {1}, Ds4Role::kF32Vector);
  b.Global("output_norm.weight", {D}, Ds4Role::kF32Vector);
  b.Global("output.weight", {D, V}, Ds4Role::kProjection);
  return std::move(b.out);
}

Expected<Ds4WeightScheme> ParseDs4WeightScheme(std::string_view s) {
  if (s == "f32") return Ds4WeightScheme::kF32;
  if (s == "f16") return Ds4WeightScheme::kF16;
  if (s == "q8_0") return Ds4WeightScheme::kQ8_0;
  if (s == "q2") return Ds4WeightScheme::kQ2;
  return InvalidArgument("unknown weight type '{}' (expected f32, f16, q8_0 or q2)", s);
}

std::string_view Ds4WeightSchemeName(Ds4WeightScheme s) {
  switch (s) {
    case Ds4WeightScheme::kF32:
      return "f32";
    case Ds4WeightScheme::kF16:
      return "f16";
    case Ds4WeightScheme::kQ8_0:
      return "q8_0";
    case Ds4WeightScheme::kQ2:
      return "q2";
  }
  return "?";
}

DType Ds4TensorType(const Ds4TensorSpec& spec, Ds4WeightScheme scheme, bool* fell_back) {
  if (fell_back) *fell_back = false;
  if (spec.role == Ds4Role::kTokenExperts) return DType::kI32;
  if (spec.role == Ds4Role::kF32Vector || scheme == Ds4WeightScheme::kF32) return DType::kF32;
  if (scheme == Ds4WeightScheme::kF16 || spec.role == Ds4Role::kDense) return DType::kF16;
  DType t = DType::kQ8_0;
  if (scheme == Ds4WeightScheme::kQ2 && spec.role == Ds4Role::kExpertGateUp) t = DType::kIQ2_XXS;
  if (scheme == Ds4WeightScheme::kQ2 && spec.role == Ds4Role::kExpertDown) t = DType::kQ2_K;
  if (spec.ne[0] % GetDTypeInfo(t).block_size != 0) {
    if (fell_back) *fell_back = true;
    return DType::kF16;
  }
  return t;
}

}  // namespace flashkv
