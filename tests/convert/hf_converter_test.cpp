#include "convert/hf_converter.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "convert/safetensors_file.h"
#include "gguf/gguf_file.h"
#include "mini_tokenizer.h"
#include "safetensors_builder.h"
#include "tensor/half.h"
#include "tensor/quant.h"

namespace flashkv {
namespace {

namespace fs = std::filesystem;
using testing::SafetensorsBuilder;
using testing::TempDir;

constexpr int kLayers = 5, kExperts = 8;

// Converts `hf_dir` with the mini tokenizer; returns the output path inside `dir`.
std::string Convert(const TempDir& dir, const std::string& hf_dir, Ds4WeightScheme scheme,
                    const std::string& out_name) {
  fs::path tok = dir.path() / "tokenizer.json";
  if (!fs::exists(tok)) testing::WriteMiniTokenizer(tok, 600);
  ConvertOptions opt;
  opt.hf_dir = hf_dir;
  opt.out_path = (dir.path() / out_name).string();
  opt.tokenizer_path = tok.string();
  opt.scheme = scheme;
  opt.name = "hf-tiny-a";
  opt.show_progress = false;
  auto report = ConvertHfCheckpoint(opt);
  EXPECT_TRUE(report.ok()) << report.status().ToString();
  if (report.ok()) {
    EXPECT_EQ(report->tensors, 154u);
  }
  return opt.out_path;
}

// The fixture's checkpoint name for each per-layer GGUF tensor (this test's own copy of the
// docs/DS4_MODEL.md §8.3 table, so the converter's map is checked against an independent
// statement).
const std::map<std::string, std::string> kLayerNames = {
    {"hc_attn_fn.weight", "hc_attn_fn"},
    {"hc_attn_scale.weight", "hc_attn_scale"},
    {"hc_attn_base.weight", "hc_attn_base"},
    {"hc_ffn_fn.weight", "hc_ffn_fn"},
    {"hc_ffn_scale.weight", "hc_ffn_scale"},
    {"hc_ffn_base.weight", "hc_ffn_base"},
    {"attn_norm.weight", "attn_norm.weight"},
    {"attn_q_a.weight", "attn.wq_a.weight"},
    {"attn_q_a_norm.weight", "attn.q_norm.weight"},
    {"attn_q_b.weight", "attn.wq_b.weight"},
    {"attn_kv.weight", "attn.wkv.weight"},
    {"attn_kv_a_norm.weight", "attn.norm.weight"},
    {"attn_sinks.weight", "attn.attn_sink"},
    {"attn_output_a.weight", "attn.wo_a.weight"},
    {"attn_output_b.weight", "attn.wo_b.weight"},
    {"attn_compressor_ape.weight", "attn.compressor.ape"},
    {"attn_compressor_kv.weight", "attn.compressor.wkv.weight"},
    {"attn_compressor_gate.weight", "attn.compressor.wgate.weight"},
    {"attn_compressor_norm.weight", "attn.compressor.norm.weight"},
    {"indexer.attn_q_b.weight", "attn.indexer.wq_b.weight"},
    {"indexer.proj.weight", "attn.indexer.weights_proj.weight"},
    {"indexer_compressor_ape.weight", "attn.indexer.compressor.ape"},
    {"indexer_compressor_kv.weight", "attn.indexer.compressor.wkv.weight"},
    {"indexer_compressor_gate.weight", "attn.indexer.compressor.wgate.weight"},
    {"indexer_compressor_norm.weight", "attn.indexer.compressor.norm.weight"},
    {"ffn_norm.weight", "ffn_norm.weight"},
    {"ffn_gate_inp.weight", "ffn.gate.weight"},
    {"exp_probs_b.bias", "ffn.gate.bias"},
    {"ffn_gate_shexp.weight", "ffn.shared_experts.w1.weight"},
    {"ffn_up_shexp.weight", "ffn.shared_experts.w3.weight"},
    {"ffn_down_shexp.weight", "ffn.shared_experts.w2.weight"},
};
const std::map<std::string, std::string> kGlobalNames = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output.weight", "head.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output_hc_fn.weight", "model.hc_head.hc_fn"},
    {"output_hc_base.weight", "model.hc_head.hc_base"},
    {"output_hc_scale.weight", "model.hc_head.hc_scale"},
};

bool SameBytes(const GgufTensorInfo& t, uint64_t offset, const SafetensorsTensor& s) {
  return offset + s.nbytes <= t.nbytes && std::memcmp(t.data + offset, s.data, s.nbytes) == 0;
}

// Every GGUF value equals the safetensors value bit for bit, and every checkpoint tensor is
// used exactly once.
TEST(HfConverterTest, F32ConversionIsBitExact) {
  TempDir dir("convert_f32");
  std::string path = Convert(dir, testing::HfTinyDir(), Ds4WeightScheme::kF32, "a.gguf");
  auto g = GgufFile::Open(path);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto st = SafetensorsFile::Open(testing::HfTinyDir() + "/model.safetensors");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(g->tensors().size(), 154u);
  EXPECT_EQ(*g->GetU64("deepseek4.hash_layer_count"), 2u);
  EXPECT_EQ(*g->GetIntArray("deepseek4.attention.compress_ratios"),
            (std::vector<int64_t>{0, 4, 8, 4, 8}));
  EXPECT_EQ(g->GetStringArray("tokenizer.ggml.tokens")->size(), 512u);

  std::multiset<std::string> used;
  for (const GgufTensorInfo& t : g->tensors()) {
    SCOPED_TRACE(t.name);
    if (t.name.rfind("blk.", 0) != 0) {
      ASSERT_EQ(t.type, DType::kF32);
      const SafetensorsTensor* s = st->Find(kGlobalNames.at(t.name));
      ASSERT_NE(s, nullptr);
      EXPECT_EQ(t.nbytes, s->nbytes);
      EXPECT_TRUE(SameBytes(t, 0, *s));
      used.insert(s->name);
      continue;
    }
    const size_t dot = t.name.find('.', 4);
    const std::string layer = t.name.substr(4, dot - 4);
    const std::string part = t.name.substr(dot + 1);
    const std::string prefix = "model.layers." + layer + ".";
    if (part == "ffn_gate_tid2eid.weight") {
      ASSERT_EQ(t.type, DType::kI32);
      const SafetensorsTensor* s = st->Find(prefix + "ffn.gate.tid2eid");
      ASSERT_NE(s, nullptr);
      std::vector<int64_t> ids = *s->ToI64();  // [V, k]
      ASSERT_EQ(t.ne, (std::vector<uint64_t>{2, 512}));
      ASSERT_EQ(t.nbytes, ids.size() * 4);
      for (size_t i = 0; i < ids.size(); ++i) {
        int32_t v;
        std::memcpy(&v, t.data + 4 * i, 4);
        ASSERT_EQ(v, ids[i]) << i;
      }
      used.insert(s->name);
      continue;
    }
    ASSERT_EQ(t.type, DType::kF32);
    if (part == "ffn_gate_exps.weight" || part == "ffn_up_exps.weight" ||
        part == "ffn_down_exps.weight") {
      const char* w = part == "ffn_gate_exps.weight" ? "w1"
                      : part == "ffn_up_exps.weight" ? "w3"
                                                     : "w2";
      ASSERT_EQ(t.ne[2], static_cast<uint64_t>(kExperts));
      const uint64_t slice = t.nbytes / kExperts;
      for (int e = 0; e < kExperts; ++e) {
        const SafetensorsTensor* s =
            st->Find(prefix + "ffn.experts." + std::to_string(e) + "." + w + ".weight");
        ASSERT_NE(s, nullptr);
        EXPECT_EQ(s->nbytes, slice);
        EXPECT_TRUE(SameBytes(t, e * slice, *s)) << "expert " << e;
        used.insert(s->name);
      }
      continue;
    }
    const SafetensorsTensor* s = st->Find(prefix + kLayerNames.at(part));
    ASSERT_NE(s, nullptr) << prefix + kLayerNames.at(part);
    EXPECT_EQ(t.nbytes, s->nbytes);
    EXPECT_EQ(t.ne, std::vector<uint64_t>(s->shape.rbegin(), s->shape.rend()));
    EXPECT_TRUE(SameBytes(t, 0, *s));
    used.insert(s->name);
  }
  EXPECT_EQ(used.size(), st->tensors().size());
  EXPECT_EQ(std::set<std::string>(used.begin(), used.end()).size(), used.size());
}

std::vector<float> AsF32(const GgufTensorInfo& t) {
  const uint64_t n = t.nbytes / 4;
  std::vector<float> v(n);
  std::memcpy(v.data(), t.data, t.nbytes);
  return v;
}

// f16 and q8_0 files hold the f32 file's values within each type's rounding bound.
TEST(HfConverterTest, F16AndQ8_0StayWithinTheirErrorBounds) {
  TempDir dir("convert_quant");
  auto ref = GgufFile::Open(Convert(dir, testing::HfTinyDir(), Ds4WeightScheme::kF32, "f32.gguf"));
  ASSERT_TRUE(ref.ok());
  for (Ds4WeightScheme scheme : {Ds4WeightScheme::kF16, Ds4WeightScheme::kQ8_0}) {
    auto g = GgufFile::Open(Convert(dir, testing::HfTinyDir(), scheme, "q.gguf"));
    ASSERT_TRUE(g.ok());
    std::map<DType, int> count;
    for (const GgufTensorInfo& t : g->tensors()) {
      SCOPED_TRACE(t.name);
      const GgufTensorInfo* r = ref->FindTensor(t.name);
      ASSERT_NE(r, nullptr);
      ASSERT_EQ(t.ne, r->ne);
      ++count[t.type];
      if (t.type == DType::kI32 || t.type == DType::kF32) {
        ASSERT_EQ(t.nbytes, r->nbytes);
        EXPECT_EQ(std::memcmp(t.data, r->data, t.nbytes), 0);
        continue;
      }
      std::vector<float> want = AsF32(*r);
      std::vector<float> got(want.size());
      const uint64_t row = t.ne[0];
      const uint64_t row_bytes = *RowBytes(t.type, row);
      for (uint64_t i = 0; i < want.size() / row; ++i)
        ASSERT_TRUE(DequantizeRow(t.type, t.data + i * row_bytes, got.data() + i * row,
                                  static_cast<int64_t>(row))
                        .ok());
      if (t.type == DType::kF16) {
        for (size_t i = 0; i < want.size(); ++i)  // half an ulp of a half, or subnormal step
          ASSERT_LE(std::fabs(got[i] - want[i]), std::fabs(want[i]) * 0x1p-11f + 0x1p-25f) << i;
      } else {
        ASSERT_EQ(t.type, DType::kQ8_0);
        for (size_t b = 0; b < want.size() / 32; ++b) {
          float amax = 0;
          for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(want[b * 32 + i]));
          // Half a step of d = amax/127, plus d's own rounding to f16 times |q| <= 127.
          const float bound = amax / 127 * 0.5f + amax * 0x1p-11f + 1e-12f;
          for (int i = 0; i < 32; ++i)
            ASSERT_LE(std::fabs(got[b * 32 + i] - want[b * 32 + i]), bound) << b;
        }
      }
    }
    if (scheme == Ds4WeightScheme::kF16) {
      EXPECT_EQ(count[DType::kQ8_0], 0);
      // 5 layers x 14 matrices (2 HC fn, 5 attention, 6 experts/shared, router), 12 compressor
      // and 10 indexer matrices, embedding, head and output HC fn.
      EXPECT_EQ(count[DType::kF16], 95);
    } else {
      // Everything ds4 stores as Q8_0 except attn_q_b (rows of 48 = q_lora_rank): 5 layers x
      // (q_a, kv, out_a, out_b, 3 shared, 3 experts) + output.
      EXPECT_EQ(count[DType::kQ8_0], kLayers * 10 + 1);
      EXPECT_EQ(g->FindTensor("blk.0.attn_q_b.weight")->type, DType::kF16);
      EXPECT_EQ(g->FindTensor("blk.0.ffn_gate_exps.weight")->type, DType::kQ8_0);
      EXPECT_EQ(g->FindTensor("token_embd.weight")->type, DType::kF16);
    }
  }
}

// A copy of hf-tiny-a with fused experts (transformers' gate_up_proj / down_proj) and a few
// in-memory / bare upstream names must convert to the same bytes.
TEST(HfConverterTest, FusedExpertsAndAlternateNamesGiveTheSameFile) {
  TempDir dir("convert_fused");
  auto st = SafetensorsFile::Open(testing::HfTinyDir() + "/model.safetensors");
  ASSERT_TRUE(st.ok());
  fs::path hf = dir.path() / "hf";
  fs::create_directories(hf);
  fs::copy_file(testing::HfTinyDir() + "/config.json", hf / "config.json");
  SafetensorsBuilder b;
  const std::map<std::string, std::string> renames = {
      {"model.layers.0.attn.norm.weight", "model.layers.0.self_attn.kv_norm.weight"},
      {"model.layers.1.attn.wq_a.weight", "model.layers.1.self_attn.q_a_proj.weight"},
      {"model.hc_head.hc_fn", "hc_head_fn"},
      {"head.weight", "lm_head.weight"},
      {"model.layers.3.ffn.gate.bias", "model.layers.3.mlp.gate.e_score_correction_bias"},
  };
  for (const SafetensorsTensor& t : st->tensors()) {
    if (t.name.find(".ffn.experts.") != std::string::npos) continue;
    auto r = renames.find(t.name);
    b.Add(r == renames.end() ? t.name : r->second, std::string(StDTypeName(t.dtype)), t.shape,
          std::vector<uint8_t>(t.data, t.data + t.nbytes));
  }
  const int F = 32, D = 64;
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    std::vector<float> gate_up, down;
    for (int e = 0; e < kExperts; ++e) {
      const std::string ep = p + "ffn.experts." + std::to_string(e) + ".";
      for (const char* w : {"w1", "w3"}) {
        auto v = *st->Find(ep + w + ".weight")->ToF32();
        gate_up.insert(gate_up.end(), v.begin(), v.end());
      }
      auto v = *st->Find(ep + "w2.weight")->ToF32();
      down.insert(down.end(), v.begin(), v.end());
    }
    b.AddF32(p + "mlp.experts.gate_up_proj", {kExperts, 2 * F, D}, gate_up);
    b.AddF32(p + "mlp.experts.down_proj", {kExperts, D, F}, down);
  }
  b.WriteTo(hf / "model.safetensors");

  std::string a = Convert(dir, testing::HfTinyDir(), Ds4WeightScheme::kF32, "a.gguf");
  std::string c = Convert(dir, hf.string(), Ds4WeightScheme::kF32, "c.gguf");
  std::ifstream fa(a, std::ios::binary), fc(c, std::ios::binary);
  std::string ba((std::istreambuf_iterator<char>(fa)), {}),
      bc((std::istreambuf_iterator<char>(fc)), {});
  ASSERT_EQ(ba.size(), bc.size());
  EXPECT_TRUE(ba == bc);
}

TEST(HfConverterTest, ReportsEveryMissingAndUnknownTensorAtOnce) {
  TempDir dir("convert_missing");
  auto st = SafetensorsFile::Open(testing::HfTinyDir() + "/model.safetensors");
  fs::path hf = dir.path() / "hf";
  fs::create_directories(hf);
  fs::copy_file(testing::HfTinyDir() + "/config.json", hf / "config.json");
  SafetensorsBuilder b;
  for (const SafetensorsTensor& t : st->tensors()) {
    if (t.name == "head.weight" || t.name == "model.layers.2.attn.wkv.weight" ||
        t.name == "model.layers.4.ffn.experts.5.w2.weight")
      continue;
    b.Add(t.name, std::string(StDTypeName(t.dtype)), t.shape,
          std::vector<uint8_t>(t.data, t.data + t.nbytes));
  }
  b.AddF32("model.layers.0.attn.mystery.weight", {2}, {1, 2});
  b.AddF32("model.layers.1.attn_norm.weight_typo", {1}, {1});
  b.WriteTo(hf / "model.safetensors");
  testing::WriteMiniTokenizer(dir.path() / "tokenizer.json", 600);
  ConvertOptions opt;
  opt.hf_dir = hf.string();
  opt.out_path = (dir.path() / "x.gguf").string();
  opt.tokenizer_path = (dir.path() / "tokenizer.json").string();
  opt.show_progress = false;
  auto r = ConvertHfCheckpoint(opt);
  ASSERT_FALSE(r.ok());
  const std::string m = r.status().message();
  for (const char* needle :
       {"3 tensors missing", "output.weight", "blk.2.attn_kv.weight",
        "model.layers.4.ffn.experts.5.w2.weight", "2 checkpoint tensors map to nothing",
        "model.layers.0.attn.mystery.weight", "model.layers.1.attn_norm.weight_typo"})
    EXPECT_NE(m.find(needle), std::string::npos) << needle << "\nin: " << m;
  EXPECT_FALSE(fs::exists(opt.out_path));
  EXPECT_FALSE(fs::exists(opt.out_path + ".tmp"));
}

TEST(HfConverterTest, ShapeMismatchNamesBothShapes) {
  TempDir dir("convert_shape");
  auto st = SafetensorsFile::Open(testing::HfTinyDir() + "/model.safetensors");
  fs::path hf = dir.path() / "hf";
  fs::create_directories(hf);
  fs::copy_file(testing::HfTinyDir() + "/config.json", hf / "config.json");
  SafetensorsBuilder b;
  for (const SafetensorsTensor& t : st->tensors()) {
    std::vector<uint64_t> shape = t.shape;
    if (t.name == "model.layers.0.attn.wq_a.weight") shape = {64, 48};  // transposed
    b.Add(t.name, std::string(StDTypeName(t.dtype)), shape,
          std::vector<uint8_t>(t.data, t.data + t.nbytes));
  }
  b.WriteTo(hf / "model.safetensors");
  testing::WriteMiniTokenizer(dir.path() / "tokenizer.json", 600);
  ConvertOptions opt;
  opt.hf_dir = hf.string();
  opt.out_path = (dir.path() / "x.gguf").string();
  opt.tokenizer_path = (dir.path() / "tokenizer.json").string();
  opt.show_progress = false;
  auto r = ConvertHfCheckpoint(opt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(
                "model.layers.0.attn.wq_a.weight (blk.0.attn_q_a.weight): [64, 48] in the "
                "checkpoint, expected [48, 64]"),
            std::string::npos)
      << r.status().message();
}

TEST(HfConverterTest, EncodeTensorRowsChecksSizes) {
  std::vector<float> v(64, 0.5f);
  auto q = EncodeTensorRows(v, DType::kQ8_0, {32, 2});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->size(), 68u);
  EXPECT_FALSE(EncodeTensorRows(v, DType::kF32, {32, 3}).ok());
  auto h = EncodeTensorRows(v, DType::kF16, {64});
  ASSERT_TRUE(h.ok());
  uint16_t half;
  std::memcpy(&half, h->data() + 2, 2);
  EXPECT_EQ(half, 0x3800);  // 0.5
}

}  // namespace
}  // namespace flashkv
