#include "model/model.h"

#include <cstring>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "model_test_util.h"

namespace flashkv {
namespace {

// 40 tokens through the small-window ds4-tiny (window 16, ratios 4 / 8, top-k 4): the
// window wraps, the ratio-8 layer closes 5 windows, the ratio-4 layers reach 10 rows and
// the indexer chooses 4 of them. (The integration tests repeat this on the full ds4-tiny
// with chunks 1, 7, 64 and 416 tokens through `flashkv logits`.)
std::vector<int32_t> Prompt() {
  std::vector<int32_t> t(40);
  for (int i = 0; i < 40; ++i) t[i] = (i * 389 + 17) % 1019;
  return t;
}

struct RunResult {
  std::vector<float> logits;  // [positions, vocab]
  std::vector<float> state;   // every KvState section, concatenated
};

RunResult RunChunked(const ModelOptions& opts, int chunk, int threads) {
  ThreadPool pool(threads);
  CpuBackend be(&pool);
  auto model = Model::Load(testing::SmallWindowDs4TinyPath(), be, &opts);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  const auto prompt = Prompt();
  auto state = (*model)->NewState(48);
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

// Prefill in chunks of 1 (token by token), 7 or all at once gives the same logits and the
// same KvState, bit for bit, in both numerics and with one or two threads.
TEST(ModelForwardTest, ChunkedPrefillIsBitIdentical) {
  const ModelOptions official{NumericsMode::kOfficial, ActQuantMode::kQ8};
  const RunResult whole = RunChunked(official, 0, 2);
  for (auto [chunk, threads] : {std::pair{1, 2}, std::pair{7, 1}}) {
    const RunResult r = RunChunked(official, chunk, threads);
    EXPECT_TRUE(BitEqual(whole.logits, r.logits)) << "official, chunk " << chunk;
    EXPECT_TRUE(BitEqual(whole.state, r.state)) << "official, chunk " << chunk;
  }
  const ModelOptions hf{NumericsMode::kHf, ActQuantMode::kOff};
  const RunResult hf_whole = RunChunked(hf, 0, 2);
  const RunResult hf_ones = RunChunked(hf, 1, 2);
  EXPECT_TRUE(BitEqual(hf_whole.logits, hf_ones.logits)) << "hf, chunk 1";
  EXPECT_TRUE(BitEqual(hf_whole.state, hf_ones.state)) << "hf, chunk 1";
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
