#include "model/model_weights.h"

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "model_test_util.h"

namespace flashkv {
namespace {

using testing::EditedDs4Tiny;
using testing::TensorEdit;

Status BindEdited(const std::vector<TensorEdit>& edits) {
  GgufFile f = EditedDs4Tiny(edits);
  auto c = ModelConfig::FromGguf(f);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  CpuBackend be(nullptr);
  return BindModelWeights(f, *c, be).status();
}

TEST(ModelWeightsTest, BindsDs4Tiny) {
  auto f = GgufFile::Open(testing::Ds4TinyPath());
  ASSERT_TRUE(f.ok());
  auto c = ModelConfig::FromGguf(*f);
  ASSERT_TRUE(c.ok());
  CpuBackend be(nullptr);
  auto w = BindModelWeights(*f, *c, be);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->layers.size(), 5u);
  EXPECT_EQ(w->layers[0].ffn_gate_exps.type, DType::kIQ2_XXS);
  EXPECT_EQ(w->layers[0].ffn_down_exps.type, DType::kQ2_K);
  EXPECT_TRUE(w->layers[0].ffn_gate_tid2eid.present());
  EXPECT_FALSE(w->layers[0].compressor_kv.present());
  EXPECT_TRUE(w->layers[2].indexer_q_b.present());
  EXPECT_TRUE(w->layers[3].compressor_kv.present());
  EXPECT_FALSE(w->layers[3].indexer_q_b.present());
  EXPECT_TRUE(w->layers[3].ffn_exp_probs_b.present());
  EXPECT_EQ(w->output.ne[1], 1024u);
}

TEST(ModelWeightsTest, MissingTensorIsNamed) {
  Status s = BindEdited({testing::DropTensor("blk.2.indexer.proj.weight")});
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("blk.2.indexer.proj.weight is missing"), std::string::npos)
      << s.message();
}

TEST(ModelWeightsTest, WrongShapeIsNamed) {
  Status s = BindEdited({testing::ReplaceTensor("blk.1.attn_q_a.weight", {256, 64}, DType::kQ8_0)});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("blk.1.attn_q_a.weight has shape [256, 64], expected [256, 128]"),
            std::string::npos)
      << s.message();
}

TEST(ModelWeightsTest, WrongTypeIsNamed) {
  // A norm must be f32.
  Status s = BindEdited({testing::ReplaceTensor("blk.4.ffn_norm.weight", {256}, DType::kF16)});
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("blk.4.ffn_norm.weight has type f16"), std::string::npos)
      << s.message();
}

TEST(ModelWeightsTest, HashTableEntriesMustNameExperts) {
  auto f = GgufFile::Open(testing::Ds4TinyPath());
  ASSERT_TRUE(f.ok());
  // Rebuild blk.1's table with expert id 8 (only 0..7 exist) in slot 0 of token 0.
  GgufWriter w = testing::CopyDs4Tiny({testing::DropTensor("blk.1.ffn_gate_tid2eid.weight")});
  const GgufTensorInfo* t = f->FindTensor("blk.1.ffn_gate_tid2eid.weight");
  std::vector<uint8_t> data(t->data, t->data + t->nbytes);
  const int32_t bad = 8;
  std::memcpy(data.data(), &bad, 4);
  ASSERT_TRUE(w.AddTensor(t->name, t->type, t->ne, data).ok());
  auto bytes = w.WriteToBytes();
  auto edited = GgufFile::FromBytes(std::move(*bytes));
  ASSERT_TRUE(edited.ok());
  auto c = ModelConfig::FromGguf(*edited);
  CpuBackend be(nullptr);
  Status s = BindModelWeights(*edited, *c, be).status();
  EXPECT_NE(s.message().find("blk.1.ffn_gate_tid2eid.weight: entry for token 0 slot 0 is expert 8"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace flashkv
