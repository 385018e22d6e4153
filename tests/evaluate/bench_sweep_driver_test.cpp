// The bench sweep on the engine (evaluate/bench_sweep_driver.h): a real sweep on ds4-tiny whose
// probes match uninterrupted runs — so each rewind put the exact frontier state back and
// each frontier's request continued the live session by its ids — the progress it
// reports, a probe that never picks EOS, and the refusals.
#include "evaluate/bench_sweep_driver.h"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "engine/sampler.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "snapshot/snapshot_codec.h"
#include "tokenizer/vocab.h"

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

// The ds4-tiny vocabulary, its EOS moved to `eos` when >= 0 (so a probe meets "EOS" where
// the model's greedy choice is).
Tokenizer TinyTokenizer(int32_t eos = -1) {
  auto gguf = GgufFile::Open(Ds4TinyPath());
  EXPECT_TRUE(gguf.ok());
  auto vocab = LoadVocabFromGguf(*gguf);
  EXPECT_TRUE(vocab.ok());
  if (eos >= 0) vocab->eos_id = eos;
  auto tok = Tokenizer::FromVocab(*vocab);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return std::move(*tok);
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
      const int32_t t = Sampler::Greedy(logits, eos);
      out.push_back(t);
      EXPECT_TRUE(model_->Forward({&t, 1}, *st, LogitsFor::kLast, logits.data()).ok());
    }
    if (last_logits != nullptr) *last_logits = logits;
    return out;
  }

  const Tokenizer tok_ = TinyTokenizer();
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
  cb.on_probe_logits = [&](int64_t frontier, std::span<const float> logits) {
    const size_t n_vocab = size_t(model_->config().n_vocab);
    ASSERT_EQ(logits.size(), 4 * n_vocab);
    last_logits[frontier].assign(logits.end() - ptrdiff_t(n_vocab), logits.end());
  };
  auto rows = RunBenchSweep(*model_, tok_, tokens_, o, cb);
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
    EXPECT_EQ(r.probe, FreshProbe(int(r.ctx), 4, tok_.eos_id(), &fresh_logits));
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
  auto plain = RunBenchSweep(*model_, tok_, tokens_, Sweep(12, 12, 1, 0, 2));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  const int32_t first = (*plain)[0].probe[0];
  // The same sweep with that id as the EOS.
  const Tokenizer moved = TinyTokenizer(first);
  auto banned = RunBenchSweep(*model_, moved, tokens_, Sweep(12, 12, 1, 0, 2));
  ASSERT_TRUE(banned.ok()) << banned.status().ToString();
  EXPECT_NE((*banned)[0].probe[0], first);
  EXPECT_EQ((*banned)[0].probe, FreshProbe(12, 2, first));
}

TEST_F(BenchSweepTest, ZeroGenTokensStillSnapshotsAndRestores) {
  auto rows = RunBenchSweep(*model_, tok_, tokens_, Sweep(4, 12, 4, 0, 0));
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
  auto r = RunBenchSweep(*model_, tok_, std::span(tokens_).first(30), Sweep(8, 40, 16));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().ToString().find("the prompt has 30 tokens, --ctx-max 40 needs"),
            std::string::npos)
      << r.status().ToString();
}

}  // namespace
}  // namespace flashkv
