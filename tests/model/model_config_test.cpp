#include "model/model_config.h"

#include <gtest/gtest.h>

#include "model/model_options.h"
#include "model_test_util.h"

namespace flashkv {
namespace {

using testing::Ds4TinyPath;
using testing::EditedDs4Tiny;

TEST(ModelConfigTest, ReadsDs4TinyMetadata) {
  auto file = GgufFile::Open(Ds4TinyPath());
  ASSERT_TRUE(file.ok());
  auto c = ModelConfig::FromGguf(*file);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->n_layer, 5);
  EXPECT_EQ(c->n_embd, 256);
  EXPECT_EQ(c->n_vocab, 1024);
  EXPECT_EQ(c->n_head, 4);
  EXPECT_EQ(c->head_dim, 192);
  EXPECT_EQ(c->n_rot, 64);
  EXPECT_EQ(c->n_nope(), 128);
  EXPECT_EQ(c->q_lora_rank, 128);
  EXPECT_EQ(c->o_lora_rank, 64);
  EXPECT_EQ(c->n_out_group, 2);
  EXPECT_EQ(c->group_in_dim(), 384);
  EXPECT_EQ(c->n_expert, 8);
  EXPECT_EQ(c->n_expert_used, 2);
  EXPECT_EQ(c->n_ff_exp, 256);
  EXPECT_EQ(c->n_hash_layer, 3);
  EXPECT_EQ(c->n_swa, 128);
  EXPECT_EQ(c->indexer_heads, 16);
  EXPECT_EQ(c->indexer_head_dim, 128);
  EXPECT_EQ(c->indexer_top_k, 16);
  EXPECT_EQ(c->n_hc, 4);
  EXPECT_EQ(c->hc_dim(), 1024);
  EXPECT_EQ(c->hc_mix_dim(), 24);
  EXPECT_EQ(c->compress_ratios, (std::vector<int>{0, 0, 4, 128, 4}));
  EXPECT_EQ(c->attention_kind(1), AttentionKind::kSliding);
  EXPECT_EQ(c->attention_kind(2), AttentionKind::kCompressed);
  EXPECT_EQ(c->attention_kind(3), AttentionKind::kHeavy);
  EXPECT_EQ(c->compress_width(2), 384);
  EXPECT_EQ(c->compress_width(3), 192);
  EXPECT_TRUE(c->is_hash_layer(2));
  EXPECT_FALSE(c->is_hash_layer(3));
  EXPECT_FLOAT_EQ(c->swiglu_limit(4), 10.0f);
  EXPECT_FLOAT_EQ(c->compress_rope_freq_base, 160000.0f);
  EXPECT_EQ(c->rope_orig_ctx, 65536u);
  EXPECT_EQ(c->compressed_capacity(3, 1000), 1000 / 128 + 2);
  // Real-layout files default to ds4's numerics.
  const ModelOptions o = DefaultModelOptions(*c);
  EXPECT_EQ(o.numerics, NumericsMode::kOfficial);
  EXPECT_EQ(o.act_quant, ActQuantMode::kQ8);
}

Status ConfigError(const std::function<void(GgufWriter&)>& meta) {
  GgufFile f = EditedDs4Tiny({}, meta);
  auto c = ModelConfig::FromGguf(f);
  return c.status();
}

TEST(ModelConfigTest, RejectsInconsistentMetadataNamingTheKey) {
  Status s = ConfigError([](GgufWriter& w) { w.SetU32("deepseek4.attention.value_length", 128); });
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("deepseek4.attention.value_length"), std::string::npos) << s.message();

  s = ConfigError([](GgufWriter& w) {
    w.SetI32Array("deepseek4.attention.compress_ratios", {0, 0, 4});
  });
  EXPECT_NE(s.message().find("deepseek4.attention.compress_ratios has 3 entries"),
            std::string::npos)
      << s.message();

  s = ConfigError([](GgufWriter& w) { w.SetU32("deepseek4.attention.output_group_count", 3); });
  EXPECT_NE(s.message().find("output_group_count"), std::string::npos) << s.message();

  s = ConfigError([](GgufWriter& w) { w.SetU32("deepseek4.expert_used_count", 9); });
  EXPECT_NE(s.message().find("expert_used_count"), std::string::npos) << s.message();

  s = ConfigError([](GgufWriter& w) { w.SetString("general.architecture", "llama"); });
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("llama"), std::string::npos) << s.message();
}

TEST(ModelConfigTest, MissingKeyIsNamed) {
  // Rebuild without one key: copy everything, then make a writer lacking it.
  auto bytes = testing::CopyDs4Tiny({}).WriteToBytes();
  ASSERT_TRUE(bytes.ok());
  // Replace the key's name in place with a same-length unknown key.
  const std::string key = "deepseek4.hash_layer_count";
  const std::string other = "deepseek4.hash_layer_cXunt";
  auto it = std::search(bytes->begin(), bytes->end(), key.begin(), key.end());
  ASSERT_NE(it, bytes->end());
  std::copy(other.begin(), other.end(), it);
  auto f = GgufFile::FromBytes(std::move(*bytes));
  ASSERT_TRUE(f.ok());
  auto c = ModelConfig::FromGguf(*f);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(key), std::string::npos) << c.status().message();
}

TEST(ModelOptionsTest, ParsesFlagsAndRejectsUnknownValues) {
  EXPECT_EQ(*ParseNumericsMode("hf"), NumericsMode::kHf);
  EXPECT_EQ(*ParseNumericsMode("official"), NumericsMode::kOfficial);
  EXPECT_FALSE(ParseNumericsMode("fast").ok());
  EXPECT_EQ(*ParseActQuantMode("off"), ActQuantMode::kOff);
  EXPECT_EQ(*ParseActQuantMode("q8"), ActQuantMode::kQ8);
  EXPECT_FALSE(ParseActQuantMode("q4").ok());
}

}  // namespace
}  // namespace flashkv
