// Hyperparameters from a model file are untrusted: each is range-checked with the key and
// the bounds in the error (which also keep every derived size an int holds in range),
// products are checked in 64 bits, and the memory a state or a chunk's scratch would take is
// refused with the numbers before it is allocated. (Issue 17: sliding_window 10,000,000 took 6.4 GB
// for a 3-token run, sinkhorn_iterations 0x7fffffff ran for minutes, a huge head_count overflowed
// q_dim() under UBSan.) The GGUFs are written here, from the random:tiny shape.
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "gguf/gguf_writer.h"
#include "model/activations.h"
#include "model/model_config.h"
#include "model/random_model.h"

namespace flashkv {
namespace {

ModelConfig TinyShape() {
  return RandomModelConfig(*ParseRandomModelSource("random:tiny"));
}

// Every deepseek4.* key FromGguf reads, from `c`; then `edit` overrides some.
GgufFile ConfigFile(const ModelConfig& c, const std::function<void(GgufWriter&)>& edit = {}) {
  GgufWriter w;
  auto k = [](const char* key) { return std::string("deepseek4.") + key; };
  w.SetString("general.architecture", "deepseek4");
  w.SetU32(k("block_count"), uint32_t(c.n_layer));
  w.SetU32(k("embedding_length"), uint32_t(c.n_embd));
  w.SetU32(k("vocab_size"), uint32_t(c.n_vocab));
  w.SetU32(k("attention.head_count"), uint32_t(c.n_head));
  w.SetU32(k("attention.head_count_kv"), uint32_t(c.n_head_kv));
  w.SetU32(k("attention.key_length"), uint32_t(c.head_dim));
  w.SetU32(k("attention.value_length"), uint32_t(c.head_dim));
  w.SetU32(k("rope.dimension_count"), uint32_t(c.n_rot));
  w.SetU32(k("attention.q_lora_rank"), uint32_t(c.q_lora_rank));
  w.SetU32(k("attention.output_lora_rank"), uint32_t(c.o_lora_rank));
  w.SetU32(k("attention.output_group_count"), uint32_t(c.n_out_group));
  w.SetU32(k("expert_count"), uint32_t(c.n_expert));
  w.SetU32(k("expert_used_count"), uint32_t(c.n_expert_used));
  w.SetU32(k("expert_feed_forward_length"), uint32_t(c.n_ff_exp));
  w.SetU32(k("expert_shared_count"), uint32_t(c.n_expert_shared));
  w.SetU32(k("hash_layer_count"), uint32_t(c.n_hash_layer));
  w.SetU32(k("attention.sliding_window"), uint32_t(c.n_swa));
  w.SetU32(k("attention.indexer.head_count"), uint32_t(c.indexer_heads));
  w.SetU32(k("attention.indexer.key_length"), uint32_t(c.indexer_head_dim));
  w.SetU32(k("attention.indexer.top_k"), uint32_t(c.indexer_top_k));
  w.SetU32(k("hyper_connection.count"), uint32_t(c.n_hc));
  w.SetU32(k("hyper_connection.sinkhorn_iterations"), uint32_t(c.hc_sinkhorn_iters));
  w.SetU64(k("context_length"), c.context_length);
  w.SetF32(k("rope.freq_base"), c.rope_freq_base);
  w.SetF32(k("attention.compress_rope_freq_base"), c.compress_rope_freq_base);
  w.SetF32(k("rope.scaling.factor"), c.rope_scaling_factor);
  w.SetU64(k("rope.scaling.original_context_length"), c.rope_orig_ctx);
  w.SetF32(k("rope.scaling.yarn_beta_fast"), c.yarn_beta_fast);
  w.SetF32(k("rope.scaling.yarn_beta_slow"), c.yarn_beta_slow);
  w.SetF32(k("attention.layer_norm_rms_epsilon"), c.rms_eps);
  w.SetF32(k("hyper_connection.epsilon"), c.hc_eps);
  w.SetF32(k("expert_weights_scale"), c.expert_weights_scale);
  w.SetBool(k("expert_weights_norm"), true);
  std::vector<int32_t> ratios(c.compress_ratios.begin(), c.compress_ratios.end());
  w.SetI32Array(k("attention.compress_ratios"), ratios);
  w.SetF32Array(k("swiglu_clamp_exp"), c.swiglu_clamp);
  if (edit) edit(w);
  auto bytes = w.WriteToBytes();
  EXPECT_TRUE(bytes.ok());
  auto f = GgufFile::FromBytes(std::move(*bytes));
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return std::move(*f);
}

Status Load(const std::function<void(GgufWriter&)>& edit) {
  return ModelConfig::FromGguf(ConfigFile(TinyShape(), edit)).status();
}

TEST(ModelConfigRangesTest, TheWrittenShapeReadsBack) {
  const ModelConfig c = TinyShape();
  auto read = ModelConfig::FromGguf(ConfigFile(c));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->n_swa, c.n_swa);
  EXPECT_EQ(read->q_dim(), c.q_dim());
  EXPECT_EQ(read->compress_ratios, c.compress_ratios);
}

TEST(ModelConfigRangesTest, OutOfRangeValuesNameTheKeyAndTheBounds) {
  struct Case {
    std::function<void(GgufWriter&)> edit;
    const char* message;
  };
  const Case cases[] = {
      {[](GgufWriter& w) { w.SetU32("deepseek4.attention.sliding_window", 10000000); },
       "metadata deepseek4.attention.sliding_window = 10000000 is out of range (1..65536)"},
      {[](GgufWriter& w) { w.SetU32("deepseek4.attention.sliding_window", 120000000); },
       "metadata deepseek4.attention.sliding_window = 120000000 is out of range (1..65536)"},
      {[](GgufWriter& w) {
         w.SetU32("deepseek4.hyper_connection.sinkhorn_iterations", 0x7fffffff);
       },
       "metadata deepseek4.hyper_connection.sinkhorn_iterations = 2147483647 is out of range "
       "(1..1000)"},
      {[](GgufWriter& w) { w.SetU32("deepseek4.attention.head_count", 1u << 30); },
       "metadata deepseek4.attention.head_count = 1073741824 is out of range (1..1024)"},
      {[](GgufWriter& w) { w.SetU64("deepseek4.vocab_size", uint64_t(1) << 40); },
       "metadata deepseek4.vocab_size = 1099511627776 is out of range (1..16777216)"},
      {[](GgufWriter& w) { w.SetI32("deepseek4.block_count", -3); },
       "metadata deepseek4.block_count = -3 is out of range (1..4096)"},
      {[](GgufWriter& w) { w.SetU32("deepseek4.attention.indexer.top_k", 1u << 20); },
       "metadata deepseek4.attention.indexer.top_k = 1048576 is out of range (1..65536)"},
  };
  for (const Case& c : cases) {
    Status s = Load(c.edit);
    ASSERT_FALSE(s.ok()) << c.message;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), c.message);
  }
}

TEST(ModelConfigRangesTest, ProductsAreCheckedIn64Bits) {
  // Each factor in range, their product (an expert's weight matrix) past 2^31.
  Status s = Load([](GgufWriter& w) {
    w.SetU32("deepseek4.expert_feed_forward_length", 1u << 20);
    w.SetU32("deepseek4.embedding_length", 65536);
  });
  EXPECT_EQ(s.message(),
            "model shape: expert_feed_forward_length × embedding_length exceeds 2147483647");
  // The largest head shape the bounds allow fits: q_dim() is computed without overflow.
  auto big = ModelConfig::FromGguf(ConfigFile(TinyShape(), [](GgufWriter& w) {
    w.SetU32("deepseek4.attention.head_count", 1024);
    w.SetU32("deepseek4.attention.key_length", 65536);
    w.SetU32("deepseek4.attention.value_length", 65536);
    w.SetU32("deepseek4.attention.output_group_count", 2);
  }));
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(big->q_dim(), 1 << 26);
}

TEST(ModelConfigRangesTest, FloatsMustBeUsable) {
  ModelConfig c = TinyShape();
  ASSERT_TRUE(c.Validate().ok());
  c.swiglu_clamp[1] = std::numeric_limits<float>::infinity();
  EXPECT_NE(c.Validate().message().find("swiglu_clamp_exp[1]"), std::string::npos);
  c = TinyShape();
  c.rms_eps = 2;
  EXPECT_FALSE(c.Validate().ok());
  c = TinyShape();
  c.expert_weights_scale = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(c.Validate().ok());
  // Hand-built configs get the same integer bounds as files.
  c = TinyShape();
  c.n_swa = 10000000;
  EXPECT_EQ(c.Validate().message(),
            "attention.sliding_window = 10000000 is out of range (1..65536)");
  // DeepSeek-V4-Flash itself is well inside every bound.
  EXPECT_TRUE(RandomModelConfig(*ParseRandomModelSource("random:flash")).Validate().ok());
}

TEST(ModelConfigRangesTest, ScratchBeyondMemoryIsRefusedBeforeAllocating) {
  ThreadPool pool(1);
  CpuBackend be(&pool);
  const ModelConfig flash = RandomModelConfig(*ParseRandomModelSource("random:flash"));
  // 2^30 tokens per chunk of Flash's scratch: petabytes, refused with the numbers.
  auto a = Activations::Allocate(be, flash, 1 << 30, 1);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(a.status().message().find("activations for chunks of 1073741824 tokens needs "),
            std::string::npos)
      << a.status().message();
  EXPECT_NE(a.status().message().find("MiB of memory this machine has"), std::string::npos);
  // A real chunk is fine.
  EXPECT_TRUE(Activations::Allocate(be, TinyShape(), 16, 1).ok());
}

}  // namespace
}  // namespace flashkv
