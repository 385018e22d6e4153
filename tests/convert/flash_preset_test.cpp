// `make-tiny --preset flash[:LAYERS]` (convert/flash_preset.h): Flash's widths and schedule,
// the 43-layer file's tensor directory computed without writing its ~81 GB, and a small
// file of the same layout (fewer layers, reduced widths): its written directory is the
// computed one, and it loads through the normal loader and runs.
#include "convert/flash_preset.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "backend/cpu/cpu_backend.h"
#include "convert/tiny_model.h"
#include "convert/vocab_fit.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_types.h"
#include "mini_tokenizer.h"
#include "model/model.h"
#include "safetensors_builder.h"
#include "util/thread_pool.h"

namespace flashkv {
namespace {

const TinyTensorEntry* Find(const std::vector<TinyTensorEntry>& dir, const std::string& name) {
  for (const TinyTensorEntry& e : dir) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

TEST(FlashPresetTest, WidthsAndLayerSchedule) {
  auto hp = TinyPresetHparams("flash");
  ASSERT_TRUE(hp.ok()) << hp.status().ToString();
  EXPECT_EQ(hp->n_layer, 43u);
  EXPECT_EQ(hp->n_embd, 4096u);
  EXPECT_EQ(hp->n_head, 64u);
  EXPECT_EQ(hp->head_dim, 512u);
  EXPECT_EQ(hp->n_expert, 256u);
  EXPECT_EQ(hp->n_expert_used, 6u);
  EXPECT_EQ(hp->n_ff_exp, 2048u);
  EXPECT_EQ(hp->n_hash_layer, 3u);
  EXPECT_EQ(hp->n_vocab, kDs4VocabSize);
  ASSERT_EQ(hp->compress_ratios.size(), 43u);
  EXPECT_EQ(hp->compress_ratios[0], 0u);
  EXPECT_EQ(hp->compress_ratios[1], 0u);
  EXPECT_EQ(hp->compress_ratios[2], 4u);
  EXPECT_EQ(hp->compress_ratios[3], 128u);
  EXPECT_EQ(hp->compress_ratios[42], 4u);
  auto one = TinyPresetHparams("flash:1");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->n_layer, 1u);
  EXPECT_EQ(one->n_hash_layer, 1u);
  EXPECT_EQ(one->n_embd, 4096u);
  for (const char* bad : {"flash:0", "flash:44", "flash:", "flash:x", "flash:3x", "flash:-1"}) {
    EXPECT_EQ(TinyPresetHparams(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

// The 43-layer file's directory, from the layout alone (no data is produced).
TEST(FlashPresetTest, DirectoryOfTheFullFile) {
  auto hp = TinyPresetHparams("flash");
  ASSERT_TRUE(hp.ok());
  auto dir = TinyModelDirectory(*hp);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  struct Want {
    const char* name;
    DType type;
    std::vector<uint64_t> ne;
  };
  const Want wants[] = {
      {"token_embd.weight", DType::kF16, {4096, 129280}},
      {"output.weight", DType::kQ8_0, {4096, 129280}},
      {"blk.0.attn_q_a.weight", DType::kQ8_0, {4096, 1024}},
      {"blk.0.attn_q_b.weight", DType::kQ8_0, {1024, 32768}},
      {"blk.0.attn_kv.weight", DType::kQ8_0, {4096, 512}},
      {"blk.0.ffn_gate_exps.weight", DType::kIQ2_XXS, {4096, 2048, 256}},
      {"blk.0.ffn_up_exps.weight", DType::kIQ2_XXS, {4096, 2048, 256}},
      {"blk.0.ffn_down_exps.weight", DType::kQ2_K, {2048, 4096, 256}},
      {"blk.42.ffn_down_exps.weight", DType::kQ2_K, {2048, 4096, 256}},
      {"blk.0.ffn_gate_shexp.weight", DType::kQ8_0, {4096, 2048}},
  };
  for (const Want& w : wants) {
    const TinyTensorEntry* e = Find(*dir, w.name);
    ASSERT_NE(e, nullptr) << w.name;
    EXPECT_EQ(e->type, w.type) << w.name;
    EXPECT_EQ(e->ne, w.ne) << w.name;
  }
  EXPECT_EQ(Find(*dir, "blk.1.indexer.proj.weight"), nullptr);  // sliding layers: no indexer
  uint64_t end = 0;
  for (const TinyTensorEntry& e : *dir) {
    EXPECT_EQ(e.offset % kGgufDefaultAlignment, 0u) << e.name;
    EXPECT_GE(e.offset, end) << e.name;
    EXPECT_LT(e.offset - end, kGgufDefaultAlignment) << e.name;
    end = e.offset + e.nbytes;
  }
  // Every layer's routed experts alone: 2 x 4096 x 2048 x 256 IQ2_XXS values at 66 bytes per
  // 256 and 2048 x 4096 x 256 Q2_K values at 84 bytes per 256.
  const uint64_t experts = 2 * (4096ull * 2048 * 256 / 256 * 66) + 2048ull * 4096 * 256 / 256 * 84;
  EXPECT_GT(end, 43 * experts);
  EXPECT_LT(end, 82ull << 30);  // the q2 mix's ~81 GB (random:flash: 80.76 GiB)
}

// Four layers (sliding, sliding, CSA with indexer, HCA; hash then top-k routing) at reduced
// widths, as MakeTinyModel writes flash files (chunked streams on several threads).
Ds4Hparams ReducedFlash() {
  Ds4Hparams hp = *TinyPresetHparams("flash:4");
  hp.n_vocab = 1024;
  hp.n_embd = 256;
  hp.n_head = 4;
  hp.q_lora_rank = 128;
  hp.o_groups = 2;
  hp.o_lora_rank = 64;
  hp.n_expert = 8;
  hp.n_expert_used = 2;
  hp.n_ff_exp = 256;
  hp.n_indexer_head = 8;
  hp.indexer_top_k = 8;
  return hp;
}

std::vector<uint8_t> BuildReducedFlash(int threads) {
  const Ds4Hparams hp = ReducedFlash();
  testing::TempDir tmp("flash_preset_vocab");
  testing::WriteMiniTokenizer(tmp.path() / "tokenizer.json", 1100);
  auto vocab = LoadVocabFromTokenizerJson((tmp.path() / "tokenizer.json").string());
  EXPECT_TRUE(vocab.ok());
  EXPECT_TRUE(FitVocabToModel(*vocab, hp.n_vocab, nullptr).ok());
  GgufWriter w;
  Status s = AddTinyModel(hp, *vocab, 3, "flash-width test", w, threads);
  EXPECT_TRUE(s.ok()) << s.ToString();
  auto bytes = w.WriteToBytes();
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

TEST(FlashPresetTest, ReducedWidthFileHasTheComputedDirectory) {
  std::vector<uint8_t> bytes = BuildReducedFlash(2);
  ASSERT_FALSE(bytes.empty());
  const uint64_t size = bytes.size();
  auto file = GgufFile::FromBytes(std::move(bytes));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto dir = TinyModelDirectory(ReducedFlash());
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  ASSERT_EQ(file->tensors().size(), dir->size());
  for (size_t i = 0; i < dir->size(); ++i) {
    const GgufTensorInfo& got = file->tensors()[i];
    const TinyTensorEntry& want = (*dir)[i];
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.type, want.type) << want.name;
    EXPECT_EQ(got.ne, want.ne) << want.name;
    EXPECT_EQ(got.offset, want.offset) << want.name;
    EXPECT_EQ(got.nbytes, want.nbytes) << want.name;
  }
  EXPECT_EQ(file->data_offset() + dir->back().offset + dir->back().nbytes, size);
  EXPECT_NE(file->FindTensor("blk.2.indexer.proj.weight"), nullptr);
  EXPECT_NE(file->FindTensor("blk.3.attn_compressor_kv.weight"), nullptr);
}

// The chunked streams give the same file on any number of threads, and another file than
// the per-tensor streams (so chunking is really in use).
TEST(FlashPresetTest, ChunkedBytesDoNotDependOnTheThreadCount) {
  const std::vector<uint8_t> one = BuildReducedFlash(1);
  ASSERT_FALSE(one.empty());
  EXPECT_EQ(BuildReducedFlash(3), one);
  const std::vector<uint8_t> per_tensor = BuildReducedFlash(0);
  ASSERT_EQ(per_tensor.size(), one.size());
  EXPECT_NE(per_tensor, one);
}

// The reduced file through Model::Load on the CPU backend: a prefill in one chunk and token
// by token give the same logits bits, and they are finite and not constant.
TEST(FlashPresetTest, ReducedWidthFileLoadsAndRuns) {
  const std::vector<uint8_t> bytes = BuildReducedFlash(2);
  ASSERT_FALSE(bytes.empty());
  testing::TempDir tmp("flash_preset_load");
  const std::string path = (tmp.path() / "flash4.gguf").string();
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    ASSERT_TRUE(out.good());
  }
  ThreadPool pool(2);
  CpuBackend be(&pool);
  auto model = Model::Load(path, be);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const std::vector<int32_t> tokens = {1, 17, 300, 5, 999, 42, 7, 640};
  const size_t V = (*model)->config().n_vocab;
  std::vector<std::vector<float>> runs;
  for (int chunk : {0, 1}) {
    auto st = (*model)->NewState(16);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    std::vector<float> logits(tokens.size() * V);
    Status s = (*model)->Forward(tokens, *st, LogitsFor::kAll, logits.data(), chunk);
    ASSERT_TRUE(s.ok()) << s.ToString();
    runs.push_back(std::move(logits));
  }
  EXPECT_EQ(runs[0], runs[1]);
  float lo = runs[0][0], hi = runs[0][0];
  for (float v : runs[0]) {
    ASSERT_TRUE(std::isfinite(v));
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GT(hi - lo, 0.1f);
}

}  // namespace
}  // namespace flashkv
