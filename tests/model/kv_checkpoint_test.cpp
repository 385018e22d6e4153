// KvCheckpoint (state/kv_checkpoint.h) against the model that fills the state: a verify step
// of 3 tokens, put back, and the kept tokens appended again gives the state and the next
// logits of a run that only ever appended the kept tokens, bit for bit — across window wraps
// and window closes of both ratios of the small-window ds4-tiny (window 16, ratios 4 and 8).
#include "state/kv_checkpoint.h"

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "model_test_util.h"

namespace flashkv {
namespace {

constexpr int kVerify = 3;  // a draft of 2 plus the last sampled token

std::vector<int32_t> Ids(int n, int salt) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = (i * 389 + 17 + salt * 131) % 1019;
  return t;
}

std::vector<float> Sections(const KvState& s, int n_layer) {
  std::vector<float> out;
  for (int l = 0; l < n_layer; ++l) {
    for (KvSection sec : {KvSection::kRaw, KvSection::kCompressed, KvSection::kCompressorKv,
                          KvSection::kCompressorScore, KvSection::kIndexerRows,
                          KvSection::kIndexerKv, KvSection::kIndexerScore}) {
      std::vector<float> v(s.SectionFloats(l, sec));
      EXPECT_TRUE(s.ReadSection(l, sec, v.data()).ok());
      out.insert(out.end(), v.begin(), v.end());
    }
  }
  return out;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class KvCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = Model::Load(testing::SmallWindowDs4TinyPath(), be_);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(*m);
    vocab_ = model_->config().n_vocab;
  }
  // A state holding `ids`, and the logits of a next token `next` appended to it.
  KvState Run(const std::vector<int32_t>& ids, std::vector<float>* next_logits, int32_t next) {
    auto st = model_->NewState(64);
    EXPECT_TRUE(st.ok());
    if (!ids.empty()) {
      EXPECT_TRUE(model_->Forward(ids, *st, LogitsFor::kNone, nullptr).ok());
    }
    next_logits->assign(size_t(vocab_), 0.0f);
    EXPECT_TRUE(model_->Forward({&next, 1}, *st, LogitsFor::kLast, next_logits->data()).ok());
    return std::move(*st);
  }

  CpuBackend be_{nullptr};
  std::unique_ptr<Model> model_;
  int vocab_ = 0;
};

TEST_F(KvCheckpointTest, RestoreThenReplayEqualsTheKeptTokensAlone) {
  const int n_layer = model_->config().n_layer;
  const int32_t next = 5;
  // Prefix lengths whose 3 verify tokens cross the window's wrap (16) and ratio-4 / ratio-8
  // closes at every offset (kept to a few: the test runs under the sanitizers in CI too).
  for (int p : {0, 3, 6, 7, 13, 15, 22, 23, 31}) {
    const std::vector<int32_t> prefix = Ids(p, 1);
    const std::vector<int32_t> verify = Ids(kVerify, 2);
    for (int kept = 0; kept <= kVerify; ++kept) {
      SCOPED_TRACE(::testing::Message() << "prefix " << p << ", kept " << kept);
      auto st = model_->NewState(64);
      ASSERT_TRUE(st.ok());
      if (p > 0) {
        ASSERT_TRUE(model_->Forward(prefix, *st, LogitsFor::kNone, nullptr).ok());
      }
      auto cp = KvCheckpoint::Create(be_, st->shape(), kVerify);
      ASSERT_TRUE(cp.ok()) << cp.status().ToString();
      ASSERT_TRUE(cp->Capture(*st).ok());
      std::vector<float> rows(size_t(kVerify) * size_t(vocab_));
      ASSERT_TRUE(model_->Forward(verify, *st, LogitsFor::kAll, rows.data()).ok());
      ASSERT_TRUE(cp->Restore(*st).ok());
      EXPECT_EQ(st->n_tokens(), p);
      if (kept > 0) {
        ASSERT_TRUE(
            model_->Forward({verify.data(), size_t(kept)}, *st, LogitsFor::kNone, nullptr).ok());
      }
      std::vector<float> got(static_cast<size_t>(vocab_));
      ASSERT_TRUE(model_->Forward({&next, 1}, *st, LogitsFor::kLast, got.data()).ok());

      std::vector<int32_t> alone = prefix;
      alone.insert(alone.end(), verify.begin(), verify.begin() + kept);
      std::vector<float> want;
      KvState ref = Run(alone, &want, next);
      EXPECT_TRUE(BitEqual(Sections(*st, n_layer), Sections(ref, n_layer)));
      EXPECT_TRUE(BitEqual(got, want));
    }
  }
}

TEST_F(KvCheckpointTest, RefusesWhatItCannotPutBack) {
  auto st = model_->NewState(64);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(KvCheckpoint::Create(be_, st->shape(), 0).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(KvCheckpoint::Create(be_, st->shape(), st->shape().n_swa + 1).status().code(),
            StatusCode::kInvalidArgument);
  auto cp = KvCheckpoint::Create(be_, st->shape(), 2);
  ASSERT_TRUE(cp.ok());
  EXPECT_EQ(cp->Restore(*st).code(), StatusCode::kFailedPrecondition);  // nothing captured
  ASSERT_TRUE(cp->Capture(*st).ok());
  const std::vector<int32_t> three = Ids(3, 4);
  ASSERT_TRUE(model_->Forward(three, *st, LogitsFor::kNone, nullptr).ok());
  const Status past = cp->Restore(*st);  // 3 tokens past a checkpoint of 2
  EXPECT_EQ(past.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(past.message().find("cannot restore a state of 3 tokens"), std::string::npos)
      << past.message();
  EXPECT_EQ(st->n_tokens(), 3) << "a refused restore leaves the state alone";
  KvShape other = st->shape();
  other.head_dim += 1;
  auto cp2 = KvCheckpoint::Create(be_, other, 2);
  ASSERT_TRUE(cp2.ok());
  EXPECT_EQ(cp2->Capture(*st).code(), StatusCode::kFailedPrecondition);
  EXPECT_GT(KvCheckpoint::BytesFor(st->shape(), 2), 0u);
}

}  // namespace
}  // namespace flashkv
