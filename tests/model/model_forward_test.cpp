#include "model/model.h"

#include <cstring>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "model_test_util.h"

namespace flashkv {
namespace {

// 136 tokens: the window (128) wraps, the ratio-4 layers reach 34 rows (> top-k 16, so
// the indexer selects), the ratio-128 layer emits one row.
std::vector<int32_t> Prompt() {
  std::vector<int32_t> t(136);
  for (int i = 0; i < 136; ++i) t[i] = (i * 389 + 17) % 1019;
  return t;
}

struct RunResult {
  std::vector<float> logits;  // [positions, vocab]
  std::vector<float> state;   // every KvState section, concatenated
};

RunResult RunChunked(const ModelOptions& opts, int chunk, int threads) {
  ThreadPool pool(threads);
  CpuBackend be(&pool);
  auto model = Model::Load(testing::Ds4TinyPath(), be, &opts);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  const auto prompt = Prompt();
  auto state = (*model)->NewState(200);
  EXPECT_TRUE(state.ok());
  RunResult r;
  const int V = (*model)->config().n_vocab;
  r.logits.resize(prompt.size() * V + V);
  Status s = (*model)->Forward(prompt, *state, LogitsFor::kAll, r.logits.data(), chunk);
  EXPECT_TRUE(s.ok()) << s.ToString();
  // One decode step on top.
  const int32_t next = 7;
  s = (*model)->Forward({&next, 1}, *state, LogitsFor::kAll, r.logits.data() + prompt.size() * V);
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (int l = 0; l < (*model)->config().n_layer; ++l) {
    for (KvSection sec : {KvSection::kRaw, KvSection::kCompressed, KvSection::kCompressorKv,
                          KvSection::kCompressorScore, KvSection::kIndexerRows,
                          KvSection::kIndexerKv, KvSection::kIndexerScore}) {
      std::vector<float> v(state->SectionFloats(l, sec));
      EXPECT_TRUE(state->ReadSection(l, sec, v.data()).ok());
      r.state.insert(r.state.end(), v.begin(), v.end());
    }
  }
  return r;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Prefill in chunks of 1 (token by token), 7, 64 or all at once gives the same logits and
// the same KvState, bit for bit, in both numerics and with either thread count.
TEST(ModelForwardTest, ChunkedPrefillIsBitIdentical) {
  for (ModelOptions opts : {ModelOptions{NumericsMode::kOfficial, ActQuantMode::kQ8},
                            ModelOptions{NumericsMode::kHf, ActQuantMode::kOff}}) {
    const RunResult whole = RunChunked(opts, 0, 2);
    for (int chunk : {1, 7, 64}) {
      const RunResult r = RunChunked(opts, chunk, chunk == 7 ? 1 : 2);
      EXPECT_TRUE(BitEqual(whole.logits, r.logits)) << "chunk " << chunk;
      EXPECT_TRUE(BitEqual(whole.state, r.state)) << "chunk " << chunk;
    }
  }
}

TEST(ModelForwardTest, RejectsTokenIdsOutsideTheVocabulary) {
  CpuBackend be(nullptr);
  auto model = Model::Load(testing::Ds4TinyPath(), be);
  ASSERT_TRUE(model.ok());
  auto state = (*model)->NewState(8);
  ASSERT_TRUE(state.ok());
  const std::vector<int32_t> tokens = {5, 1024};
  Status s = (*model)->Forward(tokens, *state, LogitsFor::kNone, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("token id 1024 at index 1 is outside the vocabulary (0..1023)"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(state->n_tokens(), 0);
  const std::vector<int32_t> negative = {-3};
  EXPECT_FALSE((*model)->Forward(negative, *state, LogitsFor::kNone, nullptr).ok());
}

TEST(ModelForwardTest, RejectsContextOverflow) {
  CpuBackend be(nullptr);
  auto model = Model::Load(testing::Ds4TinyPath(), be);
  ASSERT_TRUE(model.ok());
  auto state = (*model)->NewState(2);
  ASSERT_TRUE(state.ok());
  const std::vector<int32_t> tokens = {1, 2, 3};
  EXPECT_EQ((*model)->Forward(tokens, *state, LogitsFor::kNone, nullptr).code(),
            StatusCode::kResourceExhausted);
}

TEST(ModelForwardTest, OfficialNumericsNeedCompatibleShapes) {
  // hf-tiny-like shapes (no-RoPE width 24) cannot run FP8 blocks of 64.
  ModelConfig c;
  c.head_dim = 32;
  c.n_rot = 8;
  c.n_layer = 1;
  c.compress_ratios = {0};
  Status s = CheckOfficialNumericsSupported(c);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("--numerics hf"), std::string::npos);
}

}  // namespace
}  // namespace flashkv
