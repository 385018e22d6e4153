// The NCCL row exchange and expert parallel on two GPUs (docs/MULTI_GPU.md): rows moved
// between devices (and within one) keep their bits in any order; ds4-tiny with its routed
// experts on a second GPU gives the logits of one GPU bit for bit, and so does the model
// loaded expert-parallel from the file over both (what --gpus 0,1 builds). Label `gpu`;
// skips with fewer than two devices. Its own binary (backend_nccl_test), built only where
// NCCL is.
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/nccl_exchange.h"
#include "backend/exchange.h"
#include "model/model.h"

namespace flashkv {
namespace {

std::unique_ptr<CudaBackend> OpenGpu(int device) {
  CudaBackendOptions o;
  o.device = device;
  auto be = CudaBackend::Create(o);
  EXPECT_TRUE(be.ok()) << be.status().ToString();
  return be.ok() ? std::move(*be) : nullptr;
}

// Every logit of a 40-token chunked prefill and 6 decode steps after it.
std::vector<float> RunTokens(Model& m) {
  const int V = m.config().n_vocab;
  std::vector<int32_t> tokens;
  for (int i = 0; i < 46; ++i) tokens.push_back((i * 37 + 11) % 1000);
  auto st = m.NewState(64);
  EXPECT_TRUE(st.ok());
  if (!st.ok()) return {};
  std::vector<float> out(tokens.size() * size_t(V));
  EXPECT_TRUE(m.Forward(std::span(tokens).first(40), *st, LogitsFor::kAll, out.data(), 7).ok());
  for (size_t i = 40; i < tokens.size(); ++i) {
    EXPECT_TRUE(
        m.Forward(std::span(tokens).subspan(i, 1), *st, LogitsFor::kLast, out.data() + i * V).ok());
  }
  return out;
}

#define REQUIRE_TWO_GPUS()                                   \
  do {                                                       \
    if (CudaBackend::DeviceCount() < 2) {                    \
      GTEST_SKIP() << "fewer than two CUDA devices present"; \
    }                                                        \
  } while (0)

TEST(NcclExchange, RowsKeepTheirBitsAcrossAndWithinDevices) {
  REQUIRE_TWO_GPUS();
  auto g0 = OpenGpu(0);
  auto g1 = OpenGpu(1);
  ASSERT_TRUE(g0 && g1);
  Backend* bes[] = {g0.get(), g1.get()};
  const int devices[] = {0, 1};
  auto x = NcclRowExchange::Create(bes, devices);
  ASSERT_TRUE(x.ok()) << x.status().ToString();

  constexpr size_t kRows = 37, kCols = 300;
  std::vector<uint32_t> bits(kRows * kCols);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = uint32_t(i * 2654435761u);  // NaNs too
  std::vector<RowMove> moves;
  for (int32_t i = 0; i < int32_t(kRows); i += 2) moves.push_back({i, int32_t(kRows) - 1 - i});

  for (auto [from, to] : {std::pair{0, 1}, std::pair{1, 0}, std::pair{0, 0}}) {
    auto src = bes[from]->Alloc(bits.size() * 4);
    auto dst = bes[to]->Alloc(bits.size() * 4);
    ASSERT_TRUE(src.ok() && dst.ok());
    ASSERT_TRUE(bes[from]->Write(src->as<void>(), bits.data(), bits.size() * 4).ok());
    Status s =
        (*x)->MoveRows(*bes[from], src->as<float>(), *bes[to], dst->as<float>(), kCols, moves);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<uint32_t> got(bits.size());
    ASSERT_TRUE(bes[to]->Read(dst->as<void>(), got.data(), got.size() * 4).ok());
    std::vector<uint32_t> want(bits.size(), 0);  // Alloc zero-fills
    for (const RowMove& m : moves) {
      std::memcpy(&want[size_t(m.dst_row) * kCols], &bits[size_t(m.src_row) * kCols], kCols * 4);
    }
    EXPECT_EQ(got, want) << from << " → " << to;
  }
}

TEST(NcclExchange, TinyModelWithExpertsOnTwoGpusEqualsOneGpu) {
  REQUIRE_TWO_GPUS();
  const std::string path = std::string(FLASHKV_FIXTURES_DIR) + "/ds4-tiny/ds4-tiny.gguf";
  auto ref_be = OpenGpu(0);
  auto home = OpenGpu(0);
  auto other = OpenGpu(1);
  ASSERT_TRUE(ref_be && home && other);
  auto ref = Model::Load(path, *ref_be);
  auto sharded = Model::Load(path, *home);
  ASSERT_TRUE(ref.ok() && sharded.ok());
  Backend* bes[] = {home.get(), other.get()};
  const int devices[] = {0, 1};
  auto x = NcclRowExchange::Create(bes, devices);
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  ASSERT_TRUE((*sharded)->ShardExperts(bes, **x).ok());

  const auto want = RunTokens(**ref);
  const auto got = RunTokens(**sharded);
  ASSERT_EQ(want.size(), got.size());
  EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0);
}

// What `flashkv serve --gpus 0,1` builds (Runtime::Open): GPU 0 is home and shard 0, GPU 1
// shard 1, each placing only its experts from the file; over NCCL and over host memory (the
// default build's exchange), the logits of one GPU bit for bit.
TEST(NcclExchange, TinyModelLoadedExpertParallelEqualsOneGpu) {
  REQUIRE_TWO_GPUS();
  const std::string path = std::string(FLASHKV_FIXTURES_DIR) + "/ds4-tiny/ds4-tiny.gguf";
  auto ref_be = OpenGpu(0);
  ASSERT_TRUE(ref_be);
  auto ref = Model::Load(path, *ref_be);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  const auto want = RunTokens(**ref);
  for (bool nccl : {true, false}) {
    auto home = OpenGpu(0);
    auto other = OpenGpu(1);
    ASSERT_TRUE(home && other);
    Backend* bes[] = {home.get(), other.get()};
    const int devices[] = {0, 1};
    std::unique_ptr<RowExchange> x;
    if (nccl) {
      auto made = NcclRowExchange::Create(bes, devices);
      ASSERT_TRUE(made.ok()) << made.status().ToString();
      x = std::move(*made);
    } else {
      x = std::make_unique<HostRowExchange>();
    }
    auto m = Model::LoadExpertParallel(path, *home, bes, *x);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const Model::WeightBytes bytes = (*m)->PlacedBytes();
    ASSERT_EQ(bytes.shards.size(), 2u);
    EXPECT_EQ(bytes.home + bytes.shards[0] + bytes.shards[1], (*ref)->PlacedBytes().home);
    const auto got = RunTokens(**m);
    ASSERT_EQ(want.size(), got.size());
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
        << (nccl ? "nccl" : "host") << " exchange";
  }
}

}  // namespace
}  // namespace flashkv
