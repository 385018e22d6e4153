// Expert parallel straight from the GGUF (Model::LoadExpertParallel, docs/MULTI_GPU.md): the
// home backend gets every weight but the routed-expert stacks, each shard exactly its block
// of them — on the CPU backend, which keeps the host bytes in place, a shard's Weight is the
// very slice of the file's mapping that holds its experts, so no other expert's byte is
// read — the bytes add up to one backend's, and every logit equals one backend's bit for bit.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/exchange.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "model/sharded_moe.h"
#include "model_run_util.h"
#include "model_test_util.h"

namespace flashkv {
namespace {

constexpr int kCtx = 64;
constexpr int kPrompt = 40;
constexpr int kDecode = 5;

// Every logit of a chunked prefill and of one-token decode steps after it.
std::vector<float> RunAll(Model& m) {
  return testing::PrefillThenDecodeLogits(m, kCtx, kPrompt, kDecode, 9);
}

using testing::SameBits;

const char* const kStacks[3] = {"ffn_gate_exps.weight", "ffn_up_exps.weight",
                                "ffn_down_exps.weight"};

// A model loaded expert-parallel over `n` CPU shards; with `home_is_shard` the home backend
// is shard 0 (a server over n devices), else it holds no expert.
struct ShardedRig {
  CpuBackend home{nullptr};
  std::vector<std::unique_ptr<CpuBackend>> more;
  HostRowExchange exchange;
  std::unique_ptr<Model> model;

  ShardedRig(int n, bool home_is_shard) {
    std::vector<Backend*> shards;
    if (home_is_shard) shards.push_back(&home);
    while (int(shards.size()) < n) {
      more.push_back(std::make_unique<CpuBackend>(nullptr));
      shards.push_back(more.back().get());
    }
    auto m = Model::LoadExpertParallel(testing::Ds4TinyPath(), home, shards, exchange);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (m.ok()) model = std::move(*m);
  }
};

// The bytes of the routed-expert stacks in the file, over every layer.
uint64_t ExpertBytes(const GgufFile& file, int n_layer) {
  uint64_t total = 0;
  for (int l = 0; l < n_layer; ++l) {
    for (const char* s : kStacks) {
      const GgufTensorInfo* t = file.FindTensor("blk." + std::to_string(l) + "." + s);
      EXPECT_NE(t, nullptr);
      if (t != nullptr) total += t->nbytes;
    }
  }
  return total;
}

TEST(ExpertShardLoadTest, EachShardHoldsExactlyItsSliceOfTheFile) {
  auto file = GgufFile::Open(testing::Ds4TinyPath());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  CpuBackend one_be(nullptr);
  auto one = Model::Load(testing::Ds4TinyPath(), one_be);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  const int n_layer = (*one)->config().n_layer;
  const int n_expert = (*one)->config().n_expert;
  const uint64_t experts = ExpertBytes(*file, n_layer);
  const uint64_t all = (*one)->PlacedBytes().home;
  ASSERT_GT(experts, 0u);
  ASSERT_LT(experts, all);
  EXPECT_TRUE((*one)->PlacedBytes().shards.empty());

  ShardedRig rig(3, /*home_is_shard=*/false);
  ASSERT_TRUE(rig.model);
  const ExpertShards* shards = rig.model->expert_shards();
  ASSERT_NE(shards, nullptr);
  const Model::WeightBytes bytes = rig.model->PlacedBytes();
  // Home: everything but the routed experts.
  EXPECT_EQ(bytes.home, all - experts);
  ASSERT_EQ(bytes.shards.size(), 3u);
  // The CPU backend reads a weight in place, so a block's address is where its bytes are
  // mapped: relative to the first block, every block lies at its stack's file offset plus
  // `first` experts — each shard's Weights cover its experts' bytes of the file and no other.
  const GgufTensorInfo* t0 = file->FindTensor(std::string("blk.0.") + kStacks[0]);
  ASSERT_NE(t0, nullptr);
  const uintptr_t data_section =
      reinterpret_cast<uintptr_t>(shards->block(0, 0, 0).data.get()) - uintptr_t(t0->offset);
  uint64_t sum = 0;
  for (int d = 0; d < 3; ++d) {
    const int first = shards->plan().first(d), count = shards->plan().count(d);
    EXPECT_EQ(bytes.shards[size_t(d)], experts / uint64_t(n_expert) * uint64_t(count)) << d;
    sum += bytes.shards[size_t(d)];
    for (int l = 0; l < n_layer; ++l) {
      for (int i = 0; i < 3; ++i) {
        const GgufTensorInfo* t = file->FindTensor("blk." + std::to_string(l) + "." + kStacks[i]);
        ASSERT_NE(t, nullptr);
        const uint64_t mb = t->nbytes / uint64_t(n_expert);
        const Weight& w = shards->block(d, l, i);
        ASSERT_EQ(w.matrix_bytes(), mb);
        EXPECT_EQ(w.ne[2], uint64_t(count));
        EXPECT_EQ(reinterpret_cast<uintptr_t>(w.data.get()),
                  data_section + uintptr_t(t->offset + mb * uint64_t(first)))
            << "shard " << d << " layer " << l << " " << kStacks[i];
      }
    }
  }
  EXPECT_EQ(sum, experts);
}

}  // namespace
}  // namespace flashkv

namespace flashkv {
namespace {

// A server over N devices: device 0 is home and shard 0 and holds the replicated weights
// and 1/N of the experts; the others 1/N each.
TEST(ExpertShardLoadTest, HomeAsShardHoldsReplicatedPlusItsShare) {
  CpuBackend one_be(nullptr);
  auto one = Model::Load(testing::Ds4TinyPath(), one_be);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  auto file = GgufFile::Open(testing::Ds4TinyPath());
  ASSERT_TRUE(file.ok());
  const uint64_t experts = ExpertBytes(*file, (*one)->config().n_layer);
  const uint64_t replicated = (*one)->PlacedBytes().home - experts;
  ShardedRig rig(4, /*home_is_shard=*/true);
  ASSERT_TRUE(rig.model);
  const Model::WeightBytes bytes = rig.model->PlacedBytes();
  EXPECT_EQ(bytes.home, replicated);
  ASSERT_EQ(bytes.shards.size(), 4u);
  for (uint64_t b : bytes.shards) EXPECT_EQ(b, experts / 4);  // 8 experts, 2 a shard
}

TEST(ExpertShardLoadTest, LogitsEqualOneBackendBitForBit) {
  CpuBackend one_be(nullptr);
  auto one = Model::Load(testing::Ds4TinyPath(), one_be);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  const auto want = RunAll(**one);
  for (const auto& [n, home_is_shard] : {std::pair{2, true}, {3, false}, {8, true}}) {
    ShardedRig rig(n, home_is_shard);
    ASSERT_TRUE(rig.model);
    EXPECT_TRUE(SameBits(want, RunAll(*rig.model))) << n << " shards";
  }
}

// Going back to one backend places the experts on home from the file; re-sharding a model
// whose home holds no expert places the new blocks from the file too.
TEST(ExpertShardLoadTest, ReshardingPlacesFromTheFile) {
  CpuBackend one_be(nullptr);
  auto one = Model::Load(testing::Ds4TinyPath(), one_be);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  const auto want = RunAll(**one);

  CpuBackend a(nullptr), b(nullptr);  // outlive the model, which may hold buffers on them
  ShardedRig rig(3, /*home_is_shard=*/false);
  ASSERT_TRUE(rig.model);
  Backend* two[] = {&a, &b};
  ASSERT_TRUE(rig.model->ShardExperts(two, rig.exchange).ok());
  EXPECT_EQ(rig.model->PlacedBytes().shards.size(), 2u);
  EXPECT_TRUE(SameBits(want, RunAll(*rig.model)));

  ASSERT_TRUE(rig.model->ShardExperts({}, rig.exchange).ok());
  EXPECT_EQ(rig.model->expert_shards(), nullptr);
  EXPECT_EQ(rig.model->PlacedBytes().home, (*one)->PlacedBytes().home);
  EXPECT_TRUE(SameBits(want, RunAll(*rig.model)));
}

TEST(ExpertShardLoadTest, NoShardsOrTooManyIsAnError) {
  CpuBackend home(nullptr);
  HostRowExchange exchange;
  auto none = Model::LoadExpertParallel(testing::Ds4TinyPath(), home, {}, exchange);
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  std::vector<std::unique_ptr<CpuBackend>> bes;
  std::vector<Backend*> ptrs;
  for (int d = 0; d < 9; ++d) {
    bes.push_back(std::make_unique<CpuBackend>(nullptr));
    ptrs.push_back(bes.back().get());
  }
  auto many = Model::LoadExpertParallel(testing::Ds4TinyPath(), home, ptrs, exchange);
  EXPECT_EQ(many.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(many.status().ToString().find("9 shards for 8 experts"), std::string::npos)
      << many.status().ToString();
}

// Two home devices share one expert pool (layout B with several homes): A is home and
// shard 0, B home and shard 1; each home's session, stepped in turn with the other's, gets
// one backend's logits bit for bit, and B holds only the replicated weights besides its
// experts.
TEST(ExpertShardLoadTest, TwoHomesShareOneExpertPool) {
  CpuBackend one_be(nullptr);
  auto one = Model::Load(testing::Ds4TinyPath(), one_be);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  const auto want = RunAll(**one);

  CpuBackend a(nullptr), b(nullptr);
  HostRowExchange exchange;
  Backend* both[] = {&a, &b};
  auto ma = Model::LoadExpertParallel(testing::Ds4TinyPath(), a, both, exchange);
  ASSERT_TRUE(ma.ok()) << ma.status().ToString();
  auto mb = Model::LoadSharingExperts(testing::Ds4TinyPath(), b, **ma);
  ASSERT_TRUE(mb.ok()) << mb.status().ToString();
  EXPECT_EQ((*mb)->expert_shards(), (*ma)->expert_shards());
  EXPECT_EQ((*mb)->PlacedBytes().home, (*ma)->PlacedBytes().home);
  EXPECT_EQ((*mb)->PlacedBytes().shards, (*ma)->PlacedBytes().shards);

  Model* models[2] = {ma->get(), mb->get()};
  const int V = (*one)->config().n_vocab;
  const auto tokens = testing::RunTokens(kPrompt + kDecode);
  std::vector<KvState> states;
  for (Model* m : models) {
    auto st = m->NewState(kCtx);
    ASSERT_TRUE(st.ok());
    states.push_back(std::move(*st));
  }
  std::vector<std::vector<float>> got(2, std::vector<float>(want.size()));
  for (int t0 = 0; t0 < kPrompt; t0 += 9) {  // prefill chunks, the homes in turn
    const int n = std::min(9, kPrompt - t0);
    for (int h = 0; h < 2; ++h) {
      ASSERT_TRUE(models[h]
                      ->Forward(std::span(tokens).subspan(size_t(t0), size_t(n)), states[size_t(h)],
                                LogitsFor::kAll, got[size_t(h)].data() + size_t(t0) * size_t(V))
                      .ok());
    }
  }
  for (int i = kPrompt; i < kPrompt + kDecode; ++i) {
    for (int h = 0; h < 2; ++h) {
      ASSERT_TRUE(models[h]
                      ->Forward(std::span(tokens).subspan(size_t(i), 1), states[size_t(h)],
                                LogitsFor::kLast, got[size_t(h)].data() + size_t(i) * size_t(V))
                      .ok());
    }
  }
  EXPECT_TRUE(SameBits(want, got[0])) << "home A";
  EXPECT_TRUE(SameBits(want, got[1])) << "home B";

  CpuBackend c(nullptr);
  auto unshared = Model::LoadSharingExperts(testing::Ds4TinyPath(), c, **one);
  EXPECT_EQ(unshared.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flashkv
