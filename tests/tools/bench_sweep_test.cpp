// The bench sweep's figures: frontier schedules and the live-KV byte count against
// hand-computed figures (the sweep itself: tests/evaluate/bench_sweep_driver_test.cpp).
#include "tools/bench_sweep.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace flashkv {
namespace {

BenchOptions Sweep(int start, int max, int incr, double mul = 0, int gen = 4) {
  BenchOptions o;
  o.ctx_start = start;
  o.ctx_max = max;
  o.step_incr = incr;
  o.step_mul = mul;
  o.gen_tokens = gen;
  return o;
}

TEST(BenchFrontiers, AdditiveMultiplicativeAndTheLastOne) {
  EXPECT_EQ(*BenchFrontiers(Sweep(16, 64, 16)), (std::vector<int>{16, 32, 48, 64}));
  // The steps pass 25 by: the sweep still ends at ctx_max.
  EXPECT_EQ(*BenchFrontiers(Sweep(10, 25, 10)), (std::vector<int>{10, 20, 25}));
  EXPECT_EQ(*BenchFrontiers(Sweep(2048, 65536, 0, 2.0)),
            (std::vector<int>{2048, 4096, 8192, 16384, 32768, 65536}));
  // ceil(2048·1.5^k): 3072, 4608, 6912, 10368, 15552, 23328, 34992, then 52488 > 50000.
  EXPECT_EQ(*BenchFrontiers(Sweep(2048, 50000, 0, 1.5)),
            (std::vector<int>{2048, 3072, 4608, 6912, 10368, 15552, 23328, 34992, 50000}));
  // Rounding up moves even a small frontier by a small factor.
  EXPECT_EQ(*BenchFrontiers(Sweep(1, 3, 0, 1.01)), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(*BenchFrontiers(Sweep(7, 7, 100)), (std::vector<int>{7}));
}

TEST(BenchFrontiers, BadOptionsAreNamed) {
  struct Case {
    BenchOptions o;
    std::string message;
  } cases[] = {
      {Sweep(0, 10, 1), "--ctx-start must be positive"},
      {Sweep(20, 10, 1), "--ctx-max 10 is below --ctx-start 20"},
      {Sweep(1, 10, 0), "--step-incr must be positive"},
      {Sweep(1, 10, 1, 1.0), "--step-mul must be a finite number > 1"},
      {Sweep(1, 10, 1, 0, -1), "--gen-tokens must be >= 0"},
  };
  for (const Case& c : cases) {
    auto r = BenchFrontiers(c.o);
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().ToString().find(c.message), std::string::npos) << r.status().ToString();
  }
  BenchOptions small_alloc = Sweep(8, 32, 8, 0, 4);
  small_alloc.ctx_alloc = 35;
  auto r = BenchFrontiers(small_alloc);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(
      r.status().ToString().find("--ctx-alloc 35 is smaller than --ctx-max 32 + --gen-tokens 4"),
      std::string::npos);
}

// The shape `flashkv make-tiny` writes (docs/GGUF.md): head_dim 192, window 32, indexer
// dim 128, ratios [0, 0, 4, 16, 4, 16]; ratio-4 layers overlap and carry an indexer.
KvShape FlashkvTinyShape() {
  KvShape s;
  s.head_dim = 192;
  s.n_swa = 32;
  s.indexer_dim = 128;
  s.ctx_size = 1 << 20;
  s.layers = {{0, false, false},  {0, false, false}, {4, true, true},
              {16, false, false}, {4, true, true},   {16, false, false}};
  return s;
}

TEST(LiveKvBytes, FlashkvTinyByHand) {
  const KvShape s = FlashkvTinyShape();
  // At 64 tokens (floats): raw windows 6·32·192 = 36864; each ratio-4 layer 16 rows·192 +
  // frontier 2·(8·384) + 16 indexer rows·128 + indexer frontier 2·(8·256) = 3072 + 6144 +
  // 2048 + 4096 = 15360; each ratio-16 layer 4 rows·192 + frontier 2·(16·192) = 768 + 6144
  // = 6912. 36864 + 2·15360 + 2·6912 = 81408 floats.
  EXPECT_EQ(LiveKvBytes(s, 64), 81408u * 4);
  // Past the window only compressed rows grow: per token 2·(192+128)/4 + 2·192/16 = 184
  // floats = 736 bytes (docs/DS4_MODEL.md §7: 3440 floats/token at Flash, at this shape), exact
  // over whole 16-token periods.
  EXPECT_EQ(LiveKvBytes(s, 512) - LiveKvBytes(s, 64), 736u * (512 - 64));
  EXPECT_EQ(LiveKvBytes(s, 4096 + 16) - LiveKvBytes(s, 4096), 736u * 16);
  // Inside a period rows appear in steps: 4 tokens close one ratio-4 row per CSA layer.
  EXPECT_EQ(LiveKvBytes(s, 68) - LiveKvBytes(s, 64), 2u * (192 + 128) * 4);
  // Nothing but fixed frontiers at 0 tokens: 2·(6144 + 4096) + 2·6144 floats.
  EXPECT_EQ(LiveKvBytes(s, 0), (2u * (6144 + 4096) + 2 * 6144) * 4);
}

}  // namespace
}  // namespace flashkv
