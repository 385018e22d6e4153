// A multi-session scenario for Model::ForwardBatch exactness (tests/model/model_batch_test.cpp
// on the CPU, tests/backend/cuda/cuda_batch_test.cpp on the GPU): each session is run alone
// (Model::Forward) and all of them together in shared steps (Model::ForwardBatch), and every
// session's logits, greedy tokens and KV sections must be the same bits both ways.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model/model.h"
#include "state/kv_state.h"

namespace flashkv::testing {

// One session: `head` prompt tokens fed alone (Forward) before the shared steps put it at
// its own position; the rest of the prompt fed in the steps in chunks of `chunk` tokens
// (logits for every row); then `decode` greedy tokens, one per step (logits for it).
struct SessionPlan {
  std::vector<int32_t> prompt;
  int head = 0;
  int chunk = 1;
  int decode = 0;
};

struct SessionRun {
  std::vector<float> logits;    // [prompt + decode, n_vocab]
  std::vector<int32_t> tokens;  // the greedy decode tokens
  std::vector<float> state;     // every KvState section of every layer, concatenated
};

inline std::vector<int32_t> BatchPrompt(int n, int seed, int n_vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = (i * 389 + seed * 131 + 17) % n_vocab;
  return t;
}

// The target (session 0) decodes 12 tokens from position 13 (through the small-window
// ds4-tiny's window of 16 and its ratio-4 / ratio-8 boundaries at 16, 20 and 24, with the
// indexer choosing; hf-tiny-a's window is 8); the prefill session (1) feeds `prefill` tokens
// from position 0 in chunks of `chunk` beside them, then decodes 4; the others (2 …) stand at
// 1 … 33 and decode 1 … 12 tokens, so the batch shrinks as they finish.
inline std::vector<SessionPlan> BatchPlans(int n_vocab, int prefill = 30, int chunk = 7) {
  std::vector<SessionPlan> p;
  auto add = [&](int len, int head, int step, int decode) {
    p.push_back(SessionPlan{BatchPrompt(len, int(p.size()), n_vocab), head, step, decode});
  };
  add(13, 13, 1, 12);
  add(prefill, 0, chunk, 4);
  const int heads[] = {1, 5, 8, 15, 16, 17, 31, 33};
  const int decodes[] = {12, 3, 7, 12, 1, 9, 12, 5};
  for (int i = 0; i < 8; ++i) add(heads[i], heads[i], 1, decodes[i]);
  return p;
}

inline std::vector<float> ReadAllSections(const KvState& st) {
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

inline int32_t Greedy(const float* row, int n_vocab) {
  return int32_t(std::max_element(row, row + n_vocab) - row);
}

// Where a session stands in the shared steps.
struct SessionCursor {
  const SessionPlan* plan;
  KvState state;
  SessionRun run;
  size_t fed = 0;   // prompt tokens fed
  int decoded = 0;  // decode tokens fed
  int32_t next = 0;

  bool done() const { return fed == plan->prompt.size() && decoded == plan->decode; }
  // This step's tokens, their logits rows and what to ask for.
  SessionChunk Chunk(int n_vocab) {
    SessionChunk c;
    c.state = &state;
    const size_t row = fed + size_t(decoded);
    c.logits = run.logits.data() + row * size_t(n_vocab);
    if (fed < plan->prompt.size()) {
      const size_t n = std::min(size_t(plan->chunk), plan->prompt.size() - fed);
      c.tokens = std::span<const int32_t>(plan->prompt.data() + fed, n);
      c.logits_for = LogitsFor::kAll;
    } else {
      next = Greedy(c.logits - n_vocab, n_vocab);
      c.tokens = std::span<const int32_t>(&next, 1);
      c.logits_for = LogitsFor::kLast;
    }
    return c;
  }
  void Advance(const SessionChunk& c) {
    if (c.logits_for == LogitsFor::kAll) {
      fed += c.tokens.size();
    } else {
      run.tokens.push_back(next);
      ++decoded;
    }
  }
};

inline SessionCursor StartSession(Model& m, const SessionPlan& p, int ctx) {
  auto st = m.NewState(ctx);
  EXPECT_TRUE(st.ok()) << st.status().ToString();
  SessionCursor c{&p, std::move(*st), {}, 0, 0, 0};
  const int V = m.config().n_vocab;
  c.run.logits.assign((p.prompt.size() + size_t(p.decode)) * V, 0.0f);
  if (p.head > 0) {
    const Status s = m.Forward(std::span<const int32_t>(p.prompt.data(), size_t(p.head)), c.state,
                               LogitsFor::kAll, c.run.logits.data());
    EXPECT_TRUE(s.ok()) << s.ToString();
    c.fed = size_t(p.head);
  }
  return c;
}

// The session alone: the same chunks and decode steps, each through Model::Forward.
inline SessionRun RunAlone(Model& m, const SessionPlan& p, int ctx) {
  SessionCursor c = StartSession(m, p, ctx);
  const int V = m.config().n_vocab;
  while (!c.done()) {
    const SessionChunk ch = c.Chunk(V);
    const Status s = m.Forward(ch.tokens, c.state, ch.logits_for, ch.logits);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) break;
    c.Advance(ch);
  }
  c.run.state = ReadAllSections(c.state);
  return std::move(c.run);
}

// All sessions together: each step one ForwardBatch over every unfinished session (a
// prefill chunk or one decode token each), until all are done; sessions leave as they finish.
inline std::vector<SessionRun> RunBatched(Model& m, const std::vector<SessionPlan>& plans, int ctx,
                                          int* max_rows = nullptr) {
  std::vector<SessionCursor> cs;
  cs.reserve(plans.size());
  for (const SessionPlan& p : plans) cs.push_back(StartSession(m, p, ctx));
  const int V = m.config().n_vocab;
  for (;;) {
    std::vector<SessionChunk> step;
    std::vector<SessionCursor*> who;
    int rows = 0;
    for (SessionCursor& c : cs) {
      if (c.done()) continue;
      step.push_back(c.Chunk(V));
      who.push_back(&c);
      rows += int(step.back().tokens.size());
    }
    if (step.empty()) break;
    if (max_rows != nullptr) *max_rows = std::max(*max_rows, rows);
    const Status s = m.ForwardBatch(step);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) break;
    for (size_t i = 0; i < step.size(); ++i) who[i]->Advance(step[i]);
  }
  std::vector<SessionRun> runs;
  for (SessionCursor& c : cs) {
    c.run.state = ReadAllSections(c.state);
    runs.push_back(std::move(c.run));
  }
  return runs;
}

inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

inline void ExpectSameRun(const SessionRun& alone, const SessionRun& batched,
                          const std::string& what) {
  EXPECT_TRUE(SameBits(alone.logits, batched.logits)) << what << ": logits";
  EXPECT_EQ(alone.tokens, batched.tokens) << what << ": greedy tokens";
  EXPECT_TRUE(SameBits(alone.state, batched.state)) << what << ": KV sections";
}

}  // namespace flashkv::testing
