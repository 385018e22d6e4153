// The engine's evaluation options (engine/evaluation.h) on the real (tiny) model: every
// row's logits equal to Model::Forward's bit for bit, a decode of exact length that EOS
// does not end, a sampler that never picks EOS, a context filled to its last position, and
// a probe that rewinds the live session to the end of its prompt — what `flashkv logits`
// and `flashkv bench` ask of it.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "snapshot/snapshot_codec.h"
#include "tiny_engine_util.h"
#include "tokenizer/vocab.h"

namespace flashkv {
namespace {

using testing::RunNow;
using testing::Tiny;

constexpr int kVocab = 1024;

std::vector<int32_t> Ids(int n, int salt = 0) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back((i * 37 + 11 + salt * 101) % 1019);
  return ids;
}

EngineOptions Options(int ctx, int chunk = 7) {
  EngineOptions o;
  o.ctx_size = ctx;
  o.live_sessions = 1;
  o.prefill_chunk = chunk;
  o.max_batch = 1;
  return o;
}

// An ids-only request for every row's logits and an exact greedy decode of `n`, its last
// id evaluated too.
GenerationRequest Evaluate(std::vector<int32_t> ids, int n, std::vector<float>* rows) {
  GenerationRequest r;
  r.prompt_tokens = std::move(ids);
  r.output = OutputMode::kRaw;
  r.max_tokens = n;
  r.eval.prompt_logits = rows;
  r.eval.decode_logits = rows;
  r.eval.exact_length = true;
  r.eval.evaluate_last = true;
  return r;
}

// What the engine must reproduce: the prompt at once with every row's logits, then each
// greedy id (excluding `exclude`) fed alone. `ids` gets prompt + decoded ids.
std::vector<float> Reference(std::vector<int32_t>* ids, int n, int32_t exclude = -1) {
  Model& model = Tiny().model();
  auto state = model.NewState(int(ids->size()) + n);
  EXPECT_TRUE(state.ok());
  std::vector<float> rows((ids->size() + n) * size_t(kVocab));
  EXPECT_TRUE(model.Forward(*ids, *state, LogitsFor::kAll, rows.data()).ok());
  for (int i = 0; i < n; ++i) {
    const size_t prev = ids->size() - 1;
    const int32_t next = Sampler::Greedy(std::span(rows).subspan(prev * kVocab, kVocab), exclude);
    ids->push_back(next);
    EXPECT_TRUE(
        model.Forward({&next, 1}, *state, LogitsFor::kLast, rows.data() + (prev + 1) * kVocab)
            .ok());
  }
  return rows;
}

struct Fixture {
  Fixture(const EngineOptions& o, const Tokenizer& tok = *Tiny().tokenizer)
      : engine(Tiny().model(), tok, replay, metrics, o) {}
  ToolReplayMap replay;
  EngineMetrics metrics;
  Engine engine;
  const Session& session() const { return engine.sessions().at(0); }
};

TEST(EngineEvaluation, EveryRowsLogitsEqualForwardBitForBit) {
  const std::vector<int32_t> prompt = Ids(40);
  Fixture f(Options(64, /*chunk=*/7));
  std::vector<float> rows;
  auto out = RunNow(f.engine, Evaluate(prompt, 6, &rows));
  ASSERT_TRUE(out.result) << out.error.ToString();
  EXPECT_EQ(out.result->finish, FinishReason::kLength);
  EXPECT_EQ(out.result->timing.decode_tokens, 6);

  std::vector<int32_t> want_ids = prompt;
  const std::vector<float> want = Reference(&want_ids, 6);
  ASSERT_EQ(rows.size(), want.size());
  EXPECT_EQ(std::memcmp(rows.data(), want.data(), rows.size() * sizeof(float)), 0);
  EXPECT_EQ(out.result->ids, std::vector<int32_t>(want_ids.begin() + 40, want_ids.end()));
  // The last id was evaluated: nothing pending, the session's logits are the last row.
  EXPECT_EQ(f.session().tokens(), want_ids);
  EXPECT_TRUE(f.session().pending().empty());
  EXPECT_EQ(std::memcmp(f.session().logits().data(), want.data() + want.size() - kVocab,
                        kVocab * sizeof(float)),
            0);
}

// The rows the decode ids were sampled from: the prompt's last, then each fed id's (the
// last sampled id, left pending, has none).
TEST(EngineEvaluation, SampledRowsAreTheDistributionsEachIdCameFrom) {
  const std::vector<int32_t> prompt = Ids(30);
  Fixture f(Options(64));
  std::vector<float> sampled;
  GenerationRequest r = Evaluate(prompt, 5, nullptr);
  r.eval.evaluate_last = false;
  r.eval.sampled_logits = &sampled;
  auto out = RunNow(f.engine, r);
  ASSERT_TRUE(out.result) << out.error.ToString();
  std::vector<int32_t> ids = prompt;
  const std::vector<float> want = Reference(&ids, 5);
  ASSERT_EQ(sampled.size(), 5u * kVocab);
  EXPECT_EQ(std::memcmp(sampled.data(), want.data() + 29 * kVocab, sampled.size() * sizeof(float)),
            0);
  EXPECT_EQ(f.session().pending().size(), 1u);
  EXPECT_EQ(f.session().tokens().size(), 34u);
}

// A tokenizer whose EOS is the id the model picks greedily after `prompt`, so that a
// request's decode meets "EOS" at its first step.
Tokenizer TokenizerWithEos(int32_t eos) {
  auto gguf = GgufFile::Open(testing::TinyModelPath());
  EXPECT_TRUE(gguf.ok());
  auto vocab = LoadVocabFromGguf(*gguf);
  EXPECT_TRUE(vocab.ok());
  vocab->eos_id = eos;
  auto tok = Tokenizer::FromVocab(*vocab);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return std::move(*tok);
}

TEST(EngineEvaluation, ExactLengthGoesPastEosAndNeverEosSkipsIt) {
  const std::vector<int32_t> prompt = Ids(12);
  std::vector<int32_t> greedy = prompt;
  const std::vector<float> want = Reference(&greedy, 4);
  const int32_t eos = greedy[12];
  const Tokenizer tok = TokenizerWithEos(eos);
  ASSERT_EQ(tok.eos_id(), eos);

  {  // A reply stops at the EOS.
    Fixture f(Options(64), tok);
    auto out = RunNow(f.engine, testing::RawRequest(prompt, 4));
    ASSERT_TRUE(out.result) << out.error.ToString();
    EXPECT_EQ(out.result->finish, FinishReason::kStop);
    EXPECT_EQ(out.result->completion_tokens, 0);
  }
  {  // An exact decode feeds it on and runs its length.
    Fixture f(Options(64), tok);
    std::vector<float> rows;
    auto out = RunNow(f.engine, Evaluate(prompt, 4, &rows));
    ASSERT_TRUE(out.result) << out.error.ToString();
    EXPECT_EQ(out.result->finish, FinishReason::kLength);
    EXPECT_EQ(f.session().tokens(), greedy);
    EXPECT_TRUE(rows == want);
  }
  {  // never_eos: the best other id, every step.
    Fixture f(Options(64), tok);
    std::vector<float> rows;
    GenerationRequest r = Evaluate(prompt, 4, &rows);
    r.eval.never_eos = true;
    auto out = RunNow(f.engine, r);
    ASSERT_TRUE(out.result) << out.error.ToString();
    std::vector<int32_t> banned = prompt;
    const std::vector<float> want_banned = Reference(&banned, 4, eos);
    EXPECT_NE(banned[12], eos);
    EXPECT_EQ(f.session().tokens(), banned);
    EXPECT_TRUE(rows == want_banned);
  }
}

TEST(EngineEvaluation, ExactLengthMayFillTheContextAndZeroDecodesNothing) {
  const std::vector<int32_t> prompt = Ids(20);
  {  // prompt + 3 evaluated decode ids in a context of 23.
    Fixture f(Options(23));
    std::vector<float> rows;
    auto out = RunNow(f.engine, Evaluate(prompt, 3, &rows));
    ASSERT_TRUE(out.result) << out.error.ToString();
    EXPECT_EQ(f.session().tokens().size(), 23u);
    EXPECT_EQ(rows.size(), 23u * kVocab);
  }
  {  // Length 0 in a context the prompt fills: the prompt's rows only.
    Fixture f(Options(20));
    std::vector<float> rows;
    auto out = RunNow(f.engine, Evaluate(prompt, 0, &rows));
    ASSERT_TRUE(out.result) << out.error.ToString();
    EXPECT_EQ(out.result->timing.decode_tokens, 0);
    EXPECT_EQ(f.session().tokens(), prompt);
    std::vector<int32_t> ids = prompt;
    EXPECT_TRUE(rows == Reference(&ids, 0));
  }
  {  // One more than fits is refused before anything runs.
    Fixture f(Options(23));
    std::vector<float> rows;
    auto out = RunNow(f.engine, Evaluate(prompt, 4, &rows));
    ASSERT_FALSE(out.result);
    EXPECT_EQ(out.error.code(), StatusCode::kResourceExhausted) << out.error.ToString();
    EXPECT_TRUE(rows.empty());
  }
  {  // Without exact_length the rules stay a reply's: a prompt must leave a position free,
     // and max_tokens 0 means "to the context end" (with the last id left pending).
    Fixture f(Options(20));
    auto full = RunNow(f.engine, testing::RawRequest(prompt, 1));
    EXPECT_EQ(full.error.code(), StatusCode::kResourceExhausted);
    Fixture g(Options(24));
    auto out = RunNow(g.engine, testing::RawRequest(prompt, 0));
    ASSERT_TRUE(out.result) << out.error.ToString();
    EXPECT_EQ(out.result->timing.decode_tokens, 4);
    EXPECT_EQ(g.session().tokens().size(), 23u);
  }
  {  // So is an id outside the vocabulary, refused before any session is touched.
    Fixture f(Options(64));
    auto out = RunNow(f.engine, Evaluate({5, 1024}, 1, nullptr));
    EXPECT_EQ(out.error.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(out.error.message(), "token id 1024 at index 1 is outside the vocabulary (0..1023)");
    EXPECT_EQ(f.engine.sessions().size(), 0);
  }
  {  // A negative exact length is the caller's mistake.
    Fixture f(Options(64));
    auto out = RunNow(f.engine, Evaluate(prompt, -1, nullptr));
    EXPECT_EQ(out.error.code(), StatusCode::kInvalidArgument) << out.error.ToString();
  }
}

// The bench's frontier step: a probe decode, then the session is back at the end of the
// prompt, so the next request continues the prompt by its ids (a live token hit) exactly
// as an uninterrupted run would.
TEST(EngineEvaluation, RewindPutsTheSessionBackAtThePromptEnd) {
  const std::vector<int32_t> all = Ids(36);
  const std::vector<int32_t> first(all.begin(), all.begin() + 21);
  Fixture f(Options(64, /*chunk=*/5));

  std::vector<float> probe_rows;  // the decode's rows only
  GenerationRequest probe = Evaluate(first, 4, &probe_rows);
  probe.eval.prompt_logits = nullptr;
  probe.eval.rewind = true;
  auto p = RunNow(f.engine, probe);
  ASSERT_TRUE(p.result) << p.error.ToString();
  EXPECT_EQ(p.result->timing.decode_tokens, 4);
  EXPECT_EQ(f.session().tokens(), first);
  EXPECT_TRUE(f.session().pending().empty());
  const KvShape shape = Tiny().model().StateShape(64);
  EXPECT_EQ(p.result->rewind.snapshot_bytes, SnapshotFileBytes(shape, 21, kVocab, 0, {}));
  EXPECT_GE(p.result->rewind.save_ms, 0);
  EXPECT_GE(p.result->rewind.restore_ms, 0);
  std::vector<int32_t> fresh = first;
  const std::vector<float> fresh_rows = Reference(&fresh, 4);
  EXPECT_TRUE(probe_rows == std::vector<float>(fresh_rows.end() - 4 * kVocab, fresh_rows.end()));
  EXPECT_EQ(p.result->ids, std::vector<int32_t>(fresh.begin() + 21, fresh.end()));

  std::vector<float> rows;
  GenerationRequest next = Evaluate(all, 3, &rows);
  next.eval.rewind = true;
  auto n = RunNow(f.engine, next);
  ASSERT_TRUE(n.result) << n.error.ToString();
  EXPECT_EQ(n.result->cache.source, CacheSource::kLive);
  EXPECT_EQ(n.result->cache.cached_tokens, 21);
  EXPECT_EQ(n.result->timing.prefill_tokens, 15);
  // Rows for the 15 new ids and the 3 decode ids: a cold run's, bit for bit.
  std::vector<int32_t> cold = all;
  const std::vector<float> want = Reference(&cold, 3);
  ASSERT_EQ(rows.size(), (15u + 3u) * kVocab);
  EXPECT_EQ(std::memcmp(rows.data(), want.data() + 21 * kVocab, rows.size() * sizeof(float)), 0);
  EXPECT_EQ(f.session().tokens(), all);
}

}  // namespace
}  // namespace flashkv
