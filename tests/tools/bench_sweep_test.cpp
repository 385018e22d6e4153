// The bench sweep: frontier schedules, the live-KV byte count against hand-computed
// figures, and a real sweep on ds4-tiny (shared fixture) whose probes match uninterrupted
// runs — so each in-memory snapshot restore put the exact frontier state back.
#include "tools/bench_sweep.h"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "kv/snapshot_codec.h"
#include "model/model.h"
#include "util/sha1.h"

namespace flashkv {
namespace {

std::string Ds4TinyPath() {
  return std::string(FLASHKV_FIXTURES_DIR) + "/ds4-tiny/ds4-tiny.gguf";
}

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

TEST(GreedyNonEos, SkipsEosAndPrefersTheLowestIndex) {
  const std::vector<float> l = {1, 5, 5, 2};
  EXPECT_EQ(GreedyNonEos(l, -1), 1);
  EXPECT_EQ(GreedyNonEos(l, 1), 2);
  EXPECT_EQ(GreedyNonEos(l, 2), 1);
  const std::vector<float> flat = {3, 3, 3};
  EXPECT_EQ(GreedyNonEos(flat, 0), 1);
}

class BenchSweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = Model::Load(Ds4TinyPath(), be_);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(*m);
    for (int i = 0; i < 64; ++i) tokens_.push_back((i * 37 + 11) % 1019);
  }

  // The probe an uninterrupted run produces: prefill tokens[0, ctx) at once, then greedy;
  // `last_logits` gets the logits after the last step.
  std::vector<int32_t> FreshProbe(int ctx, int gen, int32_t eos,
                                  std::vector<float>* last_logits = nullptr) {
    auto st = model_->NewState(ctx + gen);
    EXPECT_TRUE(st.ok());
    std::vector<float> logits(model_->config().n_vocab);
    EXPECT_TRUE(
        model_->Forward(std::span(tokens_).first(ctx), *st, LogitsFor::kLast, logits.data()).ok());
    std::vector<int32_t> out;
    for (int i = 0; i < gen; ++i) {
      const int32_t t = GreedyNonEos(logits, eos);
      out.push_back(t);
      EXPECT_TRUE(model_->Forward({&t, 1}, *st, LogitsFor::kLast, logits.data()).ok());
    }
    if (last_logits != nullptr) *last_logits = logits;
    return out;
  }

  const SnapshotIdentity identity_{Sha1Of("ds4-tiny"), "official/q8"};
  CpuBackend be_{nullptr};
  std::unique_ptr<Model> model_;
  std::vector<int32_t> tokens_;
};

TEST_F(BenchSweepTest, RowsProbesAndSizes) {
  // Frontiers off the ratio-4 grid and 4 probe tokens, so every probe closes a compressor
  // window (moving the overlap frontier) that the restore has to undo.
  BenchOptions o = Sweep(10, 42, 16, 0, 4);
  o.prefill_chunk = 5;
  std::vector<std::pair<int64_t, std::string>> progress;
  std::vector<int64_t> row_ctx;
  BenchCallbacks cb;
  cb.on_progress = [&](int64_t done, int64_t frontier, const char* phase) {
    progress.emplace_back(done, std::string(phase) + "@" + std::to_string(frontier));
  };
  cb.on_row = [&](const BenchRow& r) { row_ctx.push_back(r.ctx); };
  std::map<int64_t, std::vector<float>> last_logits;
  cb.on_probe_step = [&](int64_t frontier, int step, std::span<const float> logits) {
    if (step == 3) last_logits[frontier].assign(logits.begin(), logits.end());
  };
  auto rows = RunBenchSweep(*model_, tokens_, o, /*eos=*/-1, identity_, cb);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ(row_ctx, (std::vector<int64_t>{10, 26, 42}));

  // ds4-tiny: 5 layers, head_dim 192, window 128, indexer 128, ratios [0, 0, 4, 128, 4].
  // Below the window, per token: 5 raw rows of 192 + 2 CSA layers·(192+128)/4 = 1120
  // floats over whole ratio-4 periods. At 10 tokens: raw 5·10·192 = 9600; each CSA
  // 2 rows·192 + 6144 + 2·128 + 4096 = 10880; the HCA layer's frontier 2·(128·192) =
  // 49152. 9600 + 21760 + 49152 = 80512 floats.
  const uint64_t kv10 = 80512u * 4;
  const uint64_t want_kv[] = {kv10, kv10 + 1120u * 4 * 16, kv10 + 1120u * 4 * 32};
  const KvShape shape = model_->StateShape(42 + 4);
  for (size_t i = 0; i < rows->size(); ++i) {
    const BenchRow& r = (*rows)[i];
    SCOPED_TRACE("frontier " + std::to_string(r.ctx));
    EXPECT_EQ(r.prefill_tokens, i == 0 ? 10 : 16);
    EXPECT_GT(r.prefill_s, 0);
    EXPECT_GT(r.prefill_tps(), 0);
    EXPECT_EQ(r.gen_tokens, 4);
    EXPECT_GT(r.gen_tps(), 0);
    EXPECT_EQ(r.kv_bytes, want_kv[i]);
    // The image is the file format: header, table, tokens, 1024 logits, layers.
    EXPECT_EQ(r.snapshot_bytes, SnapshotFileBytes(shape, r.ctx, 1024, 0, {}));
    EXPECT_GT(r.snapshot_bytes, r.kv_bytes + 4 * uint64_t(r.ctx) + 4 * 1024);
    EXPECT_GE(r.snapshot_save_ms, 0);
    EXPECT_GE(r.snapshot_load_ms, 0);
    // The probe equals a fresh run's, down to the last bit of the logits (prefill is
    // bit-identical in any chunking): each restore after an earlier probe was exact.
    std::vector<float> fresh_logits;
    EXPECT_EQ(r.probe, FreshProbe(int(r.ctx), 4, -1, &fresh_logits));
    EXPECT_TRUE(last_logits[r.ctx] == fresh_logits);
  }

  // Chunks of 5: 10 = 5+5, 16 = 5+5+5+1; then "generate" once per frontier.
  const std::vector<std::pair<int64_t, std::string>> want_progress = {
      {5, "prefill@10"},  {10, "prefill@10"}, {10, "generate@10"}, {15, "prefill@26"},
      {20, "prefill@26"}, {25, "prefill@26"}, {26, "prefill@26"},  {26, "generate@26"},
      {31, "prefill@42"}, {36, "prefill@42"}, {41, "prefill@42"},  {42, "prefill@42"},
      {42, "generate@42"}};
  EXPECT_EQ(progress, want_progress);
}

TEST_F(BenchSweepTest, ProbeNeverPicksEos) {
  auto plain = RunBenchSweep(*model_, tokens_, Sweep(12, 12, 1, 0, 2), -1, identity_);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  const int32_t first = (*plain)[0].probe[0];
  auto banned = RunBenchSweep(*model_, tokens_, Sweep(12, 12, 1, 0, 2), first, identity_);
  ASSERT_TRUE(banned.ok()) << banned.status().ToString();
  EXPECT_NE((*banned)[0].probe[0], first);
  EXPECT_EQ((*banned)[0].probe, FreshProbe(12, 2, first));
}

TEST_F(BenchSweepTest, ZeroGenTokensStillSnapshotsAndRestores) {
  auto rows = RunBenchSweep(*model_, tokens_, Sweep(4, 12, 4, 0, 0), -1, identity_);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 3u);
  for (const BenchRow& r : *rows) {
    EXPECT_EQ(r.gen_tokens, 0);
    EXPECT_EQ(r.gen_tps(), 0);
    EXPECT_TRUE(r.probe.empty());
    EXPECT_GT(r.snapshot_bytes, r.kv_bytes);
  }
}

TEST_F(BenchSweepTest, PromptShorterThanCtxMaxIsRefused) {
  auto r = RunBenchSweep(*model_, std::span(tokens_).first(30), Sweep(8, 40, 16), -1, identity_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().ToString().find("the prompt has 30 tokens, --ctx-max 40 needs"),
            std::string::npos)
      << r.status().ToString();
}

}  // namespace
}  // namespace flashkv
