#include "convert/ds4_layout.h"

#include <fstream>

#include <gtest/gtest.h>

#include "convert/ds4_hparams.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/vocab.h"

namespace flashkv {
namespace {

std::string Ds4TinyPath() {
  return std::string(FLASHKV_FIXTURES_DIR) + "/ds4-tiny/ds4-tiny.gguf";
}

TEST(Ds4HparamsTest, ReadsTheFixture) {
  auto g = GgufFile::Open(Ds4TinyPath());
  ASSERT_TRUE(g.ok());
  auto hp = ReadDs4Hparams(*g);
  ASSERT_TRUE(hp.ok()) << hp.status().ToString();
  EXPECT_TRUE(hp->Validate().ok()) << hp->Validate().ToString();
  EXPECT_EQ(hp->n_layer, 5u);
  EXPECT_EQ(hp->n_embd, 256u);
  EXPECT_EQ(hp->head_dim, 192u);
  EXPECT_EQ(hp->n_rot, 64u);
  EXPECT_EQ(hp->n_hash_layer, 3u);
  EXPECT_EQ(hp->compress_ratios, (std::vector<uint32_t>{0, 0, 4, 128, 4}));
  EXPECT_EQ(hp->rope_scaling_factor, 16.0f);
  EXPECT_EQ(hp->rms_eps, 1e-6f);
  EXPECT_EQ(hp->n_hc_mix(), 24u);
}

TEST(Ds4HparamsTest, ValidateNamesTheProblem) {
  auto g = GgufFile::Open(Ds4TinyPath());
  Ds4Hparams hp = *ReadDs4Hparams(*g);
  Ds4Hparams bad = hp;
  bad.compress_ratios.pop_back();
  EXPECT_NE(bad.Validate().message().find("compress_ratios has 4 entries for 5 layers"),
            std::string::npos);
  bad = hp;
  bad.n_head_kv = 2;
  EXPECT_EQ(bad.Validate().code(), StatusCode::kUnsupported);
  bad = hp;
  bad.n_hash_layer = 6;
  EXPECT_NE(bad.Validate().message().find("hash_layer_count"), std::string::npos);
  bad = hp;
  bad.o_groups = 5;
  EXPECT_NE(bad.Validate().message().find("groups"), std::string::npos);
}

// Ds4Layout + the q2 scheme must list exactly the fixture's tensors (names, shapes, types,
// order), and WriteDs4Metadata + WriteVocabToGguf its keys: re-emitting the fixture through
// them reproduces the file byte for byte.
TEST(Ds4LayoutTest, ReproducesDs4TinyExactly) {
  auto g = GgufFile::Open(Ds4TinyPath());
  ASSERT_TRUE(g.ok());
  Ds4Hparams hp = *ReadDs4Hparams(*g);
  std::vector<Ds4TensorSpec> layout = Ds4Layout(hp);
  ASSERT_EQ(layout.size(), g->tensors().size());
  for (size_t i = 0; i < layout.size(); ++i) {
    const GgufTensorInfo& t = g->tensors()[i];
    EXPECT_EQ(layout[i].name, t.name) << i;
    EXPECT_EQ(layout[i].ne, t.ne) << t.name;
    EXPECT_EQ(Ds4TensorType(layout[i], Ds4WeightScheme::kQ2), t.type) << t.name;
  }

  GgufWriter w;
  WriteDs4Metadata(hp, *g->GetString("general.name"), w);
  auto vocab = LoadVocabFromGguf(*g);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  WriteVocabToGguf(*vocab, w);
  for (const Ds4TensorSpec& s : layout) {
    const GgufTensorInfo* t = g->FindTensor(s.name);
    ASSERT_NE(t, nullptr);
    ASSERT_TRUE(w.AddTensor(s.name, Ds4TensorType(s, Ds4WeightScheme::kQ2), s.ne,
                            std::vector<uint8_t>(t->data, t->data + t->nbytes))
                    .ok());
  }
  EXPECT_EQ(w.key_count(), g->keys().size());
  auto bytes = w.WriteToBytes();
  ASSERT_TRUE(bytes.ok());
  std::ifstream in(Ds4TinyPath(), std::ios::binary);
  std::vector<uint8_t> orig((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes->size(), orig.size());
  EXPECT_TRUE(*bytes == orig);
}

TEST(Ds4LayoutTest, SchemesPickDs4Types) {
  Ds4TensorSpec proj{"blk.0.attn_q_a.weight", {256, 128}, Ds4Role::kProjection, 0, ""};
  Ds4TensorSpec odd{"blk.0.attn_q_b.weight", {48, 128}, Ds4Role::kProjection, 0, ""};
  Ds4TensorSpec dense{"token_embd.weight", {256, 1024}, Ds4Role::kDense, -1, ""};
  Ds4TensorSpec norm{"output_norm.weight", {256}, Ds4Role::kF32Vector, -1, ""};
  Ds4TensorSpec up{"blk.0.ffn_up_exps.weight", {256, 256, 8}, Ds4Role::kExpertGateUp, 0, ""};
  Ds4TensorSpec down{"blk.0.ffn_down_exps.weight", {256, 256, 8}, Ds4Role::kExpertDown, 0, ""};
  Ds4TensorSpec tid{"blk.0.ffn_gate_tid2eid.weight", {2, 1024}, Ds4Role::kTokenExperts, 0, ""};
  using S = Ds4WeightScheme;
  EXPECT_EQ(Ds4TensorType(proj, S::kF32), DType::kF32);
  EXPECT_EQ(Ds4TensorType(tid, S::kF32), DType::kI32);
  EXPECT_EQ(Ds4TensorType(proj, S::kF16), DType::kF16);
  EXPECT_EQ(Ds4TensorType(norm, S::kF16), DType::kF32);
  EXPECT_EQ(Ds4TensorType(up, S::kF16), DType::kF16);
  EXPECT_EQ(Ds4TensorType(proj, S::kQ8_0), DType::kQ8_0);
  EXPECT_EQ(Ds4TensorType(dense, S::kQ8_0), DType::kF16);
  EXPECT_EQ(Ds4TensorType(up, S::kQ8_0), DType::kQ8_0);
  EXPECT_EQ(Ds4TensorType(down, S::kQ8_0), DType::kQ8_0);
  EXPECT_EQ(Ds4TensorType(up, S::kQ2), DType::kIQ2_XXS);
  EXPECT_EQ(Ds4TensorType(down, S::kQ2), DType::kQ2_K);
  bool fell_back = false;
  EXPECT_EQ(Ds4TensorType(odd, S::kQ8_0, &fell_back), DType::kF16);
  EXPECT_TRUE(fell_back);
  EXPECT_EQ(*ParseDs4WeightScheme("q8_0"), S::kQ8_0);
  EXPECT_FALSE(ParseDs4WeightScheme("q4").ok());
  EXPECT_EQ(Ds4WeightSchemeName(S::kF16), "f16");
}

}  // namespace
}  // namespace flashkv
