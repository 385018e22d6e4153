// `flashkv make-tiny`: a random-weight model in exactly the layout of antirez's DS4 GGUFs
// (same tensor names, types and deepseek4.* keys as ds4-tiny.gguf: IQ2_XXS gate/up and Q2_K
// down routed experts, Q8_0 attention/shared/output, F16 embedding/HC/compressor/indexer/
// router, F32 norms/sinks/biases) with the real DeepSeek tokenizer, for tests and the
// out-of-the-box default model. Must not: run the model.
//
// Deterministic on every platform: values come from xoshiro256** streams seeded per tensor
// (splitmix64 of the seed and the tensor name), turned into numbers with integer sums and
// single float multiplies (no libm, no std:: distributions, compiled without FMA
// contraction), so the same seed gives the same bytes everywhere.
//
// Scales keep activations unit-sized: matrices N(0, 1/fan_in) like a trained model's init,
// norms 1 ± 0.2, embeddings N(0, 1); RMSNorm before every block keeps the residual bounded.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "convert/ds4_hparams.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/vocab.h"
#include "util/status.h"

namespace flashkv {

// DeepSeek V4's vocab_size: the 128815-id V3 tokenizer plus V4's markers, padded as
// DeepSeek pads it.
inline constexpr uint32_t kDs4VocabSize = 129280;

// The presets' hyperparameters, vocab_size kDs4VocabSize:
//   tiny  — 6 layers [sliding, sliding, CSA 4, HCA 16, CSA 4, HCA 16], 3 hash layers first,
//           D 256, 4 heads x 192 (64 RoPE), window 32, indexer 8 x 128 top-8, 8 experts top-2
//           of width 256: compressed rows from token 16, indexer selection from token 36,
//           the window crossed at 32.
//   small — 8 layers [0, 0, 4, 128, 4, 128, 4, 128], D 512, 8 heads x 192, window 128,
//           indexer 16 x 128 top-64, 16 experts top-4 of width 512: for benchmarks.
//   flash[:LAYERS] — DeepSeek V4 Flash's widths, its first LAYERS (default all 43) layers
//           (convert/flash_preset.h): ~81 GB at 43 layers.
Expected<Ds4Hparams> TinyPresetHparams(std::string_view preset);
std::vector<std::string> TinyPresetNames();

// Writes the metadata (general.name "flashkv-<preset> (random weights, seed N)"), the
// vocabulary and every tensor of Ds4Layout(hp) under the q2 scheme, generated lazily by
// Write(). `vocab` must already have hp.n_vocab tokens. threads 0: one stream per tensor
// (the bytes of the tiny and small presets); N >= 1: one stream per chunk of rows, produced
// on N threads, the same bytes for every N (MakeTinyModel uses it for flash).
Status AddTinyModel(const Ds4Hparams& hp, const Vocab& vocab, uint64_t seed,
                    const std::string& name, GgufWriter& writer, int threads = 0);

struct TinyModelOptions {
  std::string preset = "tiny";
  uint64_t seed = 0;
  std::string tokenizer_path;  // HF tokenizer.json (the real DeepSeek one)
  std::string out_path;
  bool show_progress = true;
};

struct TinyModelReport {
  size_t tensors = 0;
  uint64_t bytes = 0;
};

Expected<TinyModelReport> MakeTinyModel(const TinyModelOptions& options);

}  // namespace flashkv
