#include "convert/hf_config.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "safetensors_builder.h"

namespace flashkv {
namespace {

nlohmann::json FixtureConfig() {
  std::ifstream in(testing::HfTinyDir() + "/config.json");
  return nlohmann::json::parse(in);
}

Expected<HfModelConfig> Parse(const nlohmann::json& j) {
  return ParseHfConfig(j.dump());
}

TEST(HfConfigTest, ReadsHfTinyA) {
  auto cfg = LoadHfConfig(testing::HfTinyDir());
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  const Ds4Hparams& hp = cfg->hp;
  EXPECT_EQ(hp.n_layer, 5u);
  EXPECT_EQ(hp.n_embd, 64u);
  EXPECT_EQ(hp.n_vocab, 512u);
  EXPECT_EQ(hp.n_head, 4u);
  EXPECT_EQ(hp.head_dim, 32u);
  EXPECT_EQ(hp.n_rot, 8u);
  EXPECT_EQ(hp.q_lora_rank, 48u);
  EXPECT_EQ(hp.o_groups, 2u);
  EXPECT_EQ(hp.o_lora_rank, 16u);
  EXPECT_EQ(hp.n_swa, 8u);
  EXPECT_EQ(hp.n_indexer_head, 16u);
  EXPECT_EQ(hp.indexer_head_dim, 16u);
  EXPECT_EQ(hp.indexer_top_k, 4u);
  EXPECT_EQ(hp.n_expert, 8u);
  EXPECT_EQ(hp.n_expert_used, 2u);
  EXPECT_EQ(hp.n_ff_exp, 32u);
  EXPECT_EQ(hp.n_hash_layer, 2u);
  EXPECT_EQ(hp.compress_ratios, (std::vector<uint32_t>{0, 4, 8, 4, 8}));
  EXPECT_EQ(hp.swiglu_clamp, (std::vector<float>(5, 10.0f)));
  EXPECT_EQ(hp.rope_freq_base, 10000.0f);
  EXPECT_EQ(hp.compress_rope_freq_base, 160000.0f);
  EXPECT_EQ(hp.rope_scaling_factor, 16.0f);
  EXPECT_EQ(hp.rope_orig_ctx, 65536u);
  EXPECT_EQ(hp.yarn_beta_fast, 32.0f);
  EXPECT_EQ(hp.yarn_beta_slow, 1.0f);
  EXPECT_EQ(hp.expert_weights_scale, 1.5f);
  EXPECT_EQ(hp.rms_eps, 1e-6f);
  EXPECT_EQ(hp.hc_eps, 1e-6f);
  EXPECT_EQ(hp.n_hc, 4u);
  EXPECT_EQ(hp.hc_sinkhorn_iters, 20u);
  EXPECT_TRUE(hp.expert_weights_norm);
  EXPECT_EQ(hp.n_ctx_train, 1048576u);
  EXPECT_EQ(cfg->layer_types[1], "compressed_sparse_attention");
  EXPECT_TRUE(cfg->notes.empty());
}

TEST(HfConfigTest, LegacyFieldsAndDefaults) {
  nlohmann::json j = FixtureConfig();
  j.erase("layer_types");
  j.erase("mlp_layer_types");
  j.erase("partial_rotary_factor");
  j.erase("compress_rates");
  j["compress_ratios"] = {0, 0, 4, 128, 4, 0};  // trailing MTP entry is dropped
  j["num_hash_layers"] = 3;
  j["qk_rope_head_dim"] = 16;
  // Plain compress RoPE: written as YaRN factor 1 (the plain table).
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
  auto cfg = Parse(j);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->hp.compress_ratios, (std::vector<uint32_t>{0, 0, 4, 128, 4}));
  EXPECT_EQ(cfg->hp.n_hash_layer, 3u);
  EXPECT_EQ(cfg->hp.n_rot, 16u);
  EXPECT_EQ(cfg->hp.rope_scaling_factor, 1.0f);
  EXPECT_EQ(cfg->hp.rope_orig_ctx, 1048576u);
  EXPECT_EQ(cfg->hp.compress_rope_freq_base, 160000.0f);
  ASSERT_EQ(cfg->notes.size(), 1u);
  EXPECT_NE(cfg->notes[0].find("YaRN factor 1"), std::string::npos);
}

TEST(HfConfigTest, FlatYarnDictAndVProDefault) {
  nlohmann::json j = FixtureConfig();
  j.erase("layer_types");
  j["rope_parameters"] = {{"type", "yarn"},
                          {"factor", 4.0},
                          {"original_max_position_embeddings", 4096},
                          {"beta_fast", 16.0},
                          {"mscale", 1.0}};
  j["compress_rates"] = {{"compressed_sparse_attention", 4}, {"heavily_compressed_attention", 16}};
  auto cfg = Parse(j);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->hp.rope_scaling_factor, 4.0f);
  EXPECT_EQ(cfg->hp.rope_orig_ctx, 4096u);
  EXPECT_EQ(cfg->hp.yarn_beta_fast, 16.0f);
  EXPECT_EQ(cfg->hp.yarn_beta_slow, 1.0f);
  // transformers' default schedule when nothing says otherwise: HCA, HCA, HCA, CSA, HCA.
  EXPECT_EQ(cfg->hp.compress_ratios, (std::vector<uint32_t>{16, 16, 16, 4, 16}));
  ASSERT_FALSE(cfg->notes.empty());
  EXPECT_NE(cfg->notes[0].find("V4-Pro"), std::string::npos);
}

TEST(HfConfigTest, RejectsWhatDs4CannotExpress) {
  auto expect_error = [](nlohmann::json j, const std::string& needle) {
    auto cfg = Parse(j);
    ASSERT_FALSE(cfg.ok()) << needle;
    EXPECT_NE(cfg.status().message().find(needle), std::string::npos) << cfg.status().ToString();
  };
  nlohmann::json j = FixtureConfig();
  j["compress_rates"]["compressed_sparse_attention"] = 8;
  expect_error(j, "CSA compress rate 8");
  j = FixtureConfig();
  j["mlp_layer_types"] = {"hash_moe", "moe", "hash_moe", "moe", "moe"};
  expect_error(j, "layer 2 is hash-routed after a top-k layer");
  j = FixtureConfig();
  j["scoring_func"] = "softmax";
  expect_error(j, "scoring_func 'softmax'");
  j = FixtureConfig();
  j["num_key_value_heads"] = 2;
  expect_error(j, "head_count_kv is 2");
  j = FixtureConfig();
  j["layer_types"][3] = "full_attention";
  expect_error(j, "layer_types[3] = 'full_attention'");
  j = FixtureConfig();
  j["layer_types"].erase(4);
  expect_error(j, "4 layer types for 5 layers");
  j = FixtureConfig();
  j["hidden_size"] = "64";
  expect_error(j, "'hidden_size' must be a non-negative integer");
  j = FixtureConfig();
  j["rope_parameters"]["compress"]["rope_type"] = "llama3";
  expect_error(j, "compress RoPE type 'llama3'");
  j = FixtureConfig();
  j["model_type"] = "llama";
  expect_error(j, "model_type 'llama'");
  EXPECT_FALSE(ParseHfConfig("{nope").ok());
  EXPECT_EQ(LoadHfConfig("/nonexistent/dir").status().code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace flashkv
