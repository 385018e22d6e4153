// VerifyDraft (engine/speculative.h): greedy drafts keep exactly the plain greedy tokens, and
// sampled drafts give tokens distributed as the target's own draws — checked statistically on
// a small vocabulary with a draft distribution unlike the target's.
#include "engine/speculative.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace flashkv {
namespace {

std::vector<float> RandomRows(size_t rows, size_t n_vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 2.0f);
  std::vector<float> v(rows * n_vocab);
  for (float& x : v) x = n(rng);
  return v;
}

DraftToken Greedy(int32_t id) {
  return {id, {{id, 1.0}}};
}

TEST(SpeculativeTest, GreedyKeepsExactlyThePlainGreedyTokens) {
  const size_t n_vocab = 50, k = 4;
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const std::vector<float> rows = RandomRows(k + 1, n_vocab, seed);
    std::vector<int32_t> plain;
    for (size_t i = 0; i <= k; ++i) {
      plain.push_back(Sampler::Greedy(std::span<const float>(rows).subspan(i * n_vocab, n_vocab)));
    }
    for (size_t wrong = 0; wrong <= k; ++wrong) {  // the first drafted token that differs
      std::vector<DraftToken> draft;
      for (size_t i = 0; i < k; ++i) {
        draft.push_back(Greedy(i == wrong ? (plain[i] + 1) % int32_t(n_vocab) : plain[i]));
      }
      Sampler sampler(SamplerOptions{});
      const DraftVerdict v = VerifyDraft(sampler, draft, rows, n_vocab);
      EXPECT_EQ(v.accepted, int(std::min(wrong, k)));
      EXPECT_EQ(v.next, plain[std::min(wrong, k)]) << "seed " << seed << ", wrong " << wrong;
    }
  }
}

TEST(SpeculativeTest, GreedyNeverKeepsTheExcludedId) {
  const size_t n_vocab = 8;
  std::vector<float> rows(2 * n_vocab, 0.0f);
  rows[3] = 5.0f;  // the argmax of row 0 is the excluded id
  rows[n_vocab + 2] = 1.0f;
  Sampler sampler(SamplerOptions{}, /*exclude_id=*/3);
  const std::vector<DraftToken> draft = {Greedy(3)};
  const DraftVerdict v = VerifyDraft(sampler, draft, rows, n_vocab);
  EXPECT_EQ(v.accepted, 0);
  EXPECT_NE(v.next, 3);
}

// Pearson's chi-square of observed counts against probabilities.
double ChiSquare(const std::vector<int>& counts, const std::vector<std::pair<int32_t, double>>& p,
                 int trials) {
  double chi = 0.0;
  for (const auto& [id, prob] : p) {
    const double want = prob * trials;
    const double d = counts[size_t(id)] - want;
    chi += d * d / want;
  }
  return chi;
}

// The first token a verify step emits (the drafted one when kept, else the drawn one) must
// follow the target's filtered distribution, whatever the draft's distribution; and the share
// of drafts kept must be Σ min(p, q).
TEST(SpeculativeTest, SampledDraftsGiveTheTargetsDistribution) {
  const size_t n_vocab = 6;
  const std::vector<float> rows = {2.0f, 1.5f, 0.5f, 0.0f, -1.0f, 1.0f,   // row 0
                                   0.3f, 0.2f, 0.1f, 0.0f, -0.1f, 0.4f};  // row 1 (bonus)
  SamplerOptions o;
  o.temperature = 0.8f;
  o.top_k = 5;  // id 4 is filtered out of the target
  o.seed = 7;
  Sampler sampler(o);
  const std::vector<std::pair<int32_t, double>> p =
      sampler.Distribution(std::span<const float>(rows).subspan(0, n_vocab));
  ASSERT_EQ(p.size(), 5u);
  // A draft that prefers what the target does not (and can draw the filtered id 4).
  const std::vector<std::pair<int32_t, double>> q = {{3, 0.35}, {4, 0.25}, {2, 0.2},
                                                     {0, 0.1},  {1, 0.05}, {5, 0.05}};
  std::mt19937_64 draft_rng(11);
  std::discrete_distribution<int> draft_pick({0.1, 0.05, 0.2, 0.35, 0.25, 0.05});
  const int trials = 200000;
  std::vector<int> first(n_vocab, 0);
  int kept = 0;
  for (int t = 0; t < trials; ++t) {
    const int32_t x = int32_t(draft_pick(draft_rng));
    const std::vector<DraftToken> draft = {{x, q}};
    const DraftVerdict v = VerifyDraft(sampler, draft, rows, n_vocab);
    kept += v.accepted;
    ++first[size_t(v.accepted == 1 ? x : v.next)];
  }
  EXPECT_EQ(first[4], 0) << "a token outside the target's support was emitted";
  // 4 degrees of freedom: 36.5 is exceeded with probability 2e-7 when the law holds.
  EXPECT_LT(ChiSquare(first, p, trials), 36.5);
  double overlap = 0.0;
  for (const auto& [id, prob] : p) {
    for (const auto& [qid, qprob] : q) {
      if (qid == id) overlap += std::min(prob, qprob);
    }
  }
  const double share = double(kept) / trials;
  const double sd = std::sqrt(overlap * (1.0 - overlap) / trials);
  EXPECT_NEAR(share, overlap, 6 * sd);
}

TEST(SpeculativeTest, AllKeptDrawsTheBonusFromTheLastRow) {
  const size_t n_vocab = 4;
  std::vector<float> rows = {0.0f, 9.0f, 0.0f, 0.0f,    // row 0: token 1 nearly certain
                             0.0f, 0.0f, 0.0f, 30.0f};  // row 1: token 3 certain
  SamplerOptions o;
  o.temperature = 1.0f;
  o.seed = 3;
  Sampler sampler(o);
  const std::vector<DraftToken> draft = {{1, {{1, 1.0}}}};
  int bonus3 = 0, kept = 0;
  for (int t = 0; t < 1000; ++t) {
    const DraftVerdict v = VerifyDraft(sampler, draft, rows, n_vocab);
    kept += v.accepted;
    bonus3 += v.accepted == 1 && v.next == 3;
  }
  EXPECT_GT(kept, 990);
  EXPECT_EQ(bonus3, kept);
}

TEST(SpeculativeTest, TheSameSeedGivesTheSameVerdicts) {
  const size_t n_vocab = 30, k = 3;
  const std::vector<float> rows = RandomRows(k + 1, n_vocab, 5);
  SamplerOptions o;
  o.temperature = 1.0f;
  o.seed = 42;
  std::vector<DraftToken> draft;
  for (size_t i = 0; i < k; ++i) draft.push_back({int32_t(i), {{int32_t(i), 0.5}, {9, 0.5}}});
  Sampler a(o), b(o);
  for (int t = 0; t < 50; ++t) {
    const DraftVerdict va = VerifyDraft(a, draft, rows, n_vocab);
    const DraftVerdict vb = VerifyDraft(b, draft, rows, n_vocab);
    EXPECT_EQ(va.accepted, vb.accepted);
    EXPECT_EQ(va.next, vb.next);
  }
}

TEST(SpeculativeTest, TooFewRowsKeepNothing) {
  Sampler sampler(SamplerOptions{});
  const std::vector<float> rows(4, 0.0f);
  const std::vector<DraftToken> draft = {Greedy(0)};
  const DraftVerdict v = VerifyDraft(sampler, draft, rows, 4);  // needs 2 rows
  EXPECT_EQ(v.accepted, 0);
  EXPECT_EQ(v.next, -1);
}

}  // namespace
}  // namespace flashkv
