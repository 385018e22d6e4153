// The NCCL row exchange and expert parallel on two GPUs (docs/MULTI_GPU.md): rows moved
// between devices (and within one) keep their bits in any order; ds4-tiny with its routed
// experts on a second GPU gives the logits of one GPU bit for bit. Label `gpu`; skips with
// fewer than two devices. Its own binary (backend_nccl_test), built only where NCCL is.
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/nccl_exchange.h"
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

  const int V = (*ref)->config().n_vocab;
  std::vector<int32_t> tokens;
  for (int i = 0; i < 46; ++i) tokens.push_back((i * 37 + 11) % 1000);
  auto run = [&](Model& m) {
    auto st = m.NewState(64);
    EXPECT_TRUE(st.ok());
    std::vector<float> out(tokens.size() * size_t(V));
    EXPECT_TRUE(m.Forward(std::span(tokens).first(40), *st, LogitsFor::kAll, out.data(), 7).ok());
    for (size_t i = 40; i < tokens.size(); ++i) {
      EXPECT_TRUE(
          m.Forward(std::span(tokens).subspan(i, 1), *st, LogitsFor::kLast, out.data() + i * V)
              .ok());
    }
    return out;
  };
  const auto want = run(**ref);
  const auto got = run(**sharded);
  ASSERT_EQ(want.size(), got.size());
  EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace flashkv
