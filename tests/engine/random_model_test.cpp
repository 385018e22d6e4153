// Random-weight models (model/random_model.h) and the backend generator behind them
// (Backend::RandomWeight, CPU implementation): the source syntax, the shapes against
// hand-computed figures, valid blocks of every generated type with values inside the
// bounds the block scales imply, and a real Model over a layer-reduced tiny shape whose
// chunked prefill equals token-by-token decode bit for bit (the Model contract) — through
// Runtime::Open, the path `flashkv bench --model random:...` takes.
#include "model/random_model.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "runtime/runtime.h"
#include "tensor/quant.h"
#include "tools/bench_sweep.h"

namespace flashkv {
namespace {

TEST(RandomModelSource, ParsesShapesAndLayerCounts) {
  auto flash = ParseRandomModelSource("random:flash");
  ASSERT_TRUE(flash.ok()) << flash.status().ToString();
  EXPECT_EQ(flash->shape, "flash");
  EXPECT_EQ(flash->n_layer, 43);
  EXPECT_FALSE(flash->reduced());
  EXPECT_EQ(flash->Source(), "random:flash");

  auto reduced = ParseRandomModelSource("random:flash:12");
  ASSERT_TRUE(reduced.ok());
  EXPECT_EQ(reduced->n_layer, 12);
  EXPECT_TRUE(reduced->reduced());
  EXPECT_EQ(reduced->Source(), "random:flash:12");
  EXPECT_EQ(reduced->Describe(),
            "random:flash:12 (DeepSeek-V4-Flash shape, 12 of 43 layers, random weights)");

  auto tiny = ParseRandomModelSource("random:tiny");
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->n_layer, 6);

  EXPECT_TRUE(IsRandomModelSource("random:whatever"));
  EXPECT_FALSE(IsRandomModelSource("models/flashkv-tiny.gguf"));
  for (const char* bad : {"random:huge", "random:flash:0", "random:flash:44", "random:flash:x",
                          "random:flash:", "random:tiny:7", "random:", "flash"}) {
    auto s = ParseRandomModelSource(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(ParseRandomModelSource("random:huge").status().message().find("flash or tiny"),
            std::string::npos);
}

KvShape ShapeOf(const ModelConfig& c) {
  KvShape shape;
  shape.head_dim = c.head_dim;
  shape.n_swa = c.n_swa;
  shape.indexer_dim = c.indexer_head_dim;
  shape.ctx_size = 1 << 16;
  for (int l = 0; l < c.n_layer; ++l) {
    shape.layers.push_back({c.compress_ratio(l), c.is_overlapping(l), c.has_indexer(l)});
  }
  return shape;
}

TEST(RandomModelConfig, FlashAndTinyShapes) {
  const ModelConfig flash = RandomModelConfig(*ParseRandomModelSource("random:flash"));
  ASSERT_TRUE(flash.Validate().ok()) << flash.Validate().ToString();
  EXPECT_EQ(flash.n_layer, 43);
  EXPECT_EQ(flash.n_embd, 4096);
  EXPECT_EQ(flash.n_expert, 256);
  EXPECT_EQ(flash.n_vocab, 129280);
  EXPECT_EQ(flash.compress_ratios.size(), 43u);
  EXPECT_EQ((std::vector<int>(flash.compress_ratios.begin(), flash.compress_ratios.begin() + 5)),
            (std::vector<int>{0, 0, 4, 128, 4}));
  EXPECT_TRUE(CheckOfficialNumericsSupported(flash).ok());

  // Flash's figure (docs/DS4_MODEL.md §7): 3440 floats = 13,760 B of KV per token over
  // whole 128-token periods past the 128-row window.
  EXPECT_EQ(LiveKvBytes(ShapeOf(flash), 2048 + 128) - LiveKvBytes(ShapeOf(flash), 2048),
            128u * 13760u);

  const ModelConfig two = RandomModelConfig(*ParseRandomModelSource("random:flash:2"));
  ASSERT_TRUE(two.Validate().ok()) << two.Validate().ToString();
  EXPECT_EQ(two.n_hash_layer, 2);  // cut to the layer count

  // The tiny shape is make-tiny's: its live KV is the figure the bench tests derive by hand
  // (tests/engine/CMakeLists.txt): 325632 bytes at 64 tokens, 736 per token per 16.
  const ModelConfig tiny = RandomModelConfig(*ParseRandomModelSource("random:tiny"));
  ASSERT_TRUE(tiny.Validate().ok()) << tiny.Validate().ToString();
  const KvShape shape = ShapeOf(tiny);
  EXPECT_EQ(LiveKvBytes(shape, 64), 325632u);
  EXPECT_EQ(LiveKvBytes(shape, 80) - LiveKvBytes(shape, 64), 16u * 736u);
}

std::vector<float> Dequantized(CpuBackend& be, const Weight& w) {
  const uint64_t rows = w.ne[1] * w.ne[2];
  std::vector<uint8_t> bytes(w.row_bytes * rows);
  EXPECT_TRUE(be.Read(w.data, bytes.data(), bytes.size()).ok());
  std::vector<float> out(w.ne[0] * rows);
  for (uint64_t r = 0; r < rows; ++r) {
    EXPECT_TRUE(DequantizeRow(w.type, bytes.data() + r * w.row_bytes, out.data() + r * w.ne[0],
                              int64_t(w.ne[0]))
                    .ok());
  }
  return out;
}

// Every value finite and |v| <= bound·scale (the largest code times the largest block
// scale the generator sets: jitter < 1), and the values spread (not all one value).
void ExpectValid(CpuBackend& be, DType t, uint64_t ne0, float bound) {
  const float scale = 0.5f;
  auto w = be.RandomWeight("w", t, {ne0, 6, 2}, 77, scale);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->type, t);
  const std::vector<float> v = Dequantized(be, *w);
  float max_abs = 0;
  double sum = 0, sum2 = 0;
  for (float x : v) {
    ASSERT_TRUE(std::isfinite(x)) << GetDTypeInfo(t).name;
    max_abs = std::max(max_abs, std::fabs(x));
    sum += x;
    sum2 += double(x) * x;
  }
  EXPECT_LE(max_abs, bound * scale) << GetDTypeInfo(t).name;
  EXPECT_GT(max_abs, 0.1f * scale) << GetDTypeInfo(t).name;
  const double mean = sum / double(v.size());
  EXPECT_GT(sum2 / double(v.size()) - mean * mean, 1e-4) << GetDTypeInfo(t).name;
}

TEST(RandomWeight, CpuBlocksAreValidAndBounded) {
  ThreadPool pool(2);
  CpuBackend be(&pool);
  ExpectValid(be, DType::kF32, 64, 1.0f);
  ExpectValid(be, DType::kF16, 64, 1.0f);
  ExpectValid(be, DType::kBF16, 64, 1.0f);
  // Q8_0: d·q with d = scale·jitter/127, |q| <= 128.
  ExpectValid(be, DType::kQ8_0, 64, 128.0f / 127.0f * 1.001f);
  // Q2_K: d·sc·q − dmin·m, d = scale·j/20, dmin = scale·j/40, sc, m <= 15, q <= 3.
  ExpectValid(be, DType::kQ2_K, 256, 15.0f * 3.0f / 20.0f + 15.0f / 40.0f);
  // Q4_K: d·sc·q − dmin·m, d = scale·j/300, dmin = scale·j/600, sc, m <= 63, q <= 15.
  ExpectValid(be, DType::kQ4_K, 256, 63.0f * 15.0f / 300.0f + 63.0f / 600.0f);
  // IQ2_XXS: d·(0.5 + ls)·0.25·grid, d = scale·j/40, ls <= 15, grid <= 43.
  ExpectValid(be, DType::kIQ2_XXS, 256, 15.5f * 0.25f * 43.0f / 40.0f);
}

TEST(RandomWeight, DeterministicPerSeedIncludingTailBytes) {
  CpuBackend be(nullptr);
  // One Q8_0 block per row, 3 rows: 102 bytes, two past the last whole 4-byte word.
  auto a = be.RandomWeight("a", DType::kQ8_0, {32, 3, 1}, 5, 1.0f);
  auto b = be.RandomWeight("b", DType::kQ8_0, {32, 3, 1}, 5, 1.0f);
  auto c = be.RandomWeight("c", DType::kQ8_0, {32, 3, 1}, 6, 1.0f);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  std::vector<uint8_t> ba(102), bb(102), bc(102);
  ASSERT_TRUE(be.Read(a->data, ba.data(), 102).ok());
  ASSERT_TRUE(be.Read(b->data, bb.data(), 102).ok());
  ASSERT_TRUE(be.Read(c->data, bc.data(), 102).ok());
  EXPECT_EQ(ba, bb);
  EXPECT_NE(ba, bc);
  // The tail holds the low bytes of one more hashed word, not the allocation's zero fill
  // (a 1-in-65536 false alarm for an unlucky hash; seed 5 is not one).
  EXPECT_FALSE(ba[100] == 0 && ba[101] == 0);
}

TEST(RandomWeight, RejectsTypesAndShapesItCannotMake) {
  CpuBackend be(nullptr);
  auto i32 = be.RandomWeight("table", DType::kI32, {4, 4, 1}, 1, 1.0f);
  ASSERT_FALSE(i32.ok());
  EXPECT_EQ(i32.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(i32.status().message().find("table"), std::string::npos);
  auto partial = be.RandomWeight("blk.0.attn_kv", DType::kQ8_0, {48, 4, 1}, 1, 1.0f);
  ASSERT_FALSE(partial.ok());
  EXPECT_EQ(partial.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(partial.status().message().find("blk.0.attn_kv"), std::string::npos);
  EXPECT_FALSE(be.RandomWeight("empty", DType::kF32, {4, 0, 1}, 1, 1.0f).ok());
}

TEST(RandomModel, RuntimeOpensAModelWhoseChunkedPrefillEqualsDecode) {
  RuntimeOptions ro;
  ro.model_path = "random:tiny:3";
  ro.threads = 2;
  auto rt = Runtime::Open(ro);
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  const RandomModelInfo* info = (*rt)->random_model();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->spec.Source(), "random:tiny:3");
  Model& model = (*rt)->model();
  const ModelConfig& c = model.config();
  EXPECT_EQ(c.n_layer, 3);
  // Official numerics with q8 activations, as for a ds4 GGUF of this shape.
  EXPECT_EQ(model.options().numerics, NumericsMode::kOfficial);
  EXPECT_EQ(model.options().act_quant, ActQuantMode::kQ8);
  // At least the F16 embedding and the Q8_0 lm head (8 blocks of 34 bytes per row).
  const uint64_t head = uint64_t(c.n_vocab) * (2 * c.n_embd + c.n_embd / 32 * 34);
  EXPECT_GT(info->total_bytes, head);
  EXPECT_LT(info->bytes_per_token, info->total_bytes);

  const std::vector<int32_t> tokens = {1, 500, 70000, 129279, 42, 42, 9, 1000};
  const size_t V = size_t(c.n_vocab);
  auto st_all = model.NewState(16);
  auto st_one = model.NewState(16);
  ASSERT_TRUE(st_all.ok() && st_one.ok());
  std::vector<float> all(tokens.size() * V), one(tokens.size() * V);
  ASSERT_TRUE(model.Forward(tokens, *st_all, LogitsFor::kAll, all.data()).ok());
  for (size_t i = 0; i < tokens.size(); ++i) {
    ASSERT_TRUE(model
                    .Forward(std::span<const int32_t>(&tokens[i], 1), *st_one, LogitsFor::kLast,
                             one.data() + i * V)
                    .ok());
  }
  EXPECT_EQ(std::memcmp(all.data(), one.data(), all.size() * sizeof(float)), 0);
  float lo = all[0], hi = all[0];
  for (float x : all) {
    ASSERT_TRUE(std::isfinite(x));
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  EXPECT_GT(hi - lo, 1e-3f);  // the logits depend on the weights, not a constant
  // Different tokens give different next-token logits.
  EXPECT_NE(std::memcmp(all.data(), all.data() + V, V * sizeof(float)), 0);

  RuntimeOptions bad = ro;
  bad.model_path = "random:huge";
  auto err = Runtime::Open(bad);
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.status().message().find("unknown random model shape 'huge'"), std::string::npos);
}

TEST(RandomModel, SameShapeSameWeightsAcrossModels) {
  ThreadPool pool(2);
  CpuBackend be(&pool);
  const RandomModelSpec spec = *ParseRandomModelSource("random:tiny:1");
  auto a = MakeRandomModel(spec, be);
  auto b = MakeRandomModel(spec, be);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString();
  const std::vector<int32_t> tokens = {3, 1, 4, 1, 5};
  std::vector<float> la((*a)->config().n_vocab), lb(la.size());
  auto sa = (*a)->NewState(8);
  auto sb = (*b)->NewState(8);
  ASSERT_TRUE(sa.ok() && sb.ok());
  ASSERT_TRUE((*a)->Forward(tokens, *sa, LogitsFor::kLast, la.data()).ok());
  ASSERT_TRUE((*b)->Forward(tokens, *sb, LogitsFor::kLast, lb.data()).ok());
  EXPECT_EQ(la, lb);
  EXPECT_EQ(RandomModelFingerprint(spec), RandomModelFingerprint(spec));
  EXPECT_NE(RandomModelFingerprint(spec),
            RandomModelFingerprint(*ParseRandomModelSource("random:tiny:2")));
}

}  // namespace
}  // namespace flashkv
