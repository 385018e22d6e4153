// StepPlanner (rows per step: decode rows, prefill budget, admission, fair order, removal)
// and BatchRunner on ds4-tiny: streams arriving between steps, with a long prompt prefilled
// in budgeted chunks beside the others' decode and one stream cancelled mid-decode, each get
// the greedy tokens and the KV state of their run alone, bit for bit.
#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "engine/batch_runner.h"
#include "engine/step_planner.h"
#include "model/model.h"
#include "util/thread_pool.h"

namespace flashkv {
namespace {

std::string PlanString(std::span<const PlannedChunk> plan) {
  std::string s;
  for (const PlannedChunk& c : plan) {
    if (!s.empty()) s += ' ';
    s += std::to_string(c.id) + (c.prefill ? (c.last_prefill ? "P" : "p") : "d") +
         std::to_string(c.n_tokens);
  }
  return s;
}

TEST(StepPlannerTest, DecodeRowsFirstThenPrefillOldestFirstWithinTheBudget) {
  StepPlanner p({.max_active = 3, .prefill_budget = 8});
  ASSERT_TRUE(p.Add(1, 3).ok());
  ASSERT_TRUE(p.Add(2, 20).ok());
  ASSERT_TRUE(p.Add(3, 4).ok());
  ASSERT_TRUE(p.Add(4, 1).ok());  // waits: three slots
  EXPECT_EQ(PlanString(p.Next()), "1P3 2p5");
  EXPECT_EQ(p.active(), 3u);
  EXPECT_EQ(p.waiting(), 1u);
  p.Commit();
  EXPECT_EQ(PlanString(p.Next()), "1d1 2p8");
  p.Commit();
  EXPECT_EQ(PlanString(p.Next()), "1d1 2P7 3p1");  // 2 finishes its prompt, 3 starts
  p.Commit();
  EXPECT_EQ(p.prompt_left(2), 0);
  EXPECT_EQ(p.prompt_left(3), 3);
  EXPECT_EQ(PlanString(p.Next()), "1d1 2d1 3P3");
  p.Commit();
  // Stream 1 finishes: its slot goes to the waiting stream 4 at the next step.
  EXPECT_TRUE(p.Remove(1));
  EXPECT_EQ(PlanString(p.Next()), "2d1 3d1 4P1");
  p.Commit();
  EXPECT_EQ(PlanString(p.Next()), "2d1 3d1 4d1");
  p.Commit();
}

TEST(StepPlannerTest, RemovingAStreamChangesNoOtherRow) {
  StepPlanner p({.max_active = 4, .prefill_budget = 6});
  for (int64_t id = 1; id <= 3; ++id) ASSERT_TRUE(p.Add(id, 10).ok());
  EXPECT_EQ(PlanString(p.Next()), "1p6");
  p.Commit();
  // Cancelled between Next and Commit: its planned rows are not committed.
  EXPECT_EQ(PlanString(p.Next()), "1P4 2p2");
  EXPECT_TRUE(p.Remove(2));
  p.Commit();
  EXPECT_EQ(p.prompt_left(1), 0);
  EXPECT_EQ(p.prompt_left(2), -1);
  EXPECT_EQ(p.prompt_left(3), 10);
  EXPECT_EQ(PlanString(p.Next()), "1d1 3p6");
  p.Commit();
  EXPECT_FALSE(p.Remove(2));
  EXPECT_TRUE(p.Remove(3));  // mid-prompt
  EXPECT_EQ(PlanString(p.Next()), "1d1");
  p.Commit();
  EXPECT_TRUE(p.Remove(1));
  EXPECT_TRUE(p.empty());
  EXPECT_TRUE(p.Next().empty());
}

TEST(StepPlannerTest, RejectsRepeatedIdsAndEmptyPrompts) {
  StepPlanner p({.max_active = 1, .prefill_budget = 4});
  ASSERT_TRUE(p.Add(7, 2).ok());
  ASSERT_TRUE(p.Add(8, 2).ok());  // waiting
  EXPECT_EQ(p.Add(7, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.Add(8, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.Add(9, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.waiting(), 2u);  // admitted only by Next
  EXPECT_EQ(PlanString(p.Next()), "7P2");
  EXPECT_EQ(p.waiting(), 1u);
}

TEST(StepPlannerTest, RoundRobinPromptsShareTheBudgetInChunksOfAtMostMaxChunk) {
  StepPlanner p({.max_active = 4, .prefill_budget = 6, .max_chunk = 4, .round_robin = true});
  ASSERT_TRUE(p.Add(1, 10).ok());
  ASSERT_TRUE(p.Add(2, 10).ok());
  ASSERT_TRUE(p.Add(3, 3).ok());
  EXPECT_EQ(PlanString(p.Next()), "1p4 2p2");
  p.Commit();
  EXPECT_EQ(PlanString(p.Next()), "2p4 3p2");  // each step starts one prompt later
  p.Commit();
  EXPECT_EQ(PlanString(p.Next()), "3P1 1p4 2p1");
  p.Commit();
  EXPECT_EQ(PlanString(p.Next()), "3d1 2P3 1P2");
  p.Commit();
  EXPECT_EQ(PlanString(p.Next()), "1d1 2d1 3d1");
}

TEST(StepPlannerTest, AShortenedChunkLeavesTheRestOfThePromptForLaterSteps) {
  StepPlanner p({.max_active = 2, .prefill_budget = 8});
  ASSERT_TRUE(p.Add(1, 10).ok());
  EXPECT_EQ(PlanString(p.Next()), "1p8");
  EXPECT_FALSE(p.Shorten(1, 9));
  EXPECT_FALSE(p.Shorten(1, 0));
  EXPECT_FALSE(p.Shorten(2, 1));
  EXPECT_TRUE(p.Shorten(1, 3));
  p.Commit();
  EXPECT_EQ(p.prompt_left(1), 7);
  const auto plan = p.Next();
  EXPECT_EQ(PlanString(plan), "1P7");
  EXPECT_TRUE(p.Shorten(1, 5));
  EXPECT_EQ(PlanString(plan), "1p5");  // no longer the prompt's last chunk
  p.Commit();
  EXPECT_EQ(PlanString(p.Next()), "1P2");
  p.Commit();
  EXPECT_EQ(PlanString(p.Next()), "1d1");
}

TEST(StepPlannerTest, PromptsTakeTheSoloBudgetOnlyWhileNoStreamDecodes) {
  StepPlanner p({.max_active = 3, .prefill_budget = 4, .max_chunk = 4, .solo_budget = 10});
  ASSERT_TRUE(p.Add(1, 12).ok());
  EXPECT_EQ(PlanString(p.Next()), "1p10");  // alone: nobody's token waits behind the step
  p.Commit();
  ASSERT_TRUE(p.Add(2, 30).ok());
  EXPECT_EQ(PlanString(p.Next()), "1P2 2p8");  // two prompts, no decode row: they share it
  p.Commit();
  EXPECT_EQ(PlanString(p.Next()), "1d1 2p4");  // 1 decodes: the normal budget and chunk
  p.Commit();
  EXPECT_EQ(PlanString(p.Next()), "1d1 2p4");
  p.Commit();
  EXPECT_TRUE(p.Remove(1));
  EXPECT_EQ(PlanString(p.Next()), "2p10");  // alone again
  p.Commit();
  EXPECT_EQ(PlanString(p.Next()), "2P4");
  p.Commit();
  EXPECT_EQ(PlanString(p.Next()), "2d1");

  // A solo budget at most the budget changes nothing.
  StepPlanner q({.max_active = 2, .prefill_budget = 6, .solo_budget = 3});
  ASSERT_TRUE(q.Add(1, 8).ok());
  EXPECT_EQ(PlanString(q.Next()), "1p6");
}

// ---- BatchRunner on the model ----------------------------------------------------------

std::string Ds4Tiny() {
  return std::string(FLASHKV_FIXTURES_DIR) + "/ds4-tiny/ds4-tiny.gguf";
}

std::vector<int32_t> Prompt(int n, int seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = (i * 389 + seed * 131 + 17) % 1024;
  return t;
}

std::vector<float> AllSections(const KvState& st) {
  std::vector<float> all;
  for (int l = 0; l < int(st.shape().layers.size()); ++l) {
    for (KvSection sec : {KvSection::kRaw, KvSection::kCompressed, KvSection::kCompressorKv,
                          KvSection::kCompressorScore, KvSection::kIndexerRows,
                          KvSection::kIndexerKv, KvSection::kIndexerScore}) {
      const size_t at = all.size();
      all.resize(at + st.SectionFloats(l, sec));
      EXPECT_TRUE(st.ReadSection(l, sec, all.data() + at).ok());
    }
  }
  return all;
}

struct Solo {
  std::vector<int32_t> tokens;
  std::vector<float> state;
};

// The stream alone: its prompt at once, then greedy tokens one Forward each; the last token
// is not evaluated (as BatchRunner leaves it).
Solo RunSolo(Model& m, const std::vector<int32_t>& prompt, int n_new, int ctx) {
  auto st = m.NewState(ctx);
  EXPECT_TRUE(st.ok());
  std::vector<float> logits(size_t(m.config().n_vocab));
  Solo r;
  EXPECT_TRUE(m.Forward(prompt, *st, LogitsFor::kLast, logits.data()).ok());
  for (int i = 0; i < n_new; ++i) {
    const int32_t t = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    r.tokens.push_back(t);
    if (i + 1 < n_new) {
      EXPECT_TRUE(m.Forward({&t, 1}, *st, LogitsFor::kLast, logits.data()).ok());
    }
  }
  r.state = AllSections(*st);
  return r;
}

class BatchRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ModelOptions o{NumericsMode::kOfficial, ActQuantMode::kQ8};
    auto m = Model::Load(Ds4Tiny(), be_, &o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(*m);
  }
  ThreadPool pool_{2};
  CpuBackend be_{&pool_};
  std::unique_ptr<Model> model_;
};

// Five streams, three slots, a prefill budget of 16: stream 2's 70-token prompt is read in
// chunks beside the others' decode rows; streams 4 and 5 arrive after three steps; stream 3
// is cancelled after its fourth token. Every other stream gets its solo tokens and KV.
TEST_F(BatchRunnerTest, StreamsMatchTheirSoloRunsWithArrivalsAndACancel) {
  Model& m = *model_;
  const int ctx = 96;
  struct Spec {
    int prompt;
    int n_new;
  };
  const std::map<int64_t, Spec> specs = {
      {1, {9, 12}}, {2, {70, 6}}, {3, {20, 10}}, {4, {33, 8}}, {5, {5, 9}}};
  std::map<int64_t, std::vector<int32_t>> prompts;
  std::map<int64_t, KvState> states;
  std::map<int64_t, std::vector<int32_t>> got;
  for (const auto& [id, sp] : specs) {
    prompts[id] = Prompt(sp.prompt, int(id));
    auto st = m.NewState(ctx);
    ASSERT_TRUE(st.ok());
    states.emplace(id, std::move(*st));
  }
  BatchRunner runner(m, {.max_active = 3, .prefill_budget = 16});
  auto submit = [&](int64_t id) {
    BatchStream s;
    s.id = id;
    s.prompt = prompts[id];
    s.state = &states.at(id);
    s.max_new_tokens = specs.at(id).n_new;
    s.on_token = [&got, id](int32_t t) {
      got[id].push_back(t);
      return true;
    };
    ASSERT_TRUE(runner.Submit(std::move(s)).ok());
  };
  submit(1);
  submit(2);
  submit(3);
  int steps = 0;
  int max_sessions = 0;
  int mixed_steps = 0;  // prefill chunks beside decode rows
  bool cancelled = false;
  while (!runner.idle()) {
    ASSERT_TRUE(runner.Step().ok());
    ++steps;
    const BatchStepStats& st = runner.last_step();
    EXPECT_LE(st.prefill_tokens, 16);
    EXPECT_LE(st.sessions, 3);
    max_sessions = std::max(max_sessions, st.sessions);
    if (st.prefill_tokens > 0 && st.decode_rows > 0) ++mixed_steps;
    if (steps == 3) {
      submit(4);
      submit(5);
    }
    if (!cancelled && got[3].size() == 4) {
      EXPECT_TRUE(runner.Cancel(3));
      cancelled = true;
    }
    ASSERT_LT(steps, 200);
  }
  EXPECT_TRUE(cancelled);
  EXPECT_EQ(max_sessions, 3);
  EXPECT_GE(mixed_steps, 4);
  for (const auto& [id, sp] : specs) {
    const Solo solo = RunSolo(m, prompts[id], sp.n_new, ctx);
    if (id == 3) {
      ASSERT_EQ(got[3].size(), 4u);
      EXPECT_TRUE(std::equal(got[3].begin(), got[3].end(), solo.tokens.begin()));
      continue;
    }
    EXPECT_EQ(got[id], solo.tokens) << "stream " << id;
    const std::vector<float> kv = AllSections(states.at(id));
    EXPECT_TRUE(kv.size() == solo.state.size() &&
                std::memcmp(kv.data(), solo.state.data(), kv.size() * sizeof(float)) == 0)
        << "stream " << id << " KV";
  }
}

// A stream that stops itself (on_token false) leaves at once; the others are unaffected.
TEST_F(BatchRunnerTest, AStreamStopsOnItsCallback) {
  Model& m = *model_;
  auto a = m.NewState(64);
  auto b = m.NewState(64);
  ASSERT_TRUE(a.ok() && b.ok());
  BatchRunner runner(m, {.max_active = 4, .prefill_budget = 64});
  std::vector<int32_t> ta, tb;
  BatchStream sa{1, Prompt(12, 1), &*a, 10, {}, [&](int32_t t) {
                   ta.push_back(t);
                   return ta.size() < 2;
                 }};
  BatchStream sb{2, Prompt(7, 2), &*b, 5, {}, [&](int32_t t) {
                   tb.push_back(t);
                   return true;
                 }};
  ASSERT_TRUE(runner.Submit(std::move(sa)).ok());
  ASSERT_TRUE(runner.Submit(std::move(sb)).ok());
  while (!runner.idle()) ASSERT_TRUE(runner.Step().ok());
  EXPECT_EQ(ta.size(), 2u);
  EXPECT_EQ(tb, RunSolo(m, Prompt(7, 2), 5, 64).tokens);
  EXPECT_EQ(a->n_tokens(), 12 + 1);
}

TEST_F(BatchRunnerTest, SubmitRejectsBadStreams) {
  Model& m = *model_;
  auto a = m.NewState(16);
  ASSERT_TRUE(a.ok());
  BatchRunner runner(m, {});
  auto stream = [&](int64_t id, std::vector<int32_t> prompt, int n_new) {
    BatchStream s;
    s.id = id;
    s.prompt = std::move(prompt);
    s.state = &*a;
    s.max_new_tokens = n_new;
    return s;
  };
  EXPECT_EQ(runner.Submit(stream(1, {}, 2)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(runner.Submit(stream(1, {3}, 0)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(runner.Submit(stream(1, {3, 1024}, 2)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(runner.Submit(stream(1, Prompt(10, 1), 8)).code(), StatusCode::kResourceExhausted);
  BatchStream none = stream(1, {3}, 1);
  none.state = nullptr;
  EXPECT_EQ(runner.Submit(std::move(none)).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(runner.Submit(stream(1, {3}, 2)).ok());
  EXPECT_EQ(runner.Submit(stream(1, {4}, 2)).code(), StatusCode::kInvalidArgument);  // same id
  EXPECT_EQ(runner.Submit(stream(2, {4}, 2)).code(), StatusCode::kInvalidArgument);  // same KV
  EXPECT_EQ(runner.streams(), 1u);
  EXPECT_FALSE(runner.Cancel(9));
  EXPECT_TRUE(runner.Cancel(1));
  EXPECT_TRUE(runner.idle());
}

}  // namespace
}  // namespace flashkv
