// The engine's batched path on the real (tiny) model: requests admitted at different steps
// share forward steps and still get exactly the tokens they get alone (greedy), a cancelled
// request disturbs no other, a long prompt arriving mid-stream is read in budgeted chunks
// while the others keep decoding one token a step (and in longer ones while nothing decodes),
// and admission stops at the live pool and at max_batch.
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/scheduler.h"
#include "tiny_engine_util.h"

namespace flashkv {
namespace {

using testing::ChatRequest;
using testing::Msg;
using testing::RunNow;
using testing::Tiny;

EngineOptions Options(int live, int chunk, int max_batch = 16) {
  EngineOptions o;
  o.ctx_size = 512;
  o.live_sessions = live;
  o.prefill_chunk = chunk;
  o.max_batch = max_batch;
  return o;
}

struct Fixture {
  explicit Fixture(const EngineOptions& o)
      : engine(Tiny().model(), *Tiny().tokenizer, replay, metrics, o) {}
  ToolReplayMap replay;
  EngineMetrics metrics;
  Engine engine;
};

// A chat request whose prompt grows with `words` (every prompt differs by `who`).
GenerationRequest Ask(int who, int words, int max_tokens) {
  std::string text = "Client " + std::to_string(who) + " asks:";
  for (int i = 0; i < words; ++i) text += " river" + std::to_string((who * 7 + i) % 13);
  return ChatRequest({Msg(ChatRole::kUser, text)}, max_tokens);
}

// What a request produced, collected between steps.
struct Client {
  explicit Client(GenerationRequest r) : h(std::make_unique<RequestHandle>(std::move(r))) {}
  std::unique_ptr<RequestHandle> h;
  std::shared_ptr<const GenerationResult> result;
  Status error;
  int prefill_events = 0;
  int deltas = 0;  // streamed pieces of the reply
  bool ended = false;
  void Poll() {
    while (auto ev = h->Next(std::chrono::milliseconds(0))) {
      if (ev->kind == GenerationEvent::Kind::kPrefill) ++prefill_events;
      if (ev->kind == GenerationEvent::Kind::kChat || ev->kind == GenerationEvent::Kind::kText) {
        ++deltas;
      }
      if (ev->kind == GenerationEvent::Kind::kDone) result = ev->result;
      if (ev->kind == GenerationEvent::Kind::kError) error = ev->error;
      if (ev->kind == GenerationEvent::Kind::kDone || ev->kind == GenerationEvent::Kind::kError) {
        ended = true;
      }
    }
  }
};

std::shared_ptr<const GenerationResult> Alone(const GenerationRequest& r, int chunk) {
  Fixture solo(Options(1, chunk));
  return RunNow(solo.engine, r).result;
}

// The live session a running request holds (the only one in use when it runs alone).
int InUseSlot(const Engine& e) {
  for (int i = 0; i < e.sessions().size(); ++i) {
    if (e.sessions().at(i).in_use()) return i;
  }
  return -1;
}

TEST(EngineBatchTest, RequestsArrivingAtDifferentStepsGetTheirAloneTokens) {
  const std::vector<GenerationRequest> reqs = {Ask(0, 2, 16), Ask(1, 20, 8), Ask(2, 45, 12),
                                               Ask(3, 8, 6)};
  const std::vector<int> arrive_at = {0, 1, 3, 5};  // steps
  Fixture f(Options(4, 16));
  std::vector<Client> clients;
  for (const auto& r : reqs) clients.emplace_back(r);
  int most = 0;
  for (int step = 0; step < 400; ++step) {
    for (size_t i = 0; i < clients.size(); ++i) {
      if (arrive_at[i] == step) {
        ASSERT_TRUE(f.engine.CanAdmit());
        f.engine.Admit(*clients[i].h);
      }
    }
    if (step > arrive_at.back() && f.engine.idle()) break;
    f.engine.Step();
    most = std::max<int>(most, int(f.metrics.Snapshot().last_step_sessions));
    for (Client& c : clients) c.Poll();
  }
  EXPECT_EQ(most, 4);  // every request shared at least one step with all the others
  for (size_t i = 0; i < clients.size(); ++i) {
    ASSERT_TRUE(clients[i].result) << i << ": " << clients[i].error.ToString();
    const auto alone = Alone(reqs[i], 16);
    ASSERT_TRUE(alone);
    EXPECT_EQ(clients[i].result->text, alone->text) << "request " << i;
    EXPECT_EQ(clients[i].result->completion_tokens, alone->completion_tokens) << "request " << i;
    EXPECT_EQ(clients[i].result->finish, alone->finish) << "request " << i;
  }
  const EngineStats s = f.metrics.Snapshot();
  EXPECT_EQ(s.requests_ok, 4u);
  EXPECT_GT(s.step_sessions, s.steps);  // batched: more sessions than steps
  EXPECT_GT(s.inter_token_gaps, 0u);
}

// Sampled requests (each with its seed): a step's rows pick side by side
// (Engine::PickDecodingRows), and each request still draws what it draws alone.
TEST(EngineBatchTest, SampledRequestsInOneStepDrawTheirAloneTokens) {
  std::vector<GenerationRequest> reqs;
  for (int who = 0; who < 6; ++who) {
    GenerationRequest r = Ask(10 + who, 3 + who, 12);
    r.sampling = SamplerOptions{1.0f, 0, who % 2 == 0 ? 0.95f : 1.0f, 0.0f, uint64_t(77 + who)};
    reqs.push_back(std::move(r));
  }
  Fixture f(Options(6, 64));
  std::vector<Client> clients;
  for (const auto& r : reqs) clients.emplace_back(r);
  for (Client& c : clients) {
    ASSERT_TRUE(f.engine.CanAdmit());
    f.engine.Admit(*c.h);
  }
  int most = 0;
  for (int step = 0; step < 400 && !f.engine.idle(); ++step) {
    f.engine.Step();
    most = std::max<int>(most, int(f.metrics.Snapshot().last_step_sessions));
    for (Client& c : clients) c.Poll();
  }
  EXPECT_EQ(most, 6);
  for (size_t i = 0; i < clients.size(); ++i) {
    ASSERT_TRUE(clients[i].result) << i << ": " << clients[i].error.ToString();
    const auto alone = Alone(reqs[i], 64);
    ASSERT_TRUE(alone);
    EXPECT_EQ(clients[i].result->ids, alone->ids) << "request " << i;
  }
}

TEST(EngineBatchTest, CancellingOneRequestInABatchDisturbsNoOther) {
  const std::vector<GenerationRequest> reqs = {Ask(4, 3, 14), Ask(5, 60, 10), Ask(6, 5, 14),
                                               Ask(7, 10, 12)};
  Fixture f(Options(4, 4));
  std::vector<Client> clients;
  for (const auto& r : reqs) clients.emplace_back(r);
  for (Client& c : clients) f.engine.Admit(*c.h);
  for (int step = 0; step < 600 && !f.engine.idle(); ++step) {
    if (step == 3) clients[1].h->Cancel();               // still reading its 60-word prompt
    if (clients[2].deltas == 2) clients[2].h->Cancel();  // decoding
    f.engine.Step();
    for (Client& c : clients) c.Poll();
  }
  ASSERT_TRUE(f.engine.idle());
  for (int i : {1, 2}) {
    ASSERT_TRUE(clients[size_t(i)].result) << i;
    EXPECT_EQ(clients[size_t(i)].result->finish, FinishReason::kCancelled) << i;
  }
  EXPECT_GT(clients[2].result->completion_tokens, 0);
  for (int i : {0, 3}) {
    ASSERT_TRUE(clients[size_t(i)].result) << i;
    const auto alone = Alone(reqs[size_t(i)], 4);
    EXPECT_EQ(clients[size_t(i)].result->text, alone->text) << "request " << i;
    EXPECT_EQ(clients[size_t(i)].result->finish, alone->finish) << "request " << i;
  }
  EXPECT_EQ(f.metrics.Snapshot().requests_cancelled, 2u);
  EXPECT_EQ(f.metrics.Snapshot().requests_ok, 2u);
  // The cancelled sessions stay usable: the prompt that was cut off continues from them.
  Client again(reqs[1]);
  f.engine.Run(*again.h);
  again.Poll();
  ASSERT_TRUE(again.result);
  EXPECT_EQ(again.result->cache.source, CacheSource::kLive);
  EXPECT_EQ(again.result->text, Alone(reqs[1], 4)->text);
}

TEST(EngineBatchTest, ALongPromptArrivingMidStreamLeavesTheOthersDecodingEveryStep) {
  const GenerationRequest streaming = Ask(8, 2, 60);
  const GenerationRequest long_prompt = Ask(9, 40, 4);
  Fixture f(Options(2, 8));
  Client a(streaming), b(long_prompt);
  f.engine.Admit(*a.h);
  while (a.deltas == 0 && !a.ended) {  // until a is decoding
    f.engine.Step();
    a.Poll();
  }
  const int slot_a = InUseSlot(f.engine);
  ASSERT_GE(slot_a, 0);
  f.engine.Admit(*b.h);
  int steps_reading = 0;
  while (!f.engine.idle()) {
    const size_t before = f.engine.sessions().at(slot_a).total_tokens();
    const int read_before = b.prefill_events;
    const bool a_streaming = !a.ended;
    f.engine.Step();
    a.Poll();
    b.Poll();
    if (b.prefill_events > read_before) {
      ++steps_reading;
      ASSERT_TRUE(a_streaming) << "the test wants a to outlast b's prompt";
      // One new token of `a` in every step that also read a chunk of `b`'s prompt.
      EXPECT_EQ(f.engine.sessions().at(slot_a).total_tokens(), before + 1);
    }
  }
  const int64_t prompt = int64_t(long_prompt.prompt_tokens.size());
  EXPECT_GE(steps_reading, int((prompt + 7) / 8) - 1);  // chunks of at most 8
  ASSERT_TRUE(a.result && b.result);
  EXPECT_EQ(a.result->text, Alone(streaming, 8)->text);
  EXPECT_EQ(b.result->text, Alone(long_prompt, 8)->text);
}

// EngineOptions::prefill_chunk_solo: a prompt read while nothing decodes takes chunks of the
// solo size (fewer steps), one read beside a decoding stream the normal chunks; the tokens are
// those of any other chunking.
TEST(EngineBatchTest, APromptReadWhileNothingDecodesTakesTheSoloChunk) {
  const GenerationRequest streaming = Ask(8, 2, 60);
  const GenerationRequest long_prompt = Ask(9, 40, 4);
  const int64_t prompt = int64_t(long_prompt.prompt_tokens.size());
  ASSERT_GT(prompt, 64);
  EngineOptions o = Options(2, 8);
  o.prefill_chunk_solo = 32;
  // Runs the engine until idle; the steps that read a chunk of b's prompt.
  const auto steps_reading = [](Fixture& f, Client& b, Client* a) {
    int n = 0;
    while (!f.engine.idle()) {
      const int read_before = b.prefill_events;
      f.engine.Step();
      if (a != nullptr) a->Poll();
      b.Poll();
      n += b.prefill_events > read_before;
    }
    return n;
  };
  {
    Fixture f(o);
    Client b(long_prompt);
    f.engine.Admit(*b.h);
    EXPECT_EQ(steps_reading(f, b, nullptr), int((prompt + 31) / 32));
    ASSERT_TRUE(b.result) << b.error.ToString();
    EXPECT_EQ(b.result->text, Alone(long_prompt, 8)->text);
  }
  Fixture f(o);
  Client a(streaming), b(long_prompt);
  f.engine.Admit(*a.h);
  while (a.deltas == 0 && !a.ended) {  // until a is decoding
    f.engine.Step();
    a.Poll();
  }
  f.engine.Admit(*b.h);
  // Beside a's decode: chunks of 8.
  EXPECT_GE(steps_reading(f, b, &a), int((prompt + 7) / 8) - 1);
  ASSERT_TRUE(a.result && b.result);
  EXPECT_EQ(a.result->text, Alone(streaming, 8)->text);
  EXPECT_EQ(b.result->text, Alone(long_prompt, 8)->text);
}

TEST(EngineBatchTest, AdmissionStopsAtTheLivePoolAndAtMaxBatch) {
  for (const auto& [live, max_batch, admits] :
       std::vector<std::tuple<int, int, int>>{{1, 16, 1}, {2, 16, 2}, {4, 3, 3}, {4, 1, 1}}) {
    Fixture f(Options(live, 16, max_batch));
    std::vector<Client> clients;
    for (int i = 0; i < 5; ++i) clients.emplace_back(Ask(10 + i, 4, 3));
    int admitted = 0;
    while (admitted < 5 && f.engine.CanAdmit()) f.engine.Admit(*clients[size_t(admitted++)].h);
    EXPECT_EQ(admitted, admits) << "live " << live << " max_batch " << max_batch;
    // The rest get in as the first ones end, and every one still runs as if alone.
    while (admitted < 5 || !f.engine.idle()) {
      while (admitted < 5 && f.engine.CanAdmit()) f.engine.Admit(*clients[size_t(admitted++)].h);
      f.engine.Step();
      for (Client& c : clients) c.Poll();
      EXPECT_LE(int(f.metrics.Snapshot().last_step_sessions), admits);
    }
    for (size_t i = 0; i < clients.size(); ++i) {
      clients[i].Poll();
      ASSERT_TRUE(clients[i].result) << i << ": " << clients[i].error.ToString();
      EXPECT_EQ(clients[i].result->text, Alone(Ask(10 + int(i), 4, 3), 16)->text);
    }
  }
}

// Through the Scheduler (what `flashkv serve` runs): concurrent clients under a live pool of
// one session each get their alone result; they wait for the pool in the queue.
TEST(EngineBatchTest, SchedulerAdmitsConcurrentClientsIntoOneLiveSession) {
  constexpr int kClients = 3;
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < kClients; ++i) reqs.push_back(Ask(20 + i, 6, 5));
  Fixture f(Options(1, 16));
  Scheduler sched(f.engine, f.metrics);
  sched.Start();
  const std::vector<std::string> got = testing::RunConcurrently(sched, reqs);
  sched.Stop(true);
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(got[size_t(i)], Alone(reqs[size_t(i)], 16)->text);
  const EngineStats s = f.metrics.Snapshot();
  EXPECT_EQ(s.requests_ok, uint64_t(kClients));
  EXPECT_EQ(s.step_sessions, s.steps);  // one session a step: the pool holds one
  EXPECT_EQ(s.active_requests, 0);
  EXPECT_EQ(s.queue_depth, 0);
}

}  // namespace
}  // namespace flashkv
