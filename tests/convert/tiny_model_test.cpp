#include "convert/tiny_model.h"

#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "convert/ds4_layout.h"
#include "convert/vocab_fit.h"
#include "gguf/gguf_file.h"
#include "mini_tokenizer.h"
#include "safetensors_builder.h"
#include "tensor/half.h"
#include "tensor/quant.h"

namespace flashkv {
namespace {

// The tiny preset with a 1024-id vocabulary (the real 129280-row embedding is exercised by
// the integration test; here it would only make the test slow under ASan).
Ds4Hparams SmallVocabTiny() {
  Ds4Hparams hp = *TinyPresetHparams("tiny");
  hp.n_vocab = 1024;
  return hp;
}

std::vector<uint8_t> Build(const Ds4Hparams& hp, uint64_t seed) {
  testing::TempDir dir("tiny_vocab");
  testing::WriteMiniTokenizer(dir.path() / "tokenizer.json", 1100);
  auto vocab = LoadVocabFromTokenizerJson((dir.path() / "tokenizer.json").string());
  EXPECT_TRUE(vocab.ok());
  EXPECT_TRUE(FitVocabToModel(*vocab, hp.n_vocab, nullptr).ok());
  GgufWriter w;
  Status s = AddTinyModel(hp, *vocab, seed, "flashkv-tiny test", w);
  EXPECT_TRUE(s.ok()) << s.ToString();
  auto bytes = w.WriteToBytes();
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

// Built once for the suite: generation dominates the test time under ASan.
const std::vector<uint8_t>& Seed0() {
  static const std::vector<uint8_t> bytes = Build(SmallVocabTiny(), 0);
  return bytes;
}

uint64_t Fnv1a(const std::vector<uint8_t>& b) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t c : b) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

TEST(TinyModelTest, PresetsAreValidAndShapedForTests) {
  auto tiny = TinyPresetHparams("tiny");
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->n_vocab, 129280u);
  EXPECT_EQ(tiny->compress_ratios, (std::vector<uint32_t>{0, 0, 4, 16, 4, 16}));
  EXPECT_EQ(tiny->n_hash_layer, 3u);
  EXPECT_EQ(tiny->n_swa, 32u);
  EXPECT_EQ(tiny->indexer_top_k, 8u);
  EXPECT_EQ(tiny->n_embd % 256, 0u);                   // IQ2_XXS gate/up rows run along D
  EXPECT_EQ(tiny->n_ff_exp % 256, 0u);                 // Q2_K down rows run along F
  EXPECT_EQ((tiny->head_dim - tiny->n_rot) % 64, 0u);  // ds4's FP8 blocks of the no-RoPE part
  auto small = TinyPresetHparams("small");
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->n_layer, 8u);
  EXPECT_EQ(TinyPresetHparams("huge").status().code(), StatusCode::kInvalidArgument);
}

// Same seed, same bytes (pinned by hash: a change here changes every test built on the tiny
// model, so it must be deliberate); another seed changes the weights but not the layout.
TEST(TinyModelTest, DeterministicBytes) {
  const Ds4Hparams hp = SmallVocabTiny();
  const std::vector<uint8_t>& a = Seed0();
  std::vector<uint8_t> b = Build(hp, 0);
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b);
  std::vector<uint8_t> c = Build(hp, 1);
  ASSERT_EQ(a.size(), c.size());
  EXPECT_FALSE(a == c);
  EXPECT_EQ(Fnv1a(a), 6608351031335273707u)
      << "update the pinned hash only for a deliberate generator change";
}

TEST(TinyModelTest, HasDs4LayoutTypesAndKeys) {
  const Ds4Hparams hp = SmallVocabTiny();
  auto g = GgufFile::FromBytes(Seed0());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto back = ReadDs4Hparams(*g);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->compress_ratios, hp.compress_ratios);
  EXPECT_EQ(back->n_swa, 32u);
  EXPECT_EQ(*g->GetString("general.architecture"), "deepseek4");
  EXPECT_EQ(g->GetStringArray("tokenizer.ggml.tokens")->size(), 1024u);

  // Every key of the ds4-tiny fixture, with the same type.
  auto fixture = GgufFile::Open(std::string(FLASHKV_FIXTURES_DIR) + "/ds4-tiny/ds4-tiny.gguf");
  ASSERT_TRUE(fixture.ok());
  EXPECT_EQ(g->keys(), fixture->keys());
  for (const std::string& k : fixture->keys()) EXPECT_EQ(*g->TypeOf(k), *fixture->TypeOf(k)) << k;

  const std::vector<Ds4TensorSpec> layout = Ds4Layout(hp);
  ASSERT_EQ(g->tensors().size(), layout.size());
  EXPECT_EQ(layout.size(), 178u);
  for (size_t i = 0; i < layout.size(); ++i) {
    const GgufTensorInfo& t = g->tensors()[i];
    EXPECT_EQ(t.name, layout[i].name);
    EXPECT_EQ(t.ne, layout[i].ne);
    EXPECT_EQ(t.type, Ds4TensorType(layout[i], Ds4WeightScheme::kQ2)) << t.name;
  }
  EXPECT_EQ(g->FindTensor("blk.0.ffn_gate_exps.weight")->type, DType::kIQ2_XXS);
  EXPECT_EQ(g->FindTensor("blk.5.ffn_down_exps.weight")->type, DType::kQ2_K);
  EXPECT_EQ(g->FindTensor("blk.3.attn_compressor_ape.weight")->ne,
            (std::vector<uint64_t>{192, 16}));
  EXPECT_NE(g->FindTensor("blk.4.indexer.proj.weight"), nullptr);
  EXPECT_EQ(g->FindTensor("blk.3.indexer.proj.weight"), nullptr);
  EXPECT_NE(g->FindTensor("blk.2.ffn_gate_tid2eid.weight"), nullptr);
  EXPECT_EQ(g->FindTensor("blk.3.ffn_gate_tid2eid.weight"), nullptr);
  EXPECT_NE(g->FindTensor("blk.3.exp_probs_b.bias"), nullptr);
}

// Moments of the random weights: what keeps the random model's activations unit-sized.
TEST(TinyModelTest, WeightScalesMatchTheirRoles) {
  const Ds4Hparams hp = SmallVocabTiny();
  auto g = GgufFile::FromBytes(Seed0());
  ASSERT_TRUE(g.ok());
  auto stats = [&](const char* name, double* mean, double* sd) {
    const GgufTensorInfo* t = g->FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    const uint64_t row = t->ne[0];
    const uint64_t rows = t->nbytes / *RowBytes(t->type, row);
    std::vector<float> v(row);
    double s = 0, s2 = 0;
    for (uint64_t r = 0; r < rows; ++r) {
      ASSERT_TRUE(DequantizeRow(t->type, t->data + r * (*RowBytes(t->type, row)), v.data(),
                                static_cast<int64_t>(row))
                      .ok());
      for (float x : v) {
        ASSERT_TRUE(std::isfinite(x)) << name;
        s += x;
        s2 += double(x) * x;
      }
    }
    const double n = double(rows) * row;
    *mean = s / n;
    *sd = std::sqrt(s2 / n - *mean * *mean);
  };
  double m, sd;
  stats("token_embd.weight", &m, &sd);
  EXPECT_NEAR(m, 0.0, 0.01);
  EXPECT_NEAR(sd, 1.0, 0.02);
  stats("blk.0.attn_q_a.weight", &m, &sd);  // Q8_0 [256 -> 128]
  EXPECT_NEAR(sd, 1.0 / 16, 0.003);
  stats("blk.0.attn_q_b.weight", &m, &sd);  // fan-in 128
  EXPECT_NEAR(sd, 1.0 / std::sqrt(128.0), 0.004);
  stats("blk.0.hc_attn_fn.weight", &m, &sd);  // F16, fan-in n·D = 1024
  EXPECT_NEAR(sd, 1.0 / 32, 0.002);
  stats("blk.0.attn_norm.weight", &m, &sd);
  EXPECT_NEAR(m, 1.0, 0.05);
  EXPECT_NEAR(sd, 0.2, 0.04);
  stats("blk.0.ffn_gate_exps.weight", &m, &sd);  // IQ2_XXS
  EXPECT_NEAR(m, 0.0, 0.005);
  EXPECT_GT(sd, 0.03);
  EXPECT_LT(sd, 0.12);
  stats("blk.0.ffn_down_exps.weight", &m, &sd);  // Q2_K
  EXPECT_NEAR(m, 0.0, 0.01);
  EXPECT_GT(sd, 0.03);
  EXPECT_LT(sd, 0.12);

  const GgufTensorInfo* tid = g->FindTensor("blk.1.ffn_gate_tid2eid.weight");
  for (uint64_t v = 0; v < hp.n_vocab; ++v) {
    int32_t e[2];
    std::memcpy(e, tid->data + v * 8, 8);
    ASSERT_GE(e[0], 0);
    ASSERT_LT(e[0], 8);
    ASSERT_GE(e[1], 0);
    ASSERT_LT(e[1], 8);
    ASSERT_NE(e[0], e[1]) << v;
  }
  const GgufTensorInfo* scale = g->FindTensor("blk.2.hc_ffn_scale.weight");
  for (int i = 0; i < 3; ++i) {
    float x;
    std::memcpy(&x, scale->data + 4 * i, 4);
    EXPECT_GE(x, 0.5f);
    EXPECT_LT(x, 1.0f);
  }
}

}  // namespace
}  // namespace flashkv
