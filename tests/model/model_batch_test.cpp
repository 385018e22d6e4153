// Model::ForwardBatch on the CPU: a session's logits, greedy tokens and every KV section are
// the same bits whether it runs alone or in a step with 1..8 other sessions at other positions
// (decode rows crossing compressor / indexer window boundaries and wrapping the window) and
// with another session's prefill chunks in the same steps; and a bad chunk runs nothing.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "batch_scenario.h"
#include "convert/hf_converter.h"
#include "model_test_util.h"
#include "util/thread_pool.h"

namespace flashkv {
namespace {

using testing::RunAlone;
using testing::RunBatched;
using testing::SessionPlan;
using testing::SessionRun;

constexpr int kCtx = 64;

// hf-tiny-a (window 8, ratios 4 / 8, indexer top-k 4) converted once per process; kQ8_0
// makes the q8 activation path reachable (its F32 weights always take fp32 activations).
std::string HfTinyA(Ds4WeightScheme scheme) {
  const std::string out =
      testing::ProcessTmpPath(std::string("batch-hf-tiny-a-") +
                              (scheme == Ds4WeightScheme::kF32 ? "f32" : "q8_0") + ".gguf");
  static std::vector<std::string> made;
  if (std::find(made.begin(), made.end(), out) != made.end()) return out;
  std::filesystem::create_directories(std::filesystem::path(out).parent_path());
  ConvertOptions o;
  o.hf_dir = testing::FixturePath("hf-tiny-a");
  o.out_path = out;
  o.tokenizer_path = std::string(FLASHKV_SOURCE_DIR) + "/models/tokenizer/tokenizer.json";
  o.scheme = scheme;
  o.show_progress = false;
  auto r = ConvertHfCheckpoint(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  made.push_back(out);
  return out;
}

enum class TinyModel { kDs4SmallWindow, kDs4Full, kHfTinyAF32, kHfTinyAQ8_0 };

struct BatchCase {
  const char* name;  // gtest parameter name
  TinyModel model;
  ModelOptions options;
  size_t fewest_others;  // batches with fewest_others … 8 others
};

std::string PathOf(TinyModel m) {
  switch (m) {
    case TinyModel::kDs4SmallWindow:
      return testing::SmallWindowDs4TinyPath();
    case TinyModel::kDs4Full:
      return testing::Ds4TinyPath();
    case TinyModel::kHfTinyAF32:
      return HfTinyA(Ds4WeightScheme::kF32);
    case TinyModel::kHfTinyAQ8_0:
      return HfTinyA(Ds4WeightScheme::kQ8_0);
  }
  return {};
}

class ModelBatchTest : public ::testing::Test {
 protected:
  ThreadPool pool_{2};
  CpuBackend be_{&pool_};
};

class ModelBatchCaseTest : public ModelBatchTest,
                           public ::testing::WithParamInterface<BatchCase> {};

// Target + prefill session + the first n others, in one step sequence, for n = fewest_others …
// 8; a 33-token prefill chunk beside all of them (42 rows share the products); all of them in
// the reverse order. Every session of every batch equals its run alone.
TEST_P(ModelBatchCaseTest, SessionsAreBitIdenticalAloneAndBatched) {
  const BatchCase& k = GetParam();
  auto model = Model::Load(PathOf(k.model), be_, &k.options);
  ASSERT_TRUE(model.ok()) << k.name << ": " << model.status().ToString();
  Model& m = **model;
  const std::vector<SessionPlan> all = testing::BatchPlans(m.config().n_vocab);
  std::vector<SessionRun> alone;
  for (const SessionPlan& p : all) alone.push_back(RunAlone(m, p, kCtx));
  for (size_t n = k.fewest_others; n <= 8; ++n) {
    const std::vector<SessionPlan> plans(all.begin(), all.begin() + 2 + n);
    int max_rows = 0;
    const std::vector<SessionRun> batched = RunBatched(m, plans, kCtx, &max_rows);
    ASSERT_EQ(batched.size(), plans.size());
    EXPECT_EQ(max_rows, 8 + int(n));  // the prefill chunk of 7 beside n + 1 decode rows
    for (size_t i = 0; i < plans.size(); ++i) {
      testing::ExpectSameRun(alone[i], batched[i],
                             std::to_string(n) + " others, session " + std::to_string(i));
    }
  }
  // Only the prefill session (1) differs from `all`.
  const std::vector<SessionPlan> wide = testing::BatchPlans(m.config().n_vocab, 40, 33);
  int wide_rows = 0;
  const std::vector<SessionRun> wide_batched = RunBatched(m, wide, kCtx, &wide_rows);
  EXPECT_EQ(wide_rows, 33 + 9);
  for (size_t i = 0; i < wide.size(); ++i) {
    testing::ExpectSameRun(i == 1 ? RunAlone(m, wide[1], kCtx) : alone[i], wide_batched[i],
                           "33-token chunk, session " + std::to_string(i));
  }
  const std::vector<SessionPlan> reversed(all.rbegin(), all.rend());
  const std::vector<SessionRun> batched = RunBatched(m, reversed, kCtx);
  for (size_t i = 0; i < all.size(); ++i) {
    testing::ExpectSameRun(alone[i], batched[all.size() - 1 - i],
                           "reversed, session " + std::to_string(i));
  }
}

// ds4-tiny in both numerics and hf-tiny-a (whose shapes official numerics reject) with every
// batch size; the full ds4-tiny and hf-tiny-a's q8 path with 8 others only (CI's ASan run).
INSTANTIATE_TEST_SUITE_P(Models, ModelBatchCaseTest,
                         ::testing::Values(BatchCase{"ds4_tiny_official_q8",
                                                     TinyModel::kDs4SmallWindow,
                                                     {NumericsMode::kOfficial, ActQuantMode::kQ8},
                                                     1},
                                           BatchCase{"ds4_tiny_hf_off",
                                                     TinyModel::kDs4SmallWindow,
                                                     {NumericsMode::kHf, ActQuantMode::kOff},
                                                     1},
                                           BatchCase{"hf_tiny_a_f32_hf_off",
                                                     TinyModel::kHfTinyAF32,
                                                     {NumericsMode::kHf, ActQuantMode::kOff},
                                                     1},
                                           BatchCase{"ds4_tiny_full_official_q8",
                                                     TinyModel::kDs4Full,
                                                     {NumericsMode::kOfficial, ActQuantMode::kQ8},
                                                     8},
                                           BatchCase{"hf_tiny_a_q8_0_hf_q8",
                                                     TinyModel::kHfTinyAQ8_0,
                                                     {NumericsMode::kHf, ActQuantMode::kQ8},
                                                     8}),
                         [](const ::testing::TestParamInfo<BatchCase>& info) {
                           return std::string(info.param.name);
                         });

// A single session through ForwardBatch is Forward.
TEST_F(ModelBatchTest, OneSessionBatchEqualsForward) {
  const ModelOptions o{NumericsMode::kOfficial, ActQuantMode::kQ8};
  auto model = Model::Load(testing::SmallWindowDs4TinyPath(), be_, &o);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const std::vector<SessionPlan> all = testing::BatchPlans((*model)->config().n_vocab);
  const SessionRun alone = RunAlone(**model, all[1], kCtx);
  const std::vector<SessionRun> one = RunBatched(**model, {all[1]}, kCtx);
  testing::ExpectSameRun(alone, one[0], "one session");
}

// A bad chunk anywhere in the step is reported with its index and nothing runs: the good
// sessions' states are untouched.
TEST_F(ModelBatchTest, RejectsABadChunkBeforeRunningAnything) {
  const ModelOptions o{NumericsMode::kHf, ActQuantMode::kOff};
  auto model = Model::Load(testing::SmallWindowDs4TinyPath(), be_, &o);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Model& m = **model;
  auto a = m.NewState(8);
  auto b = m.NewState(8);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<float> a0 = testing::ReadAllSections(*a);
  const std::vector<int32_t> good = {5, 6};
  const std::vector<int32_t> bad_id = {7, 1024};
  const std::vector<int32_t> too_long(9, 3);
  std::vector<float> logits(4 * 1024);
  auto expect_rejected = [&](std::vector<SessionChunk> step, StatusCode code,
                             const std::string& text) {
    const Status s = m.ForwardBatch(step);
    EXPECT_EQ(s.code(), code) << s.ToString();
    EXPECT_NE(s.ToString().find(text), std::string::npos) << s.ToString();
    EXPECT_EQ(a->n_tokens(), 0);
    EXPECT_TRUE(testing::SameBits(a0, testing::ReadAllSections(*a)));
  };
  expect_rejected({{good, &*a, LogitsFor::kAll, logits.data()},
                   {bad_id, &*b, LogitsFor::kAll, logits.data() + 2048}},
                  StatusCode::kInvalidArgument, "batch chunk 1");
  expect_rejected(
      {{good, &*a, LogitsFor::kLast, logits.data()}, {too_long, &*b, LogitsFor::kNone, nullptr}},
      StatusCode::kResourceExhausted, "exceed the context size");
  expect_rejected({{good, &*a, LogitsFor::kLast, logits.data()},
                   {good, &*a, LogitsFor::kLast, logits.data() + 1024}},
                  StatusCode::kInvalidArgument, "repeats the KvState");
  expect_rejected({{good, &*a, LogitsFor::kLast, logits.data()},
                   {good, nullptr, LogitsFor::kLast, logits.data() + 1024}},
                  StatusCode::kInvalidArgument, "has no KvState");
  expect_rejected(
      {{good, &*a, LogitsFor::kLast, logits.data()}, {good, &*b, LogitsFor::kLast, nullptr}},
      StatusCode::kInvalidArgument, "no buffer");
  // An empty step and empty chunks do nothing.
  EXPECT_TRUE(m.ForwardBatch({}).ok());
  const std::vector<SessionChunk> empty = {{{}, &*a, LogitsFor::kLast, nullptr}};
  EXPECT_TRUE(m.ForwardBatch(empty).ok());
  EXPECT_EQ(a->n_tokens(), 0);
}

}  // namespace
}  // namespace flashkv
