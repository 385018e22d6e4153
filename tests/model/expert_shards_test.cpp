// Expert parallel on the CPU (docs/MULTI_GPU.md): the shard plan and pair split as pure logic;
// ds4-tiny with its routed experts on N = 2, 3, 4 CPU backends (rows moved by plain copies)
// gives every logit of one backend bit for bit, through chunked prefill and decode, in both
// numerics; a snapshot of a sharded run restores on one backend and one of a one-backend run
// on shards, and decoding on from either equals the uninterrupted run.
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/exchange.h"
#include "model/expert_shards.h"
#include "model/model.h"
#include "model/random_model.h"
#include "model_test_util.h"
#include "snapshot/snapshot_codec.h"
#include "util/file_io.h"

namespace flashkv {
namespace {

TEST(ExpertShardPlanTest, BlocksAreContiguousAndBalanced) {
  auto plan = ExpertShardPlan::Make(8, 3);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->n_shards(), 3);
  EXPECT_EQ(plan->n_expert(), 8);
  EXPECT_EQ(plan->count(0), 3);
  EXPECT_EQ(plan->count(1), 3);
  EXPECT_EQ(plan->count(2), 2);
  const int owners[8] = {0, 0, 0, 1, 1, 1, 2, 2};
  const int locals[8] = {0, 1, 2, 0, 1, 2, 0, 1};
  for (int e = 0; e < 8; ++e) {
    EXPECT_EQ(plan->owner(e), owners[e]) << e;
    EXPECT_EQ(plan->local(e), locals[e]) << e;
  }
  for (int n = 1; n <= 256; n *= 2) {
    auto p = ExpertShardPlan::Make(256, n);
    ASSERT_TRUE(p.ok());
    for (int d = 0; d < n; ++d) EXPECT_EQ(p->count(d), 256 / n);
    EXPECT_EQ(p->owner(255), n - 1);
  }
}

TEST(ExpertShardPlanTest, RejectsImpossibleCounts) {
  EXPECT_EQ(ExpertShardPlan::Make(8, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ExpertShardPlan::Make(8, 9).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ExpertShardPlan::Make(0, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ExpertShardPlan::Make(8, 8).ok());
}

TEST(ExpertShardPlanTest, PartitionPutsEveryPairInItsOwnerInOrder) {
  auto plan = ExpertShardPlan::Make(8, 3);
  ASSERT_TRUE(plan.ok());
  const std::vector<int32_t> sel = {7, 0, 3, 3, 5, 6, 1, 2, 4, 7};
  std::vector<ShardPairs> parts(5);  // resized to the shard count, reused
  ASSERT_TRUE(PartitionPairs(*plan, sel, parts).ok());
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].pairs, (std::vector<int32_t>{1, 6, 7}));
  EXPECT_EQ(parts[0].local_expert, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(parts[1].pairs, (std::vector<int32_t>{2, 3, 4, 8}));
  EXPECT_EQ(parts[1].local_expert, (std::vector<int32_t>{0, 0, 2, 1}));
  EXPECT_EQ(parts[2].pairs, (std::vector<int32_t>{0, 5, 9}));
  EXPECT_EQ(parts[2].local_expert, (std::vector<int32_t>{1, 0, 1}));

  const std::vector<int32_t> bad = {1, 8};
  Status s = PartitionPairs(*plan, bad, parts);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.ToString().find("pair 1 routed to expert 8"), std::string::npos) << s.ToString();
}

// A model on its own backend, optionally with its experts on `n_shards` more.
struct Rig {
  CpuBackend home{nullptr};
  std::vector<std::unique_ptr<CpuBackend>> shards;
  HostRowExchange exchange;
  std::unique_ptr<Model> model;

  Rig(int n_shards, const ModelOptions& opts) {
    auto m = Model::Load(testing::Ds4TinyPath(), home, &opts);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok()) return;
    model = std::move(*m);
    if (n_shards == 0) return;
    std::vector<Backend*> ptrs;
    for (int d = 0; d < n_shards; ++d) {
      shards.push_back(std::make_unique<CpuBackend>(nullptr));
      ptrs.push_back(shards.back().get());
    }
    Status s = model->ShardExperts(ptrs, exchange);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
};

constexpr int kCtx = 64;
constexpr int kPrompt = 40;  // crosses the compressor windows and the small window
constexpr int kDecode = 6;

std::vector<int32_t> Tokens(int n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = int32_t((i * 37 + 11) % 1000);
  return t;
}

// Every logit of a chunked prefill (kAll) and of kDecode one-token steps after it.
std::vector<float> RunAll(Model& m, KvState& st) {
  const int V = m.config().n_vocab;
  const auto tokens = Tokens(kPrompt + kDecode);
  std::vector<float> out(size_t(kPrompt + kDecode) * V);
  Status s = m.Forward(std::span(tokens).first(kPrompt), st, LogitsFor::kAll, out.data(), 7);
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (int i = 0; i < kDecode; ++i) {
    s = m.Forward(std::span(tokens).subspan(size_t(kPrompt + i), 1), st, LogitsFor::kLast,
                  out.data() + size_t(kPrompt + i) * V);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  return out;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct ShardCase {
  int n_shards;
  ModelOptions opts;
};

class ShardedForwardTest : public ::testing::TestWithParam<ShardCase> {};

TEST_P(ShardedForwardTest, LogitsEqualOneBackendBitForBit) {
  const ShardCase c = GetParam();
  Rig one(0, c.opts);
  Rig sharded(c.n_shards, c.opts);
  ASSERT_TRUE(one.model && sharded.model);
  ASSERT_GE(one.model->config().n_expert, 4);
  auto st1 = one.model->NewState(kCtx);
  auto stn = sharded.model->NewState(kCtx);
  ASSERT_TRUE(st1.ok() && stn.ok());
  const auto ref = RunAll(*one.model, *st1);
  const auto got = RunAll(*sharded.model, *stn);
  EXPECT_TRUE(SameBits(ref, got)) << c.n_shards << " shards";
}

INSTANTIATE_TEST_SUITE_P(
    Shards, ShardedForwardTest,
    ::testing::Values(ShardCase{2, {NumericsMode::kOfficial, ActQuantMode::kQ8}},
                      ShardCase{3, {NumericsMode::kOfficial, ActQuantMode::kQ8}},
                      ShardCase{4, {NumericsMode::kOfficial, ActQuantMode::kQ8}},
                      ShardCase{3, {NumericsMode::kHf, ActQuantMode::kOff}}),
    [](const ::testing::TestParamInfo<ShardCase>& i) {
      return std::to_string(i.param.n_shards) +
             (i.param.opts.act_quant == ActQuantMode::kQ8 ? "_official_q8" : "_hf_off");
    });

// The fixture routes 2 slots a token, whose sum is the same either way round; Flash routes 6.
// The tiny random shape with 6 of 8 experts a token makes the slot order matter.
TEST(ShardedForwardTest, SixSlotsSumInSlotOrder) {
  RandomModelSpec spec{"tiny", 4, 6};
  ModelConfig config = RandomModelConfig(spec);
  config.n_expert_used = 6;
  auto make = [&](Backend& be) -> std::unique_ptr<Model> {
    auto w = MakeRandomWeights(config, be);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    if (!w.ok()) return nullptr;
    auto m = Model::FromWeights("random:tiny:4 top-6", config, std::move(w->weights),
                                std::move(w->storage), be);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? std::move(*m) : nullptr;
  };
  CpuBackend be1(nullptr), home(nullptr), s0(nullptr), s1(nullptr), s2(nullptr);
  auto one = make(be1);
  auto sharded = make(home);
  ASSERT_TRUE(one && sharded);
  HostRowExchange exchange;
  Backend* shards[] = {&s0, &s1, &s2};
  ASSERT_TRUE(sharded->ShardExperts(shards, exchange).ok());
  auto st1 = one->NewState(kCtx);
  auto stn = sharded->NewState(kCtx);
  ASSERT_TRUE(st1.ok() && stn.ok());
  EXPECT_TRUE(SameBits(RunAll(*one, *st1), RunAll(*sharded, *stn)));
}

TEST(ShardedForwardTest, BackToOneBackendKeepsTheBits) {
  const ModelOptions opts;
  Rig one(0, opts);
  Rig rig(2, opts);
  ASSERT_TRUE(one.model && rig.model);
  ASSERT_TRUE(rig.model->ShardExperts({}, rig.exchange).ok());
  auto st1 = one.model->NewState(kCtx);
  auto st2 = rig.model->NewState(kCtx);
  ASSERT_TRUE(st1.ok() && st2.ok());
  EXPECT_TRUE(SameBits(RunAll(*one.model, *st1), RunAll(*rig.model, *st2)));
}

TEST(ShardedForwardTest, MoreShardsThanExpertsIsAnError) {
  Rig rig(0, ModelOptions{});
  ASSERT_TRUE(rig.model);
  const int n = rig.model->config().n_expert + 1;
  std::vector<std::unique_ptr<CpuBackend>> bes;
  std::vector<Backend*> ptrs;
  for (int d = 0; d < n; ++d) {
    bes.push_back(std::make_unique<CpuBackend>(nullptr));
    ptrs.push_back(bes.back().get());
  }
  Status s = rig.model->ShardExperts(ptrs, rig.exchange);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
}

// Prefills kPrompt tokens on `from`, saves the snapshot, restores it on `to` and decodes on:
// the decode logits equal those of the uninterrupted one-backend run; the snapshot bytes
// equal those of a one-backend run (the format knows nothing of shards).
void SaveHereRestoreThere(int from_shards, int to_shards) {
  const ModelOptions opts;
  Rig ref(0, opts), from(from_shards, opts), to(to_shards, opts);
  ASSERT_TRUE(ref.model && from.model && to.model);
  const int V = ref.model->config().n_vocab;
  auto st_ref = ref.model->NewState(kCtx);
  ASSERT_TRUE(st_ref.ok());
  const auto want = RunAll(*ref.model, *st_ref);

  const auto tokens = Tokens(kPrompt + kDecode);
  auto st_from = from.model->NewState(kCtx);
  ASSERT_TRUE(st_from.ok());
  std::vector<float> last(static_cast<size_t>(V));
  ASSERT_TRUE(
      from.model
          ->Forward(std::span(tokens).first(kPrompt), *st_from, LogitsFor::kLast, last.data(), 16)
          .ok());
  const SnapshotIdentity id{Sha1Digest{}, "official/q8"};
  SnapshotContent content;
  content.tokens = std::span(tokens).first(kPrompt);
  content.logits = last;
  content.text = "prompt";
  auto img = CaptureSnapshot(*st_from, id, content, 1700000000000);
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  SealSnapshot(*img);

  // The same snapshot from a one-backend prefill: the same bytes.
  auto st_plain = ref.model->NewState(kCtx);
  ASSERT_TRUE(st_plain.ok());
  std::vector<float> last_plain(static_cast<size_t>(V));
  ASSERT_TRUE(ref.model
                  ->Forward(std::span(tokens).first(kPrompt), *st_plain, LogitsFor::kLast,
                            last_plain.data())
                  .ok());
  content.logits = last_plain;
  auto img_plain = CaptureSnapshot(*st_plain, id, content, 1700000000000);
  ASSERT_TRUE(img_plain.ok());
  SealSnapshot(*img_plain);
  ASSERT_EQ(img->size(), img_plain->size());
  EXPECT_EQ(std::memcmp(img->data(), img_plain->data(), img->size()), 0);

  const std::string path = testing::ProcessTmpPath("shards-" + std::to_string(from_shards) + "-" +
                                                   std::to_string(to_shards) + ".kv");
  {
    auto f = File::Create(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_TRUE(WriteSnapshotImage(*img, *f).ok());
    ASSERT_TRUE(f->Close().ok());
  }
  auto st_to = to.model->NewState(kCtx);
  ASSERT_TRUE(st_to.ok());
  auto loaded = LoadSnapshot(path, id, *st_to);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(st_to->n_tokens(), kPrompt);
  EXPECT_EQ(std::memcmp(loaded->logits.data(), want.data() + size_t(kPrompt - 1) * V,
                        sizeof(float) * size_t(V)),
            0);
  for (int i = 0; i < kDecode; ++i) {
    std::vector<float> got(static_cast<size_t>(V));
    ASSERT_TRUE(to.model
                    ->Forward(std::span(tokens).subspan(size_t(kPrompt + i), 1), *st_to,
                              LogitsFor::kLast, got.data())
                    .ok());
    EXPECT_EQ(
        std::memcmp(got.data(), want.data() + size_t(kPrompt + i) * V, sizeof(float) * size_t(V)),
        0)
        << "decode step " << i;
  }
}

TEST(ShardedSnapshotTest, SavedOnThreeShardsRestoresOnOneBackend) {
  SaveHereRestoreThere(3, 0);
}
TEST(ShardedSnapshotTest, SavedOnOneBackendRestoresOnFourShards) {
  SaveHereRestoreThere(0, 4);
}
TEST(ShardedSnapshotTest, SavedOnTwoShardsRestoresOnThree) {
  SaveHereRestoreThere(2, 3);
}

}  // namespace
}  // namespace flashkv
