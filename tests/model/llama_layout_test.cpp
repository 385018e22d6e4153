// The files users download besides antirez's: llama.cpp deepseek4 GGUFs (MXFP4_MOE and K-quant
// ladders, MTP layers counted in block_count, expert_gating_func, swiglu_clamp_shexp, no
// vocab_size) and ds4's 0731 MXFP4-experts layout. Small files in each layout are built from
// ds4-tiny with the block types those files use (random but well-formed blocks), loaded, and
// their logits compared with the same model stored as the dequantized F32 values; damaged
// variants must be refused with the key or tensor named; the snapshot fingerprint must tell the
// files apart.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "llama_layout_files.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model_test_util.h"
#include "snapshot/model_fingerprint.h"
#include "tensor/half.h"
#include "tensor/quant.h"

namespace flashkv {
namespace {

using testing::CopyDs4Tiny;
using testing::DropTensor;
using testing::EditedDs4Tiny;
using testing::TensorEdit;

using namespace testing::llama_files;  // NOLINT: the file builders and their constants

std::vector<float> Logits(const std::string& path, ActQuantMode aq, ModelConfig* config) {
  ThreadPool pool(2);
  CpuBackend be(&pool);
  ModelOptions opts;
  opts.numerics = NumericsMode::kHf;
  opts.act_quant = aq;
  auto model = Model::Load(path, be, &opts);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return {};
  if (config) *config = (*model)->config();
  std::vector<int32_t> prompt(24);
  for (int i = 0; i < 24; ++i) prompt[i] = (i * 389 + 17) % int(kV);
  auto state = (*model)->NewState(32);
  EXPECT_TRUE(state.ok());
  std::vector<float> logits(prompt.size() * kV);
  const Status s = (*model)->Forward(prompt, *state, LogitsFor::kAll, logits.data());
  EXPECT_TRUE(s.ok()) << s.ToString();
  return logits;
}

// The llama.cpp-layout file against its dequantized F32 twin.
void ExpectMatchesTheF32Model(const std::string& quant, const std::string& ref, const char* name) {
  ModelConfig qc, rc;
  const auto a = Logits(quant, ActQuantMode::kOff, &qc);
  const auto b = Logits(ref, ActQuantMode::kOff, &rc);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(qc.layout, GgufLayout::kLlamaCpp);
  EXPECT_EQ(rc.layout, GgufLayout::kDs4);
  EXPECT_EQ(qc.n_layer, kLayers);
  EXPECT_EQ(qc.n_layer_nextn, 1);
  EXPECT_EQ(qc.n_vocab, int(kV));
  EXPECT_EQ(qc.compress_ratios, rc.compress_ratios);
  // Same weights, f32 activations: only the summation order of the dot products differs.
  double max_abs = 0, max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(std::isfinite(a[i])) << i;
    max_abs = std::max(max_abs, double(std::fabs(b[i])));
    max_diff = std::max(max_diff, double(std::fabs(a[i] - b[i])));
  }
  EXPECT_GT(max_abs, 1e-3);
  EXPECT_LE(max_diff, 1e-4 * max_abs) << name << " max |logit| " << max_abs;

  // ds4's q8 numerics on the same file: int8 activations move the logits by a few percent
  // (7.7% relative L2 for the kquant mix, 2.5% on ds4-tiny; DotQ8 itself is held to the
  // dequantized product in tensor/formats_test and dot_test), a kernel reading blocks wrong
  // by far more (a wrong MXFP4 scale doubles or halves whole rows).
  const auto c = Logits(quant, ActQuantMode::kQ8, nullptr);
  ASSERT_EQ(c.size(), b.size());
  double err = 0, norm = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    err += (double(c[i]) - b[i]) * (double(c[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  std::printf("%s: max |logit| %.3g, act-quant off max |d| %.3g, q8 rel L2 %.3g\n", name, max_abs,
              max_diff, std::sqrt(err / norm));
  EXPECT_LT(std::sqrt(err / norm), 0.15) << name;
}

class LlamaLayoutMixTest : public ::testing::TestWithParam<TypeMix> {};

TEST_P(LlamaLayoutMixTest, LoadsAndMatchesTheDequantizedF32Model) {
  const TypeMix& mix = GetParam();
  const std::string quant =
      WriteFile(std::string("llama-layout-quant-") + mix.name + ".gguf", Layout::kLlamaCpp, mix);
  const std::string ref =
      WriteFile(std::string("llama-layout-ref-") + mix.name + ".gguf", Layout::kReference, mix);
  ExpectMatchesTheF32Model(quant, ref, mix.name);
}

INSTANTIATE_TEST_SUITE_P(Mixes, LlamaLayoutMixTest, ::testing::Values(kKQuantMix, kIqMix, kIq34Mix),
                         [](const ::testing::TestParamInfo<TypeMix>& info) {
                           return std::string(info.param.name);
                         });

// Every tensor with the type llama.cpp's preset gives it (attention, HC, compressor,
// indexer and apes included), on ds4-tiny widened to whole 256-value blocks.
class LlamaPresetTest : public ::testing::TestWithParam<PresetMix> {};

TEST_P(LlamaPresetTest, EveryTensorAsThePresetQuantizesItMatchesTheDequantizedF32Model) {
  const PresetMix& p = GetParam();
  const std::string quant =
      WritePresetFile(std::string("llama-preset-") + p.name + ".gguf", Layout::kLlamaCpp, p);
  const std::string ref =
      WritePresetFile(std::string("llama-preset-ref-") + p.name + ".gguf", Layout::kReference, p);
  // The file holds what the preset writes: no F16 matrix is left but the router.
  auto f = GgufFile::Open(quant);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  for (const auto& t : f->tensors()) {
    if (t.ne.size() < 2 || t.type == DType::kF32 || t.type == DType::kI32) continue;
    if (t.name.find("ffn_gate_inp") != std::string::npos) continue;
    EXPECT_TRUE(t.type == p.dflt || t.type == p.down || t.type == p.down_first ||
                t.type == p.embd || t.type == p.output || (p.exps_mxfp4 && t.type == DType::kMXFP4))
        << t.name << " " << GetDTypeInfo(t.type).name;
  }
  EXPECT_EQ(f->FindTensor("blk.2.indexer.attn_q_b.weight")->type, p.dflt);
  EXPECT_EQ(f->FindTensor("blk.3.attn_compressor_ape.weight")->type, p.dflt);
  EXPECT_EQ(f->FindTensor("blk.4.hc_ffn_fn.weight")->type, p.dflt);
  EXPECT_EQ(f->FindTensor("blk.0.ffn_down_exps.weight")->type,
            p.exps_mxfp4 ? DType::kMXFP4 : p.down_first);
  EXPECT_EQ(f->FindTensor("blk.4.ffn_down_shexp.weight")->type, p.down);
  ExpectMatchesTheF32Model(quant, ref, p.name);

  // A norm quantized with the default type is refused, the tensor and its type named.
  const std::string bad = WritePresetFile(std::string("llama-preset-bad-") + p.name + ".gguf",
                                          Layout::kLlamaCpp, p, /*damaged=*/true);
  ThreadPool pool(1);
  CpuBackend be(&pool);
  const Status s = Model::Load(bad, be, nullptr).status();
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.ToString();
  EXPECT_NE(s.message().find(std::string(kPresetDamagedNorm) + " has type " +
                             std::string(GetDTypeInfo(p.dflt).name)),
            std::string::npos)
      << s.message();
}

INSTANTIATE_TEST_SUITE_P(Presets, LlamaPresetTest, ::testing::ValuesIn(kPresets),
                         [](const ::testing::TestParamInfo<PresetMix>& info) {
                           return std::string(info.param.name);
                         });

// ds4's own layout with the new block types (the 0731 MXFP4-experts files): same logits as
// the llama.cpp-layout file, bit for bit, since only the metadata differs.
TEST(LlamaLayoutTest, Ds4LayoutWithMxfp4ExpertsMatchesTheLlamaCppFile) {
  const std::string ds4 = WriteFile("ds4-layout-quant.gguf", Layout::kDs4Quant);
  const std::string llama = WriteFile("llama-layout-quant2.gguf", Layout::kLlamaCpp);
  ModelConfig dc;
  for (ActQuantMode aq : {ActQuantMode::kOff, ActQuantMode::kQ8}) {
    const auto a = Logits(ds4, aq, &dc);
    const auto b = Logits(llama, aq, nullptr);
    ASSERT_EQ(a.size(), b.size());
    ASSERT_FALSE(a.empty());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << ActQuantModeName(aq);
  }
  EXPECT_EQ(dc.layout, GgufLayout::kDs4);
}

TEST(LlamaLayoutTest, FingerprintTellsTheLayoutsApart) {
  const std::string quant = WriteFile("llama-layout-fp-quant.gguf", Layout::kLlamaCpp);
  const std::string ref = WriteFile("llama-layout-fp-ref.gguf", Layout::kReference);
  auto fq = GgufFile::Open(quant);
  auto fr = GgufFile::Open(ref);
  auto fd = GgufFile::Open(testing::Ds4TinyPath());
  ASSERT_TRUE(fq.ok() && fr.ok() && fd.ok());
  const auto a = ModelFingerprint(*fq), b = ModelFingerprint(*fr), d = ModelFingerprint(*fd);
  ASSERT_TRUE(a.ok() && b.ok() && d.ok());
  EXPECT_NE(*a, *b);
  EXPECT_NE(*a, *d);
  EXPECT_NE(*b, *d);
  // Same shapes and metadata, routed experts of one layer MXFP4 instead of Q8_0: the tensor
  // table differs, so the fingerprint does.
  const std::string x = TmpPath("fp-experts-q8.gguf"), y = TmpPath("fp-experts-mxfp4.gguf");
  ASSERT_TRUE(CopyDs4Tiny({testing::ReplaceTensor("blk.0.ffn_gate_exps.weight", {kD, kF, kE},
                                                  DType::kQ8_0)})
                  .Write(x)
                  .ok());
  ASSERT_TRUE(CopyDs4Tiny({testing::ReplaceTensor("blk.0.ffn_gate_exps.weight", {kD, kF, kE},
                                                  DType::kMXFP4)})
                  .Write(y)
                  .ok());
  auto fx = GgufFile::Open(x), fy = GgufFile::Open(y);
  ASSERT_TRUE(fx.ok() && fy.ok());
  EXPECT_NE(*ModelFingerprint(*fx), *ModelFingerprint(*fy));
}

Status ConfigOf(const std::function<void(GgufWriter&)>& meta,
                const std::vector<std::string>& drop = {}) {
  const GgufFile f = EditedDs4Tiny({}, meta, drop);
  return ModelConfig::FromGguf(f).status();
}

void ExpectNamed(const Status& s, StatusCode code, const std::string& what) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
}

TEST(LlamaLayoutTest, DamagedMetadataIsRefusedWithTheKeyNamed) {
  ExpectNamed(ConfigOf([](GgufWriter& m) {
                LlamaCppMetadata(m);
                m.SetU32("deepseek4.expert_gating_func", 2);  // sigmoid
              }),
              StatusCode::kUnsupported, "deepseek4.expert_gating_func = 2");
  ExpectNamed(ConfigOf([](GgufWriter& m) {
                LlamaCppMetadata(m);
                m.SetU32("deepseek4.nextn_predict_layers", kLayers + 1);
              }),
              StatusCode::kInvalidArgument, "deepseek4.nextn_predict_layers");
  ExpectNamed(ConfigOf([](GgufWriter& m) {
                LlamaCppMetadata(m);
                std::vector<float> c(kLayers + 1, 10.0f);
                c[3] = 7.0f;
                m.SetF32Array("deepseek4.swiglu_clamp_shexp", c);
              }),
              StatusCode::kUnsupported, "deepseek4.swiglu_clamp_shexp differs");
  ExpectNamed(ConfigOf([](GgufWriter& m) {
                LlamaCppMetadata(m);
                m.SetU32Array("deepseek4.attention.compress_ratios", {0, 0, 4, 128});
              }),
              StatusCode::kInvalidArgument, "deepseek4.attention.compress_ratios has 4 entries");
  // Neither vocab_size nor a token list.
  ExpectNamed(ConfigOf({}, kNoVocabSize), StatusCode::kNotFound, "deepseek4.vocab_size");
}

TEST(LlamaLayoutTest, YarnBetasDefaultAsInLlamaCppOnlyForItsLayout) {
  const std::vector<std::string> no_betas = {"deepseek4.vocab_size",
                                             "deepseek4.rope.scaling.yarn_beta_fast",
                                             "deepseek4.rope.scaling.yarn_beta_slow"};
  const GgufFile f = EditedDs4Tiny({}, LlamaCppMetadata, no_betas);
  auto c = ModelConfig::FromGguf(f);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->yarn_beta_fast, 32.0f);
  EXPECT_EQ(c->yarn_beta_slow, 1.0f);
  // ds4's layout states them; a ds4 file without one is damaged.
  ExpectNamed(ConfigOf({}, {"deepseek4.rope.scaling.yarn_beta_fast"}), StatusCode::kNotFound,
              "deepseek4.rope.scaling.yarn_beta_fast");
}

Status LoadEdited(const std::string& name, const std::vector<TensorEdit>& edits,
                  const std::function<void(GgufWriter&)>& meta = {},
                  const std::vector<std::string>& drop = {}) {
  const std::string path = TmpPath(name);
  EXPECT_TRUE(CopyDs4Tiny(edits, meta, drop).Write(path).ok());
  ThreadPool pool(1);
  CpuBackend be(&pool);
  return Model::Load(path, be, nullptr).status();
}

TEST(LlamaLayoutTest, DamagedTensorsAreRefusedWithTheTensorNamed) {
  // A token list that disagrees with token_embd's rows.
  ExpectNamed(LoadEdited(
                  "bad-vocab.gguf", {},
                  [](GgufWriter& m) { m.SetStringArray("tokenizer.ggml.tokens", TokenList(1000)); },
                  kNoVocabSize),
              StatusCode::kInvalidArgument, "token_embd.weight has shape [256, 1024]");
  // A type flashkv has no kernels for (TQ1_0).
  ExpectNamed(LoadEdited("bad-type.gguf", {testing::ReplaceTensor("blk.2.ffn_up_exps.weight",
                                                                  {kD, kF, kE}, DType::kTQ1_0)}),
              StatusCode::kUnsupported, "blk.2.ffn_up_exps.weight has type tq1_0");
  // MXFP4 where a norm (F32 only) belongs.
  ExpectNamed(LoadEdited("bad-norm.gguf",
                         {testing::ReplaceTensor("blk.1.ffn_norm.weight", {kD}, DType::kMXFP4)}),
              StatusCode::kUnsupported, "blk.1.ffn_norm.weight has type mxfp4");
  // The IQ ladders' types: an IQ2_XS norm, IQ1_M experts of the wrong count.
  ExpectNamed(LoadEdited("bad-iq-norm.gguf",
                         {testing::ReplaceTensor("blk.0.attn_norm.weight", {kD}, DType::kIQ2_XS)}),
              StatusCode::kUnsupported, "blk.0.attn_norm.weight has type iq2_xs");
  ExpectNamed(
      LoadEdited("bad-iq-experts.gguf", {testing::ReplaceTensor("blk.3.ffn_down_exps.weight",
                                                                {kF, kD, kE / 2}, DType::kIQ1_M)}),
      StatusCode::kInvalidArgument, "blk.3.ffn_down_exps.weight has shape [256, 256, 4]");
}

// Variants with another expert_used_count (a top-4 "4Expert" V4 Flash exists): the count
// comes from metadata, and the hash tables must have that many slots per token.
TEST(LlamaLayoutTest, ExpertUsedCountComesFromMetadata) {
  std::vector<TensorEdit> one_slot;
  for (int l = 0; l < 3; ++l) {  // ds4-tiny's hash layers
    one_slot.push_back(testing::ReplaceTensor(
        "blk." + std::to_string(l) + ".ffn_gate_tid2eid.weight", {1, kV}, DType::kI32));
  }
  const std::string path = TmpPath("top1.gguf");
  ASSERT_TRUE(
      CopyDs4Tiny(one_slot, [](GgufWriter& m) { m.SetU32("deepseek4.expert_used_count", 1); })
          .Write(path)
          .ok());
  ModelConfig c;
  const auto logits = Logits(path, ActQuantMode::kQ8, &c);
  EXPECT_EQ(c.n_expert_used, 1);
  ASSERT_FALSE(logits.empty());
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  // The key changed without the tables: refused, the table named.
  ExpectNamed(LoadEdited("top3.gguf", {},
                         [](GgufWriter& m) { m.SetU32("deepseek4.expert_used_count", 3); }),
              StatusCode::kInvalidArgument,
              "blk.0.ffn_gate_tid2eid.weight has shape [2, 1024], expected [3, 1024]");
}

TEST(LlamaLayoutTest, UnknownTypeIdIsRefusedWithTheTensorNamed) {
  // GGUF type 40 (NVFP4 in newer GGML) is not one flashkv knows: the reader refuses the file
  // naming the tensor and the id instead of guessing its size.
  GgufWriter w = CopyDs4Tiny({});
  auto bytes = w.WriteToBytes();
  ASSERT_TRUE(bytes.ok());
  // Patch the type id of output.weight in the tensor table (name, n_dims, ne..., type).
  const std::string name = "output.weight";
  std::vector<uint8_t>& b = *bytes;
  size_t at = std::string::npos;
  for (size_t i = 0; i + name.size() < b.size(); ++i) {
    if (std::memcmp(b.data() + i, name.data(), name.size()) == 0 && i >= 8) {
      uint64_t len;
      std::memcpy(&len, b.data() + i - 8, 8);
      if (len == name.size()) {
        at = i + name.size();
        break;
      }
    }
  }
  ASSERT_NE(at, std::string::npos);
  uint32_t n_dims;
  std::memcpy(&n_dims, b.data() + at, 4);
  const size_t type_at = at + 4 + 8 * n_dims;
  const uint32_t nvfp4 = 40;
  std::memcpy(b.data() + type_at, &nvfp4, 4);
  auto f = GgufFile::FromBytes(std::move(b));
  ExpectNamed(f.status(), StatusCode::kCorrupt,
              "tensor 'output.weight': unknown tensor type id 40");
}

}  // namespace
}  // namespace flashkv
