// SpeculativeStep (engine/speculative.h) on ds4-tiny: greedy decoding through verify steps of
// 2 drafted tokens gives the plain greedy tokens and, after them, the plain run's state and
// next logits bit for bit — whether the drafts are right, partly wrong or wrong from their
// first token (each rejection puts the state back with a KvCheckpoint and appends the kept
// tokens again).
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "engine/speculative.h"
#include "model/model.h"
#include "state/kv_checkpoint.h"

namespace flashkv {
namespace {

constexpr int kDraft = 2;
constexpr int kTokens = 40;

std::string TinyPath() {
  return std::string(FLASHKV_FIXTURES_DIR) + "/ds4-tiny/ds4-tiny.gguf";
}

std::vector<int32_t> Prompt() {
  std::vector<int32_t> t(static_cast<size_t>(24));
  for (size_t i = 0; i < t.size(); ++i) t[i] = int32_t((i * 389 + 17) % 1019);
  return t;
}

class SpeculativeStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = Model::Load(TinyPath(), be_);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(*m);
    vocab_ = size_t(model_->config().n_vocab);
    // Plain greedy decoding: the reference tokens and the logits after the last of them.
    auto st = model_->NewState(256);
    ASSERT_TRUE(st.ok());
    std::vector<float> logits(vocab_);
    ASSERT_TRUE(model_->Forward(Prompt(), *st, LogitsFor::kLast, logits.data()).ok());
    for (int i = 0; i < kTokens + kDraft + 1; ++i) {
      ref_.push_back(Sampler::Greedy(logits));
      ASSERT_TRUE(model_->Forward({&ref_.back(), 1}, *st, LogitsFor::kLast, logits.data()).ok());
    }
  }

  // Greedy decoding through verify steps whose drafts come from `draft(at)` (the tokens
  // proposed to follow output position at − 1); returns the tokens and, through `next`, the
  // logits after appending the last one. `accepted` counts the kept drafted tokens.
  template <typename Drafter>
  std::vector<int32_t> Speculate(Drafter draft, std::vector<float>* next, int* accepted) {
    auto st = model_->NewState(256);
    EXPECT_TRUE(st.ok());
    auto cp = KvCheckpoint::Create(be_, st->shape(), kDraft + 1);
    EXPECT_TRUE(cp.ok());
    std::vector<float> logits(vocab_), rows;
    EXPECT_TRUE(model_->Forward(Prompt(), *st, LogitsFor::kLast, logits.data()).ok());
    Sampler sampler(SamplerOptions{});
    std::vector<int32_t> out{Sampler::Greedy(logits)};
    *accepted = 0;
    while (int(out.size()) < kTokens) {
      std::vector<DraftToken> d;
      for (int32_t id : draft(int(out.size()))) d.push_back({id, {{id, 1.0}}});
      auto v = SpeculativeStep(*model_, *st, *cp, sampler, out.back(), d, rows);
      EXPECT_TRUE(v.ok()) << v.status().ToString();
      if (!v.ok()) break;
      for (int i = 0; i < v->accepted; ++i) out.push_back(d[size_t(i)].id);
      out.push_back(v->next);
      *accepted += v->accepted;
      EXPECT_EQ(st->n_tokens(), int64_t(Prompt().size() + out.size() - 1));
    }
    next->assign(vocab_, 0.0f);
    EXPECT_TRUE(model_->Forward({&out.back(), 1}, *st, LogitsFor::kLast, next->data()).ok());
    return out;
  }

  // The plain run's logits after appending ref_[0 … n).
  std::vector<float> PlainLogitsAfter(size_t n) {
    auto st = model_->NewState(256);
    EXPECT_TRUE(st.ok());
    std::vector<int32_t> ids = Prompt();
    ids.insert(ids.end(), ref_.begin(), ref_.begin() + long(n));
    std::vector<float> logits(vocab_);
    EXPECT_TRUE(model_->Forward(ids, *st, LogitsFor::kLast, logits.data()).ok());
    return logits;
  }

  CpuBackend be_{nullptr};
  std::unique_ptr<Model> model_;
  size_t vocab_ = 0;
  std::vector<int32_t> ref_;
};

TEST_F(SpeculativeStepTest, GreedyOutputAndStateAreThePlainRunsWhateverTheDraft) {
  const int32_t wrong_base = 1000;
  for (int mode = 0; mode < 3; ++mode) {
    SCOPED_TRACE(::testing::Message() << "drafter " << mode);
    int step = 0;
    auto drafter = [&](int at) {
      std::vector<int32_t> d(ref_.begin() + at, ref_.begin() + at + kDraft);
      ++step;
      if (mode == 1 && step % 3 == 1) d[1] = (d[1] + 1) % 1024;  // second token wrong
      if (mode == 1 && step % 4 == 2) d[0] = (d[0] + 1) % 1024;  // first token wrong
      if (mode == 2) d = {wrong_base, wrong_base + 1};           // never right
      return d;
    };
    std::vector<float> next;
    int accepted = 0;
    const std::vector<int32_t> out = Speculate(drafter, &next, &accepted);
    ASSERT_GE(out.size(), size_t(kTokens));
    EXPECT_EQ(out, std::vector<int32_t>(ref_.begin(), ref_.begin() + long(out.size())));
    const std::vector<float> plain = PlainLogitsAfter(out.size());
    EXPECT_EQ(std::memcmp(next.data(), plain.data(), vocab_ * sizeof(float)), 0)
        << "the state after the speculative run is not the plain run's";
    const int all = kDraft * (int(out.size()) - 1) / (kDraft + 1);  // every draft kept
    if (mode == 0) {
      EXPECT_EQ(accepted, all);
    } else if (mode == 1) {
      EXPECT_GT(accepted, 0);
      EXPECT_LT(accepted, all);
    } else {
      EXPECT_EQ(accepted, 0);
    }
  }
}

TEST_F(SpeculativeStepTest, ADraftLongerThanTheCheckpointIsRefused) {
  auto st = model_->NewState(64);
  ASSERT_TRUE(st.ok());
  auto cp = KvCheckpoint::Create(be_, st->shape(), 2);
  ASSERT_TRUE(cp.ok());
  Sampler sampler(SamplerOptions{});
  std::vector<DraftToken> d{{1, {{1, 1.0}}}, {2, {{2, 1.0}}}};
  std::vector<float> rows;
  auto v = SpeculativeStep(*model_, *st, *cp, sampler, 5, d, rows);
  EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st->n_tokens(), 0);
}

}  // namespace
}  // namespace flashkv
