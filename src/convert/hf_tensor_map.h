// Where each DS4 GGUF tensor comes from in a Hugging Face DeepSeek V4 checkpoint, and how
// its values are assembled into GGML element order. Must not: choose dtypes or write files.
//
// Names are tried in order: the upstream checkpoint names with transformers' `model.`
// prefix (what save_pretrained writes: `model.layers.N.attn.wq_a.weight`; note
// `attn.norm.weight` is the KV norm there), the bare upstream names (`layers.N.attn.wq_a.weight`,
// `embed.weight`), then transformers' in-memory names (`model.layers.N.self_attn.q_a_proj.weight`).
// The one structural change is the routed experts: per-expert `w1`/`w3`/`w2` (or fused
// `gate_up_proj` [E, 2F, D] split gate-first, `down_proj` [E, D, F]) are stacked into
// [D, F, E] / [F, D, E]. `tid2eid` int64 [V, k] becomes int32 ne [k, V]. Everything else is
// a reinterpretation: PyTorch [out, in] is GGML ne [in, out], no transposes.
//
// FP8 (F8_E4M3) weights with their 128x128 block scales and FP4-packed (I8) weights with their
// 32-value E8M0 scales are dequantized per hf_dequant.h; an FP4 source can instead be handed
// over as GGUF MXFP4 blocks unchanged.
#pragma once

#include <string>
#include <vector>

#include "convert/ds4_layout.h"
#include "convert/safetensors_checkpoint.h"
#include "util/status.h"

namespace flashkv {

struct HfTensorSource {
  enum class Kind {
    kSingle,        // names[0], same element order
    kStackExperts,  // names[e] for e in [0, E), concatenated
    kFusedGate,     // names[0] = gate_up_proj [E, 2F, D]: rows [0, F) of each expert
    kFusedUp,       // names[0] = gate_up_proj: rows [F, 2F)
    kFusedDown,     // names[0] = down_proj [E, D, F], same element order
    kTokenExperts,  // names[0] = tid2eid int [V, k] -> int32
  };
  Kind kind;
  std::vector<std::string> names;
  bool fp4 = false;  // every tensor named is FP4-packed (so ReadHfMxfp4 can serve it)
};

struct HfTensorPlan {
  std::vector<HfTensorSource> sources;  // parallel to the layout
  std::vector<std::string> used;        // every checkpoint tensor read (incl. FP8 scales)
  std::vector<std::string> ignored;     // present, known, and deliberately skipped (MTP)
};

// Resolves every layout entry and checks shapes against it. All problems (missing tensors,
// shape mismatches, checkpoint tensors nothing maps to) come back as one error listing them.
Expected<HfTensorPlan> PlanHfTensors(const std::vector<Ds4TensorSpec>& layout, const Ds4Hparams& hp,
                                     const SafetensorsCheckpoint& ck);

// The values of one GGUF tensor in GGML element order (ne[0] fastest): float for every role
// but kTokenExperts.
Expected<std::vector<float>> ReadHfFloat(const HfTensorSource& src, const Ds4TensorSpec& spec,
                                         const SafetensorsCheckpoint& ck);
// One expert's values [ne[1], ne[0]] of a kStackExperts source, so experts can be encoded one
// at a time (a full V4 expert tensor is 8 GiB as f32).
Expected<std::vector<float>> ReadHfExpertFloat(const HfTensorSource& src, uint64_t e,
                                               const SafetensorsCheckpoint& ck);
// An FP4 source (src.fp4) as GGUF MXFP4 rows in GGML element order, without requantizing.
Expected<std::vector<uint8_t>> ReadHfMxfp4(const HfTensorSource& src, const Ds4TensorSpec& spec,
                                           const SafetensorsCheckpoint& ck);
// tid2eid as int32, each id checked to lie in [0, n_expert).
Expected<std::vector<int32_t>> ReadHfTokenExperts(const HfTensorSource& src,
                                                  const Ds4TensorSpec& spec, uint32_t n_expert,
                                                  const SafetensorsCheckpoint& ck);

}  // namespace flashkv
