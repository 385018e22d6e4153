// Logprobs (issue 32): the log-probability of each sampled token and its most likely
// alternatives are the log-softmax of the very logits row the engine sampled it from
// (EvaluationOptions::sampled_logits), and every one reaches the client through the events
// as well as the result.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/sampler.h"
#include "tiny_engine_util.h"

namespace flashkv {
namespace {

using testing::ChatRequest;
using testing::Msg;
using testing::RunNow;
using testing::Tiny;

constexpr int kVocab = 1024;

std::vector<double> LogSoftmax(std::span<const float> row) {
  double max = row[0];
  for (float x : row) max = std::max(max, double(x));
  double sum = 0;
  for (float x : row) sum += std::exp(double(x) - max);
  std::vector<double> out;
  for (float x : row) out.push_back(double(x) - max - std::log(sum));
  return out;
}

TEST(LogprobsTest, LogSoftmaxOfTheRowWithTheTopAlternatives) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
  const std::vector<double> want = LogSoftmax(logits);
  TokenLogprobs lp = LogprobsOf(logits, 4, 3);
  EXPECT_EQ(lp.id, 4);
  EXPECT_NEAR(lp.logprob, want[4], 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 1);  // equal logits: the lower id first
  EXPECT_EQ(lp.top[1].first, 3);
  EXPECT_EQ(lp.top[2].first, 0);
  for (const auto& [id, logprob] : lp.top) EXPECT_NEAR(logprob, want[size_t(id)], 1e-6);
  double mass = 0;
  for (double l : want) mass += std::exp(l);
  EXPECT_NEAR(mass, 1.0, 1e-9);
  EXPECT_TRUE(LogprobsOf(logits, 0, 0).top.empty());
  EXPECT_EQ(LogprobsOf(logits, 0, 50).top.size(), logits.size());
}

TEST(LogprobsTest, EachTokenMatchesTheLogitsItWasSampledFrom) {
  EngineOptions o;
  o.ctx_size = 256;
  o.live_sessions = 1;
  o.max_batch = 1;
  ToolReplayMap replay;
  EngineMetrics metrics;
  Engine engine(Tiny().model(), *Tiny().tokenizer, replay, metrics, o);

  GenerationRequest r = ChatRequest({Msg(ChatRole::kUser, "Count to five.")}, 12);
  r.sampling.temperature = 0.8f;  // sampled, not argmax: the pick need not be top[0]
  r.sampling.seed = 5;
  r.logprobs = 4;
  std::vector<float> rows;
  r.eval.sampled_logits = &rows;
  auto out = RunNow(engine, r);
  ASSERT_TRUE(out.result) << out.error.ToString();
  const GenerationResult& res = *out.result;
  ASSERT_FALSE(res.logprobs.empty());
  // One entry per sampled id but an ending EOS, each from its own row.
  const bool eos_end = !res.ids.empty() && res.ids.back() == Tiny().tokenizer->eos_id() &&
                       res.finish == FinishReason::kStop;
  ASSERT_EQ(res.logprobs.size(), res.ids.size() - (eos_end ? 1 : 0));
  ASSERT_EQ(rows.size(), res.ids.size() * size_t(kVocab));
  for (size_t i = 0; i < res.logprobs.size(); ++i) {
    const std::vector<double> want =
        LogSoftmax(std::span<const float>(rows).subspan(i * kVocab, kVocab));
    const TokenLogprob& t = res.logprobs[i];
    EXPECT_EQ(t.token, Tiny().tokenizer->TokenBytes(res.ids[i])) << i;
    EXPECT_NEAR(t.logprob, want[size_t(res.ids[i])], 1e-4) << i;
    ASSERT_EQ(t.top.size(), 4u);
    for (size_t k = 1; k < t.top.size(); ++k) EXPECT_GE(t.top[k - 1].second, t.top[k].second);
    const int32_t argmax =
        Sampler::Greedy(std::span<const float>(rows).subspan(i * kVocab, kVocab));
    EXPECT_EQ(t.top[0].first, Tiny().tokenizer->TokenBytes(argmax)) << i;
    EXPECT_NEAR(t.top[0].second, want[size_t(argmax)], 1e-4) << i;
    EXPECT_FALSE(t.reasoning);  // no thinking
  }
  // The events carry each entry once, in order (what a stream sends).
  size_t streamed = 0;
  for (const GenerationEvent& ev : out.events) {
    for (const TokenLogprob& t : ev.logprobs) {
      ASSERT_LT(streamed, res.logprobs.size());
      EXPECT_EQ(t.token, res.logprobs[streamed].token);
      EXPECT_EQ(t.logprob, res.logprobs[streamed].logprob);
      ++streamed;
    }
  }
  EXPECT_LE(streamed, res.logprobs.size());
  EXPECT_GT(streamed, 0u);
}

TEST(LogprobsTest, NoneUnlessAsked) {
  EngineOptions o;
  o.ctx_size = 256;
  o.live_sessions = 1;
  o.max_batch = 1;
  ToolReplayMap replay;
  EngineMetrics metrics;
  Engine engine(Tiny().model(), *Tiny().tokenizer, replay, metrics, o);
  auto out = RunNow(engine, ChatRequest({Msg(ChatRole::kUser, "Hi")}, 4));
  ASSERT_TRUE(out.result);
  EXPECT_TRUE(out.result->logprobs.empty());
}

// In thinking mode the reasoning tokens are marked, so the APIs can leave them out of the
// answer's logprobs.
TEST(LogprobsTest, ReasoningTokensAreMarked) {
  EngineOptions o;
  o.ctx_size = 256;
  o.live_sessions = 1;
  o.max_batch = 1;
  ToolReplayMap replay;
  EngineMetrics metrics;
  Engine engine(Tiny().model(), *Tiny().tokenizer, replay, metrics, o);
  GenerationRequest r = ChatRequest({Msg(ChatRole::kUser, "Hi")}, 6, ThinkingMode::kHigh);
  r.logprobs = 0;
  auto out = RunNow(engine, r);
  ASSERT_TRUE(out.result);
  ASSERT_FALSE(out.result->logprobs.empty());
  EXPECT_TRUE(out.result->logprobs[0].reasoning);  // the reasoning is open at the start
  int64_t marked = 0;
  for (const TokenLogprob& t : out.result->logprobs) marked += t.reasoning;
  EXPECT_EQ(marked, out.result->reasoning_tokens);
}

}  // namespace
}  // namespace flashkv
