// `flashkv convert` of DeepSeek's official V4 checkpoint layout (V4-Flash, 0731): bare upstream
// names (`layers.N.…`, `embed.weight`, `hc_head_fn`), FP8 E4M3 projections with F8_E8M0
// 128x128 block scales (`.scale`), and FP4-packed routed experts (I8 [rows, cols / 2], low
// nibble first, F8_E8M0 scale [rows, cols / 32]). The checkpoint is hf-tiny-a's, re-encoded in
// that layout with deterministic codes; every converted tensor is checked against this
// file's own plain decode of the public format definitions.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "convert/hf_converter.h"
#include "convert/safetensors_file.h"
#include "gguf/gguf_file.h"
#include "mini_tokenizer.h"
#include "model/model.h"
#include "safetensors_builder.h"
#include "tensor/quant.h"
#include "util/thread_pool.h"

namespace flashkv {
namespace {

namespace fs = std::filesystem;
using testing::SafetensorsBuilder;
using testing::TempDir;

// Plain decodes of the public definitions (independent of src/convert/hf_dequant.cpp).
float E4M3(uint8_t v) {
  const int e = (v >> 3) & 15, m = v & 7;
  const float mag = e == 0 ? std::ldexp(static_cast<float>(m), -9)
                           : std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
  return (v & 0x80) ? -mag : mag;
}
float E8M0(uint8_t v) {
  return std::ldexp(1.0f, static_cast<int>(v) - 127);
}
float E2M1(uint8_t code) {
  static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return (code & 8) ? -mag[code & 7] : mag[code & 7];
}

// Nearest codes, for a checkpoint that holds hf-tiny-a's own weights (rounded) rather than
// random codes, so the model built from it computes sane values.
uint8_t NearestE4M3(float x) {
  uint8_t best = 0;
  for (int c = 0; c < 128; ++c)
    if (c != 0x7F &&
        std::fabs(E4M3(uint8_t(c)) - std::fabs(x)) < std::fabs(E4M3(best) - std::fabs(x)))
      best = uint8_t(c);
  return x < 0 ? uint8_t(best | 0x80) : best;
}
uint8_t NearestE2M1(float x) {
  uint8_t best = 0;
  for (uint8_t c = 0; c < 8; ++c)
    if (std::fabs(E2M1(c) - std::fabs(x)) < std::fabs(E2M1(best) - std::fabs(x))) best = c;
  return x < 0 ? uint8_t(best | 8) : best;
}
// The E8M0 byte of the smallest power of two s with amax / s <= top.
uint8_t ScaleFor(float amax, float top) {
  if (amax <= 0.0f) return 127;
  return uint8_t(std::clamp(127 + int(std::ceil(std::log2(amax / top))), 1, 254));
}

// A deterministic byte stream.
struct Bytes {
  uint32_t s;
  uint8_t Next() {
    s = s * 1664525u + 1013904223u;
    return static_cast<uint8_t>(s >> 24);
  }
};

bool IsExpert(const std::string& n) {
  return n.find(".ffn.experts.") != std::string::npos;
}
// The projections stored as FP8 here (the official file stores its linear layers so).
bool IsFp8(const std::string& n) {
  for (const char* p : {".attn.wq_a.weight", ".attn.wq_b.weight", ".attn.wkv.weight",
                        ".attn.wo_a.weight", ".attn.wo_b.weight", ".shared_experts.w1.weight",
                        ".shared_experts.w2.weight", ".shared_experts.w3.weight"})
    if (n.ends_with(p)) return true;
  return n == "head.weight";
}

// hf-tiny-a's names in the official spelling.
std::string OfficialName(const std::string& n) {
  static const std::map<std::string, std::string> global = {
      {"model.embed_tokens.weight", "embed.weight"}, {"model.norm.weight", "norm.weight"},
      {"model.hc_head.hc_fn", "hc_head_fn"},         {"model.hc_head.hc_base", "hc_head_base"},
      {"model.hc_head.hc_scale", "hc_head_scale"},
  };
  if (auto it = global.find(n); it != global.end()) return it->second;
  std::string s = n.rfind("model.", 0) == 0 ? n.substr(6) : n;
  if (s.ends_with(".attn.norm.weight")) s.replace(s.size() - 11, 11, "kv_norm.weight");
  return s;
}

std::string ScaleName(const std::string& weight) {
  return weight.substr(0, weight.size() - 7) + ".scale";
}

// What a test may do to one tensor's encoding before it is written.
struct Damage {
  std::string tensor;  // official weight name; empty: none
  std::function<void(std::string&dtype, std::vector<uint64_t>&shape, std::vector<uint8_t>&bytes,
                     bool&drop)>
      weight, scale;
};

struct Official {
  fs::path dir;
  std::map<std::string, std::vector<float>> reference;  // logical values per official name
  std::vector<std::string> fp4, fp8;
};

// hf-tiny-a's config.json in the released schema: compress_ratios with the MTP layer's entry
// at the end, num_hash_layers, a flat YaRN rope_scaling (the compress branch), expert_dtype
// and the FP8 quantization_config.
void WriteReleasedConfig(const fs::path& path) {
  std::ifstream in(testing::HfTinyDir() + "/config.json");
  nlohmann::json j = nlohmann::json::parse(in);
  for (const char* k : {"layer_types", "mlp_layer_types", "rope_parameters", "compress_rates"})
    j.erase(k);
  j["compress_ratios"] = {0, 4, 8, 4, 8, 0};
  j["num_hash_layers"] = 2;
  j["num_nextn_predict_layers"] = 1;
  j["compress_rope_theta"] = 160000.0;
  j["rope_theta"] = 10000.0;
  j["rope_scaling"] = {{"type", "yarn"},
                       {"factor", 16},
                       {"beta_fast", 32},
                       {"beta_slow", 1},
                       {"original_max_position_embeddings", 65536}};
  j["expert_dtype"] = "fp4";
  j["torch_dtype"] = "bfloat16";
  j["quantization_config"] = {{"activation_scheme", "dynamic"},
                              {"fmt", "e4m3"},
                              {"quant_method", "fp8"},
                              {"scale_fmt", "ue8m0"},
                              {"weight_block_size", {128, 128}}};
  std::ofstream(path) << j.dump(2);
}

// Writes the official-layout checkpoint and returns the reference values. `released`: the
// released config schema and an FP4 MTP expert (skipped), else hf-tiny-a's config.json.
// `faithful`: the codes are hf-tiny-a's values rounded to nearest, else random.
Official WriteOfficial(const TempDir& tmp, const std::string& sub, const Damage& damage = {},
                       bool released = false, bool faithful = false) {
  Official o;
  o.dir = tmp.path() / sub;
  fs::create_directories(o.dir);
  if (released)
    WriteReleasedConfig(o.dir / "config.json");
  else
    fs::copy_file(testing::HfTinyDir() + "/config.json", o.dir / "config.json");
  auto st = SafetensorsFile::Open(testing::HfTinyDir() + "/model.safetensors");
  EXPECT_TRUE(st.ok());
  SafetensorsBuilder b;
  Bytes rng{12345};
  for (const SafetensorsTensor& t : st->tensors()) {
    const std::string name = OfficialName(t.name);
    const bool hurt = name == damage.tensor;
    auto add = [&](const std::string& n, std::string dtype, std::vector<uint64_t> shape,
                   std::vector<uint8_t> bytes,
                   const std::function<void(std::string&, std::vector<uint64_t>&,
                                            std::vector<uint8_t>&, bool&)>& hook) {
      bool drop = false;
      if (hurt && hook) hook(dtype, shape, bytes, drop);
      if (!drop) b.Add(n, dtype, std::move(shape), std::move(bytes));
    };
    if (IsExpert(name)) {
      const uint64_t rows = t.shape[0], cols = t.shape[1];
      std::vector<uint8_t> q(rows * cols / 2), e(rows * cols / 32);
      for (uint8_t& v : q) v = rng.Next();
      // Scales 2^-9 .. 2^6; an E2M1 -0 next to a +0.
      for (uint8_t& v : e) v = static_cast<uint8_t>(118 + rng.Next() % 16);
      q[0] = 0x08;
      if (faithful) {
        const std::vector<float> src = *t.ToF32();
        std::fill(q.begin(), q.end(), 0);
        for (uint64_t b = 0; b < e.size(); ++b) {
          float amax = 0.0f;
          for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(src[32 * b + i]));
          e[b] = ScaleFor(amax, 6.0f);
          for (int i = 0; i < 32; ++i) {
            const uint64_t k = 32 * b + i;
            q[k / 2] |= uint8_t(NearestE2M1(src[k] / E8M0(e[b])) << (4 * (k % 2)));
          }
        }
      }
      std::vector<float> ref(rows * cols);
      for (uint64_t i = 0; i < ref.size(); ++i)
        ref[i] = E2M1((q[i / 2] >> (4 * (i % 2))) & 15) * E8M0(e[i / 32]);
      o.reference[name] = ref;
      o.fp4.push_back(name);
      add(name, "I8", {rows, cols / 2}, q, damage.weight);
      add(ScaleName(name), "F8_E8M0", {rows, cols / 32}, e, damage.scale);
    } else if (IsFp8(name)) {
      const uint64_t rows = t.shape[0], cols = t.shape[1];
      const uint64_t sr = (rows + 127) / 128, sc = (cols + 127) / 128;
      std::vector<uint8_t> q(rows * cols), e(sr * sc);
      for (uint8_t& v : q) {
        v = rng.Next();
        if ((v & 0x7F) == 0x7F) v ^= 1;  // E4M3's NaN
      }
      for (uint8_t& v : e) v = static_cast<uint8_t>(120 + rng.Next() % 8);
      if (faithful) {
        const std::vector<float> src = *t.ToF32();
        std::vector<float> amax(sr * sc, 0.0f);
        for (uint64_t r = 0; r < rows; ++r)
          for (uint64_t c = 0; c < cols; ++c) {
            float& m = amax[(r / 128) * sc + c / 128];
            m = std::max(m, std::fabs(src[r * cols + c]));
          }
        for (uint64_t i = 0; i < e.size(); ++i) e[i] = ScaleFor(amax[i], 448.0f);
        for (uint64_t r = 0; r < rows; ++r)
          for (uint64_t c = 0; c < cols; ++c)
            q[r * cols + c] = NearestE4M3(src[r * cols + c] / E8M0(e[(r / 128) * sc + c / 128]));
      }
      std::vector<float> ref(rows * cols);
      for (uint64_t r = 0; r < rows; ++r)
        for (uint64_t c = 0; c < cols; ++c)
          ref[r * cols + c] = E4M3(q[r * cols + c]) * E8M0(e[(r / 128) * sc + c / 128]);
      o.reference[name] = ref;
      o.fp8.push_back(name);
      add(name, "F8_E4M3", {rows, cols}, q, damage.weight);
      add(ScaleName(name), "F8_E8M0", {sr, sc}, e, damage.scale);
    } else {
      std::vector<uint8_t> bytes(t.data, t.data + t.nbytes);
      add(name, std::string(StDTypeName(t.dtype)), t.shape, bytes, damage.weight);
    }
  }
  if (released) {
    b.Add("mtp.0.ffn.experts.0.w1.weight", "I8", {32, 32}, std::vector<uint8_t>(32 * 32, 0x21));
    b.Add("mtp.0.ffn.experts.0.w1.scale", "F8_E8M0", {32, 2}, std::vector<uint8_t>(64, 127));
  }
  b.WriteTo(o.dir / "model.safetensors");
  return o;
}

Expected<ConvertReport> Convert(const TempDir& tmp, const fs::path& hf, Ds4WeightScheme scheme,
                                bool keep_mxfp4, const std::string& out) {
  fs::path tok = tmp.path() / "tokenizer.json";
  if (!fs::exists(tok)) testing::WriteMiniTokenizer(tok, 600);
  ConvertOptions opt;
  opt.hf_dir = hf.string();
  opt.out_path = (tmp.path() / out).string();
  opt.tokenizer_path = tok.string();
  opt.scheme = scheme;
  opt.keep_mxfp4_experts = keep_mxfp4;
  opt.show_progress = false;
  return ConvertHfCheckpoint(opt);
}

// The GGUF name and expert index an official tensor lands in; e = -1 for non-experts.
struct Slot {
  std::string gguf;
  int expert;
};
Slot GgufSlot(const std::string& name) {
  if (name == "head.weight") return {"output.weight", -1};
  // layers.L.<rest>
  const size_t dot = name.find('.', 7);
  const std::string layer = name.substr(7, dot - 7), rest = name.substr(dot + 1);
  const std::string blk = "blk." + layer + ".";
  static const std::map<std::string, std::string> parts = {
      {"attn.wq_a.weight", "attn_q_a.weight"},
      {"attn.wq_b.weight", "attn_q_b.weight"},
      {"attn.wkv.weight", "attn_kv.weight"},
      {"attn.wo_a.weight", "attn_output_a.weight"},
      {"attn.wo_b.weight", "attn_output_b.weight"},
      {"ffn.shared_experts.w1.weight", "ffn_gate_shexp.weight"},
      {"ffn.shared_experts.w2.weight", "ffn_down_shexp.weight"},
      {"ffn.shared_experts.w3.weight", "ffn_up_shexp.weight"},
  };
  if (auto it = parts.find(rest); it != parts.end()) return {blk + it->second, -1};
  // ffn.experts.E.wK.weight
  const int e = std::atoi(rest.c_str() + 12);
  const char w = rest[rest.find(".w", 12) + 2];
  return {blk + (w == '1'   ? "ffn_gate_exps.weight"
                 : w == '3' ? "ffn_up_exps.weight"
                            : "ffn_down_exps.weight"),
          e};
}

// The values of one official tensor inside its GGUF tensor, dequantized.
std::vector<float> GgufValues(const GgufFile& g, const std::string& name, size_t count) {
  const Slot slot = GgufSlot(name);
  const GgufTensorInfo* t = g.FindTensor(slot.gguf);
  EXPECT_NE(t, nullptr) << slot.gguf;
  if (!t) return {};
  const uint64_t row = t->ne[0];
  const uint64_t row_bytes = *RowBytes(t->type, row);
  const uint64_t first_row = slot.expert < 0 ? 0 : static_cast<uint64_t>(slot.expert) * t->ne[1];
  std::vector<float> v(count);
  for (uint64_t r = 0; r < count / row; ++r) {
    Status s = DequantizeRow(t->type, t->data + (first_row + r) * row_bytes, v.data() + r * row,
                             static_cast<int64_t>(row));
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  return v;
}

TEST(HfOfficialLayoutTest, F32ConversionEqualsThePlainDecode) {
  TempDir tmp("official_f32");
  Official o = WriteOfficial(tmp, "ck");
  ASSERT_EQ(o.fp4.size(), 5u * 8 * 3);
  auto r = Convert(tmp, o.dir, Ds4WeightScheme::kF32, false, "a.gguf");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tensors, 154u);
  auto g = GgufFile::Open((tmp.path() / "a.gguf").string());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  for (const auto& [name, ref] : o.reference) {
    SCOPED_TRACE(name);
    const GgufTensorInfo* t = g->FindTensor(GgufSlot(name).gguf);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, DType::kF32);
    std::vector<float> got = GgufValues(*g, name, ref.size());
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_EQ(std::memcmp(&got[i], &ref[i], 4), 0) << i << ": " << got[i] << " vs " << ref[i];
  }
}

TEST(HfOfficialLayoutTest, Mxfp4ExpertsAreKeptBitForBit) {
  TempDir tmp("official_mxfp4");
  Official o = WriteOfficial(tmp, "ck");
  auto r = Convert(tmp, o.dir, Ds4WeightScheme::kQ8_0, true, "m.gguf");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto q8 = Convert(tmp, o.dir, Ds4WeightScheme::kQ8_0, false, "q.gguf");
  ASSERT_TRUE(q8.ok()) << q8.status().ToString();
  auto g = GgufFile::Open((tmp.path() / "m.gguf").string());
  auto gq = GgufFile::Open((tmp.path() / "q.gguf").string());
  ASSERT_TRUE(g.ok() && gq.ok());
  for (const GgufTensorInfo& t : g->tensors()) {
    SCOPED_TRACE(t.name);
    const bool expert = t.name.ends_with("_exps.weight");
    const GgufTensorInfo* tq = gq->FindTensor(t.name);
    ASSERT_NE(tq, nullptr);
    if (expert) {
      EXPECT_EQ(t.type, DType::kMXFP4);
      EXPECT_EQ(tq->type, DType::kQ8_0);
    } else {  // everything else as the q8_0 scheme writes it
      EXPECT_EQ(t.type, tq->type);
      ASSERT_EQ(t.nbytes, tq->nbytes);
      EXPECT_EQ(std::memcmp(t.data, tq->data, t.nbytes), 0);
    }
  }
  for (const std::string& name : o.fp4) {
    SCOPED_TRACE(name);
    const std::vector<float>& ref = o.reference.at(name);
    std::vector<float> got = GgufValues(*g, name, ref.size());
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(got[i], ref[i]) << i;  // -0 == +0
  }
}

// The released config schema describes the same model: the file equals the one converted
// with hf-tiny-a's transformers-style config, byte for byte; the MTP expert is skipped.
TEST(HfOfficialLayoutTest, ReleasedConfigSchemaGivesTheSameFile) {
  TempDir tmp("official_released");
  Official a = WriteOfficial(tmp, "a/ck");
  Official b = WriteOfficial(tmp, "b/ck", {}, true);
  auto ra = Convert(tmp, a.dir, Ds4WeightScheme::kQ8_0, true, "a.gguf");
  ASSERT_TRUE(ra.ok()) << ra.status().ToString();
  auto rb = Convert(tmp, b.dir, Ds4WeightScheme::kQ8_0, true, "b.gguf");
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  bool skipped = false;
  for (const std::string& n : rb->notes) skipped |= n.find("mtp.0.ffn.experts.0.w1") != n.npos;
  EXPECT_TRUE(skipped);
  std::ifstream fa(tmp.path() / "a.gguf", std::ios::binary),
      fb(tmp.path() / "b.gguf", std::ios::binary);
  const std::string sa((std::istreambuf_iterator<char>(fa)), {});
  const std::string sb((std::istreambuf_iterator<char>(fb)), {});
  EXPECT_GT(sa.size(), 0u);
  EXPECT_TRUE(sa == sb) << sa.size() << " vs " << sb.size() << " bytes";
}

std::vector<float> Logits(const std::string& path, ActQuantMode aq, int* vocab) {
  ThreadPool pool(2);
  CpuBackend be(&pool);
  ModelOptions opts;
  opts.numerics = NumericsMode::kHf;
  opts.act_quant = aq;
  auto model = Model::Load(path, be, &opts);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return {};
  *vocab = static_cast<int>((*model)->config().n_vocab);
  std::vector<int32_t> prompt(20);
  for (int i = 0; i < 20; ++i) prompt[i] = (i * 389 + 17) % *vocab;
  auto state = (*model)->NewState(32);
  EXPECT_TRUE(state.ok());
  std::vector<float> logits(prompt.size() * size_t(*vocab));
  const Status st = (*model)->Forward(prompt, *state, LogitsFor::kAll, logits.data());
  EXPECT_TRUE(st.ok()) << st.ToString();
  return logits;
}

// The converted files run: MXFP4 experts (everything else f32) give the logits of the f32
// conversion of the same checkpoint up to the products' order (hf numerics, act-quant off).
TEST(HfOfficialLayoutTest, ConvertedFilesRunLikeTheF32Conversion) {
  TempDir tmp("official_run");
  Official o = WriteOfficial(tmp, "ck", {}, false, true);
  ASSERT_TRUE(Convert(tmp, o.dir, Ds4WeightScheme::kF32, false, "f.gguf").ok());
  ASSERT_TRUE(Convert(tmp, o.dir, Ds4WeightScheme::kF32, true, "m.gguf").ok());
  ASSERT_TRUE(Convert(tmp, o.dir, Ds4WeightScheme::kQ8_0, true, "q.gguf").ok());
  int va = 0, vb = 0, vc = 0;
  const auto a = Logits((tmp.path() / "f.gguf").string(), ActQuantMode::kOff, &va);
  const auto b = Logits((tmp.path() / "m.gguf").string(), ActQuantMode::kOff, &vb);
  const auto c = Logits((tmp.path() / "q.gguf").string(), ActQuantMode::kQ8, &vc);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), c.size());
  ASSERT_FALSE(a.empty());
  double amax = 0.0, dmax = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(std::isfinite(a[i]) && std::isfinite(b[i]) && std::isfinite(c[i])) << i;
    amax = std::max(amax, double(std::fabs(a[i])));
    dmax = std::max(dmax, double(std::fabs(a[i] - b[i])));
  }
  EXPECT_GT(amax, 0.1);
  EXPECT_LE(dmax, 1e-4 * amax) << "max |d| " << dmax << " of max |logit| " << amax;
}

// Requantizing (here to Q8_0, one expert at a time) gives exactly QuantizeRow of the decode.
TEST(HfOfficialLayoutTest, RequantizedExpertsAreTheQuantizedDecode) {
  TempDir tmp("official_q8");
  Official o = WriteOfficial(tmp, "ck");
  auto r = Convert(tmp, o.dir, Ds4WeightScheme::kQ8_0, false, "q.gguf");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto g = GgufFile::Open((tmp.path() / "q.gguf").string());
  ASSERT_TRUE(g.ok());
  for (const std::string& name : o.fp4) {
    SCOPED_TRACE(name);
    const Slot slot = GgufSlot(name);
    const GgufTensorInfo* t = g->FindTensor(slot.gguf);
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->type, DType::kQ8_0);
    const std::vector<float>& ref = o.reference.at(name);
    const uint64_t row = t->ne[0], row_bytes = *RowBytes(DType::kQ8_0, row);
    std::vector<uint8_t> want(row_bytes);
    for (uint64_t rr = 0; rr < t->ne[1]; ++rr) {
      ASSERT_TRUE(
          QuantizeRow(DType::kQ8_0, ref.data() + rr * row, want.data(), static_cast<int64_t>(row))
              .ok());
      const uint64_t at = (static_cast<uint64_t>(slot.expert) * t->ne[1] + rr) * row_bytes;
      ASSERT_EQ(std::memcmp(t->data + at, want.data(), row_bytes), 0) << "row " << rr;
    }
  }
}

// A damaged variant is refused with the tensor and the reason named.
void ExpectRefused(const std::string& tag, const Damage& d, const std::string& what,
                   bool keep_mxfp4 = false) {
  TempDir tmp(tag);
  Official o = WriteOfficial(tmp, "ck", d);
  auto r = Convert(tmp, o.dir, Ds4WeightScheme::kQ8_0, keep_mxfp4, "x.gguf");
  ASSERT_FALSE(r.ok()) << tag;
  const std::string msg = r.status().ToString();
  EXPECT_NE(msg.find(d.tensor), std::string::npos) << msg;
  EXPECT_NE(msg.find(what), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(tmp.path() / "x.gguf")) << tag;
}

constexpr const char* kExpert = "layers.2.ffn.experts.5.w2.weight";  // [64, 32] -> I8 [64, 16]
constexpr const char* kProj = "layers.1.attn.wq_a.weight";           // [48, 64] FP8

TEST(HfOfficialLayoutTest, MissingScalesAreRefused) {
  Damage d{kExpert, nullptr, [](auto&, auto&, auto&, bool& drop) { drop = true; }};
  ExpectRefused("fp4_noscale", d, "has no scale tensor");
  Damage f{kProj, nullptr, [](auto&, auto&, auto&, bool& drop) { drop = true; }};
  ExpectRefused("fp8_noscale", f, "has no block scale");
}

TEST(HfOfficialLayoutTest, WrongScaleShapesAreRefused) {
  Damage d{kExpert, nullptr,
           [](auto&, std::vector<uint64_t>& shape, std::vector<uint8_t>& b, bool&) {
             shape = {32, 2};  // [64, 1] wanted
             b.resize(64);
           }};
  ExpectRefused("fp4_scaleshape", d, "expected [64, 1]");
  Damage f{kProj, nullptr, [](auto&, std::vector<uint64_t>& shape, std::vector<uint8_t>& b, bool&) {
             shape = {1, 2};
             b.resize(2);
           }};
  ExpectRefused("fp8_scaleshape", f, "expected [1, 1] (128x128 blocks)");
  Damage t{kExpert, nullptr, [](std::string& dtype, auto&, auto&, bool&) { dtype = "U8"; }};
  ExpectRefused("fp4_scaletype", t, "is U8, expected F8_E8M0");
}

TEST(HfOfficialLayoutTest, OddPackingIsRefused) {
  // 24 packed bytes a row: 48 values, not whole 32-value blocks.
  Damage d{kExpert,
           [](auto&, std::vector<uint64_t>& shape, std::vector<uint8_t>& b, bool&) {
             shape = {64, 24};
             b.resize(64 * 24);
           },
           nullptr};
  ExpectRefused("fp4_odd", d, "not a whole number of 32-value blocks");
  // Packed as if unpacked (I8 [64, 32]): the logical shape is twice the expected width.
  Damage w{kExpert,
           [](auto&, std::vector<uint64_t>& shape, std::vector<uint8_t>& b, bool&) {
             shape = {64, 32};
             b.resize(64 * 32);
           },
           nullptr};
  ExpectRefused("fp4_wide", w, "([64, 64] unpacked)");
}

TEST(HfOfficialLayoutTest, NanScaleIsRefusedAtWrite) {
  Damage d{kExpert, nullptr, [](auto&, auto&, std::vector<uint8_t>& b, bool&) { b[3] = 0xFF; }};
  ExpectRefused("fp4_nan", d, "E8M0 NaN");
  ExpectRefused("fp4_nan_keep", d, "E8M0 NaN", true);
}

TEST(HfOfficialLayoutTest, KeepingMxfp4NeedsFp4Experts) {
  TempDir tmp("official_plain_keep");
  auto r = Convert(tmp, testing::HfTinyDir(), Ds4WeightScheme::kQ8_0, true, "x.gguf");
  ASSERT_FALSE(r.ok());
  const std::string msg = r.status().ToString();
  EXPECT_NE(msg.find("blk.0.ffn_gate_exps.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.layers.0.ffn.experts.0.w1.weight"), std::string::npos) << msg;
}

}  // namespace
}  // namespace flashkv
