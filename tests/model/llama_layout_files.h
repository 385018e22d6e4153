// Small DeepSeek V4 files in the layouts users download besides antirez's, built from
// ds4-tiny with the block types those files use (random but well-formed blocks): llama.cpp's
// deepseek4 GGUFs (an MTP layer counted in block_count, expert_gating_func,
// swiglu_clamp_shexp, no vocab_size), ds4's 0731 MXFP4-experts layout, and the same model
// stored as the dequantized F32 values (the plain reference); and files with every tensor as
// one of llama.cpp's presets quantizes it (PresetMix, on ds4-tiny widened to whole 256-value
// blocks). Shared by
// tests/model/llama_layout_test.cpp (CPU) and tests/backend/cuda (the GPU twin).
#pragma once

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "convert/ds4_hparams.h"
#include "convert/ds4_layout.h"
#include "gguf/ds4_keys.h"
#include "model_test_util.h"
#include "tensor/half.h"
#include "tensor/quant.h"

namespace flashkv::testing::llama_files {

constexpr int kLayers = 5;  // ds4-tiny's trunk
constexpr uint64_t kD = 256, kF = 256, kE = 8, kV = 1024;

inline void PutHalfAt(uint8_t* p, float v) {
  const uint16_t h = F32ToF16(v);
  std::memcpy(p, &h, 2);
}

// Random blocks of type t with scales in a range where the model stays well-conditioned,
// times `gain` (MXFP4: the nearest power of two).
inline std::vector<uint8_t> RandomBlocks(DType t, uint64_t values, uint32_t seed,
                                         float gain = 1.0f) {
  const DTypeInfo& info = GetDTypeInfo(t);
  const uint64_t nb = values / info.block_size;
  std::vector<uint8_t> w(nb * info.block_bytes);
  std::mt19937 rng(seed);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(0.0005f * gain, 0.004f * gain);
  const int e_shift = int(std::lround(std::log2(gain)));
  for (uint64_t b = 0; b < nb; ++b) {
    uint8_t* p = w.data() + b * info.block_bytes;
    switch (t) {
      case DType::kMXFP4:
        p[0] = static_cast<uint8_t>(117 + e_shift + int(rng() % 4));  // 2^-10 .. 2^-7
        break;
      case DType::kQ3_K:
        PutHalfAt(p + 108, scale(rng));
        break;
      case DType::kQ4_K:
      case DType::kQ5_K:
        PutHalfAt(p, scale(rng));
        PutHalfAt(p + 2, scale(rng));
        break;
      case DType::kQ6_K:
        PutHalfAt(p + 208, scale(rng));
        break;
      case DType::kQ2_K:
        PutHalfAt(p + 80, scale(rng));
        PutHalfAt(p + 82, scale(rng));
        break;
      case DType::kQ8_0:
      case DType::kIQ2_XXS:
      case DType::kIQ2_XS:
      case DType::kIQ3_XXS:
      case DType::kIQ3_S:
      case DType::kIQ2_S:
      case DType::kIQ1_S:
      case DType::kIQ4_NL:
      case DType::kIQ4_XS:
        PutHalfAt(p, scale(rng));
        break;
      case DType::kIQ1_M: {  // the f16 scale in the top nibbles of the 4 scale words
        const uint16_t h = F32ToF16(scale(rng));
        for (int k = 0; k < 4; ++k)
          p[49 + 2 * k] = static_cast<uint8_t>((p[49 + 2 * k] & 15) | (((h >> (4 * k)) & 15) << 4));
        break;
      }
      case DType::kBF16: {
        const uint16_t h = F32ToBF16(std::normal_distribution<float>(0.0f, 0.05f)(rng));
        std::memcpy(p, &h, 2);
        break;
      }
      default:
        ADD_FAILURE() << "no generator for " << info.name;
    }
  }
  return w;
}

inline std::vector<uint8_t> ToF32(DType t, const std::vector<uint8_t>& src, uint64_t values) {
  std::vector<uint8_t> out(values * 4);
  const Status s = DequantizeRow(t, src.data(), reinterpret_cast<float*>(out.data()),
                                 static_cast<int64_t>(values));
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

struct NewTensor {
  std::string name;
  std::vector<uint64_t> ne;
  DType type;
  std::vector<uint8_t> data;
};

// The block types of one test file: per layer the routed experts' gate/up and down types,
// then the shared expert's down projection and the lm head.
struct TypeMix {
  const char* name;
  DType gate_up[kLayers];
  DType down[kLayers];
  DType shexp_down;
  DType output;
  DType embd;
  // The compressor apes (attn_ and indexer_): F16 keeps ds4-tiny's; llama.cpp's quantizer gives
  // them the preset's type (a 2-D `.weight`), flashkv dequantizes them to F32 at load.
  DType ape = DType::kF16;
};

// The expert types of real files: ggml-org MXFP4_MOE, Q4_K_M's Q5_K/Q6_K, Q3_K_M's Q3_K;
// Q6_K shared experts and lm head.
inline constexpr TypeMix kKQuantMix = {
    "kquant",
    {DType::kMXFP4, DType::kQ5_K, DType::kQ3_K, DType::kMXFP4, DType::kMXFP4},
    {DType::kMXFP4, DType::kQ6_K, DType::kQ4_K, DType::kMXFP4, DType::kQ6_K},
    DType::kQ6_K,
    DType::kQ6_K,
    DType::kBF16,   // llama.cpp keeps the checkpoint's BF16 tensors BF16
    DType::kQ8_0};  // MXFP4_MOE: every other quantizable tensor Q8_0
// The community IQ ladders (IQ2_XS / IQ2_XXS / IQ1_M routed experts over Q2_K / Q3_K / IQ2_XS
// down projections), Q5_K shared experts, Q6_K head, and a Q5_K embedding (a K-quant table
// for the embedding path).
inline constexpr TypeMix kIqMix = {
    "iq",
    {DType::kIQ2_XS, DType::kIQ1_M, DType::kIQ2_XXS, DType::kIQ1_M, DType::kIQ2_XS},
    {DType::kQ2_K, DType::kIQ2_XS, DType::kQ3_K, DType::kIQ1_M, DType::kQ2_K},
    DType::kQ5_K,
    DType::kQ6_K,
    DType::kQ5_K};

// The types llama.cpp's other IQ presets put into a DS4 file (docs/GGUF.md, "What the presets
// put where"): IQ3_XXS / IQ3_S (IQ3_*), IQ4_XS / IQ4_NL (IQ4_*), IQ2_S (IQ2_M), IQ1_S (IQ1_S)
// experts, an IQ3_S embedding (IQ2_S / IQ2_M / IQ3_XXS presets) and an IQ4_NL head (the
// 32-value IQ type on a dense projection).
inline constexpr TypeMix kIq34Mix = {
    "iq34",
    {DType::kIQ3_XXS, DType::kIQ3_S, DType::kIQ4_XS, DType::kIQ2_S, DType::kIQ1_S},
    {DType::kIQ4_NL, DType::kIQ3_XXS, DType::kIQ4_XS, DType::kIQ3_S, DType::kIQ2_S},
    DType::kIQ4_XS,
    DType::kIQ4_NL,
    DType::kIQ3_S,
    DType::kIQ4_NL};  // the IQ presets' fallback for rows that are not 256-value blocks

inline uint64_t Values(const std::vector<uint64_t>& ne) {
  uint64_t n = 1;
  for (uint64_t v : ne) n *= v;
  return n;
}

// The quantized tensors of a test file.
inline std::vector<NewTensor> QuantizedTensors(const TypeMix& mix) {
  const DType* gate_up = mix.gate_up;
  const DType* down = mix.down;
  std::vector<NewTensor> out;
  uint32_t seed = 1;
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    for (const char* n : {"ffn_gate_exps", "ffn_up_exps"})
      out.push_back({p + n + ".weight",
                     {kD, kF, kE},
                     gate_up[l],
                     RandomBlocks(gate_up[l], kD * kF * kE, seed++)});
    out.push_back({p + "ffn_down_exps.weight",
                   {kF, kD, kE},
                   down[l],
                   RandomBlocks(down[l], kF * kD * kE, seed++)});
    out.push_back({p + "ffn_down_shexp.weight",
                   {kF, kD},
                   mix.shexp_down,
                   RandomBlocks(mix.shexp_down, kF * kD, seed++)});
  }
  out.push_back({"output.weight", {kD, kV}, mix.output, RandomBlocks(mix.output, kD * kV, seed++)});
  out.push_back({"token_embd.weight", {kD, kV}, mix.embd, RandomBlocks(mix.embd, kD * kV, seed++)});
  if (mix.ape != DType::kF16) {
    auto tiny = GgufFile::Open(Ds4TinyPath());
    EXPECT_TRUE(tiny.ok()) << tiny.status().ToString();
    if (!tiny.ok()) return out;
    for (const auto& t : tiny->tensors()) {
      const std::string& n = t.name;
      if (n.size() < 21 || n.compare(n.size() - 21, 21, "compressor_ape.weight") != 0) continue;
      out.push_back({n, t.ne, mix.ape, RandomBlocks(mix.ape, Values(t.ne), seed++)});
    }
  }
  return out;
}

inline std::vector<TensorEdit> Drops(const std::vector<NewTensor>& ts) {
  std::vector<TensorEdit> e;
  for (const auto& t : ts) e.push_back(DropTensor(t.name));
  return e;
}

inline std::vector<std::string> TokenList(uint64_t n) {
  std::vector<std::string> t;
  for (uint64_t i = 0; i < n; ++i) {
    std::string tok = "t";  // (not "t" + to_string: GCC 12 warns -Wrestrict on it)
    tok += std::to_string(i);
    t.push_back(std::move(tok));
  }
  return t;
}

// llama.cpp's metadata on top of ds4-tiny's: one MTP layer counted in block_count, gating id,
// shexp clamps, no vocab_size (the token list gives it); and the MTP layer's tensors.
inline void LlamaCppMetadata(GgufWriter& m) {
  m.SetU32(Ds4Key(ds4_key::kBlockCount), kLayers + 1);
  m.SetU32(Ds4Key(ds4_key::kNextnPredictLayers), 1);
  m.SetU32(Ds4Key(ds4_key::kExpertGatingFunc), 4);
  m.SetU32Array(Ds4Key(ds4_key::kCompressRatios), {0, 0, 4, 128, 4, 0});
  m.SetF32Array(Ds4Key(ds4_key::kSwigluClampExp), std::vector<float>(kLayers + 1, 10.0f));
  m.SetF32Array(Ds4Key(ds4_key::kSwigluClampShexp), std::vector<float>(kLayers + 1, 10.0f));
  m.SetStringArray("tokenizer.ggml.tokens", TokenList(kV));
}

inline const std::vector<std::string> kNoVocabSize = {Ds4Key(ds4_key::kVocabSize)};

inline std::string TmpPath(const std::string& name) {
  return testing::ProcessTmpPath(name);
}

enum class Layout {
  kLlamaCpp,   // llama.cpp metadata + the quantized tensors + an MTP layer
  kDs4Quant,   // ds4 metadata + the quantized tensors (the 0731 MXFP4-experts files)
  kReference,  // ds4 metadata + the same tensors dequantized to F32
};

inline std::string WriteFile(const std::string& name, Layout layout,
                             const TypeMix& mix = kKQuantMix) {
  const auto ts = QuantizedTensors(mix);
  const bool llama = layout == Layout::kLlamaCpp;
  GgufWriter w =
      llama ? CopyDs4Tiny(Drops(ts), LlamaCppMetadata, kNoVocabSize) : CopyDs4Tiny(Drops(ts));
  for (const auto& t : ts) {
    const uint64_t n = Values(t.ne);
    const Status s = layout == Layout::kReference
                         ? w.AddTensor(t.name, DType::kF32, t.ne, ToF32(t.type, t.data, n))
                         : w.AddTensor(t.name, t.type, t.ne, t.data);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  if (llama) {
    EXPECT_TRUE(
        w.AddTensor("blk.5.attn_norm.weight", DType::kF32, {kD}, std::vector<uint8_t>(kD * 4, 0))
            .ok());
    EXPECT_TRUE(w.AddTensor("blk.5.nextn.eh_proj.weight", DType::kF16, {2 * kD, kD},
                            std::vector<uint8_t>(2 * kD * kD * 2, 0))
                    .ok());
  }
  const std::string path = TmpPath(name);
  const Status s = w.Write(path);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return path;
}

// What one of llama.cpp's presets gives every tensor of a DS4 file (docs/GGUF.md, "What
// llama.cpp's presets put into a DS4 file"): DS4's attention, HC, compressor and indexer
// names match none of the quantizer's categories, so they take the preset's default type;
// gate/up are FFN_GATE / FFN_UP (the default for these presets), down, embedding and head
// have their own rules. Not quantized: 1-D tensors, `*_norm.weight`, ffn_gate_inp,
// ffn_gate_tid2eid.
struct PresetMix {
  const char* name;
  DType dflt;        // attention q_a/q_b/kv/output_a/output_b, HC fn, compressor, indexer,
                     // apes, shared and routed gate/up
  bool exps_mxfp4;   // MXFP4_MOE: the 3-D routed expert stacks MXFP4
  DType down_first;  // the first n_ffn_down / 8 down tensors in file order
  DType down;        // the other down tensors (routed and shared counted one by one)
  DType embd;
  DType output;
};

inline constexpr PresetMix kPresetIq2Xxs = {
    "IQ2_XXS", DType::kIQ2_XXS, false, DType::kQ2_K, DType::kIQ2_XXS, DType::kQ2_K, DType::kQ5_K};
inline constexpr PresetMix kPresetIq1M = {"IQ1_M",       DType::kIQ1_M, false,       DType::kQ2_K,
                                          DType::kIQ1_M, DType::kQ2_K,  DType::kQ5_K};
inline constexpr PresetMix kPresetQ2K = {"Q2_K",       DType::kQ2_K, false,       DType::kQ3_K,
                                         DType::kQ3_K, DType::kQ2_K, DType::kQ6_K};
inline constexpr PresetMix kPresetMxfp4Moe = {"MXFP4_MOE",  DType::kQ8_0, true,        DType::kQ8_0,
                                              DType::kQ8_0, DType::kQ8_0, DType::kQ8_0};
inline constexpr PresetMix kPresets[] = {kPresetIq2Xxs, kPresetIq1M, kPresetQ2K, kPresetMxfp4Moe};

// ds4-tiny widened so that every quantized row is a whole number of 256-value blocks, as
// every Flash row is (the quantizer's fallback for other rows never fires on Flash): r_q 128
// -> 256 (attn_q_b, indexer.attn_q_b), d 192 -> 256 (attn_output_a's H·d/g, the apes' c·d),
// r_o 64 -> 128 (attn_output_b's g·r_o).
inline void WidenedMetadata(GgufWriter& m) {
  m.SetU32(Ds4Key(ds4_key::kQLoraRank), 256);
  m.SetU32(Ds4Key(ds4_key::kKeyLength), 256);
  m.SetU32(Ds4Key(ds4_key::kValueLength), 256);
  m.SetU32(Ds4Key(ds4_key::kOutputLoraRank), 128);
}

inline bool PresetQuantizes(const Ds4TensorSpec& s) {
  return s.role != Ds4Role::kF32Vector && s.role != Ds4Role::kTokenExperts &&
         s.part != "ffn_gate_inp.weight";
}

// `down_seen` counts the down tensors met so far in file order. n_ffn_down counts
// block_count = kLayers + 1 layers (a real file's MTP layer has its own down projections).
inline DType PresetType(const PresetMix& p, const Ds4TensorSpec& s, int* down_seen) {
  if (s.part == "token_embd.weight") return p.embd;
  if (s.part == "output.weight") return p.output;
  const bool routed = s.ne.size() == 3;
  if (s.part.find("ffn_down") != std::string_view::npos) {
    const int n_ffn_down = 2 * (kLayers + 1);
    const bool first = (*down_seen)++ < n_ffn_down / 8;
    if (routed && p.exps_mxfp4) return DType::kMXFP4;
    return first ? p.down_first : p.down;
  }
  if (routed && p.exps_mxfp4) return DType::kMXFP4;
  return p.dflt;
}

// Every matrix of a preset file is random, so the per-layer gains compound: at the mixes'
// block scales the IQ2_XXS file's logits reach 174 and int8 activations move them by 32%
// relative L2 (a chaotic model, not a kernel error: the act-quant off run matches its F32
// twin to 2e-6 of the largest logit); a quarter of them keeps every preset below 5%.
inline constexpr float kPresetGain = 0.25f;

// The damage a preset file can carry: none, or the preset's default type on a norm (what a
// quantizer that ignored the norm exclusion would write), refused naming the tensor.
inline constexpr const char* kPresetDamagedNorm = "blk.1.attn_kv_a_norm.weight";

// Every tensor of the widened ds4-tiny with the preset's type (random but well-formed
// blocks); the tensors the preset leaves alone are ds4-tiny's (norms the widening resized:
// 1 ± 0.2). kReference stores the quantized tensors as their dequantized F32 values.
inline std::string WritePresetFile(const std::string& name, Layout layout, const PresetMix& p,
                                   bool damaged = false) {
  auto tiny = GgufFile::Open(Ds4TinyPath());
  EXPECT_TRUE(tiny.ok()) << tiny.status().ToString();
  if (!tiny.ok()) return {};
  std::vector<TensorEdit> drop_all;
  for (const auto& t : tiny->tensors()) drop_all.push_back(DropTensor(t.name));
  const bool llama = layout == Layout::kLlamaCpp;
  GgufWriter w = llama ? CopyDs4Tiny(
                             drop_all,
                             [](GgufWriter& m) {
                               WidenedMetadata(m);
                               LlamaCppMetadata(m);
                             },
                             kNoVocabSize)
                       : CopyDs4Tiny(drop_all, WidenedMetadata);
  auto hp = ReadDs4Hparams(*tiny);
  EXPECT_TRUE(hp.ok()) << hp.status().ToString();
  if (!hp.ok()) return {};
  hp->q_lora_rank = 256;
  hp->head_dim = 256;
  hp->o_lora_rank = 128;
  uint32_t seed = 100;
  int down_seen = 0;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> norm(0.8f, 1.2f);
  for (const Ds4TensorSpec& s : Ds4Layout(*hp)) {
    const uint64_t n = Values(s.ne);
    DType type;
    std::vector<uint8_t> data;
    const GgufTensorInfo* t = tiny->FindTensor(s.name);
    const bool quantized = PresetQuantizes(s) || (damaged && s.name == kPresetDamagedNorm);
    if (quantized) {
      type = PresetQuantizes(s) ? PresetType(p, s, &down_seen) : p.dflt;
      data = RandomBlocks(type, n, seed++, kPresetGain);
      if (layout == Layout::kReference) {
        data = ToF32(type, data, n);
        type = DType::kF32;
      }
    } else if (t != nullptr && t->ne == s.ne) {
      type = t->type;
      data.assign(t->data, t->data + t->nbytes);
    } else {
      EXPECT_EQ(s.role, Ds4Role::kF32Vector) << s.name;
      type = DType::kF32;
      data.resize(n * 4);
      for (uint64_t i = 0; i < n; ++i) {
        const float v = norm(rng);
        std::memcpy(data.data() + 4 * i, &v, 4);
      }
    }
    const Status st = w.AddTensor(s.name, type, s.ne, std::move(data));
    EXPECT_TRUE(st.ok()) << s.name << ": " << st.ToString();
  }
  if (llama) {  // the MTP layer flashkv ignores; eh_proj takes the default type too
    EXPECT_TRUE(
        w.AddTensor("blk.5.attn_norm.weight", DType::kF32, {kD}, std::vector<uint8_t>(kD * 4, 0))
            .ok());
    EXPECT_TRUE(w.AddTensor("blk.5.nextn.eh_proj.weight", p.dflt, {2 * kD, kD},
                            RandomBlocks(p.dflt, 2 * kD * kD, seed++, kPresetGain))
                    .ok());
  }
  const std::string path = TmpPath(name);
  const Status s = w.Write(path);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return path;
}

}  // namespace flashkv::testing::llama_files
