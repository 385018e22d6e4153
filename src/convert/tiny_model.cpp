#include "convert/tiny_model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "convert/ds4_layout.h"
#include "convert/flash_preset.h"
#include "convert/hf_converter.h"
#include "convert/vocab_fit.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"
#include "util/progress.h"

namespace flashkv {
namespace {

uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// xoshiro256** (Blackman & Vigna): small, fast, and defined bit for bit.
class Rng {
 public:
  Rng(uint64_t seed, std::string_view stream) {
    uint64_t x = seed ^ Fnv1a64(stream);
    for (uint64_t& w : s_) w = SplitMix64(x);
  }
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  // [0, 1) with 24 bits: exact in float.
  float Uniform() { return static_cast<float>(Next() >> 40) * 0x1p-24f; }
  // Approximately N(0, 1): the sum of four 16-bit uniforms (Irwin-Hall), centred and scaled.
  // Integer sum, one conversion, one multiply: the same bits on every platform.
  float Normal(float scale_over_sd) {
    const uint64_t r = Next();
    const int32_t s = static_cast<int32_t>((r & 0xffff) + ((r >> 16) & 0xffff) +
                                           ((r >> 32) & 0xffff) + (r >> 48)) -
                      131070;
    return static_cast<float>(s) * scale_over_sd;
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// Standard deviation of the centred sum of four uniform 16-bit integers: sqrt(4 (2^32-1)/12).
const double kIrwinHallSd = std::sqrt(4.0 * (65536.0 * 65536.0 - 1.0) / 12.0);

float NormalScale(double sigma) {
  return static_cast<float>(sigma / kIrwinHallSd);
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// `count` f32 values of a tensor that is stored as F32, F16 or Q8_0.
std::vector<float> FloatValues(const Ds4TensorSpec& spec, uint64_t count, Rng& rng) {
  std::vector<float> v(count);
  std::string_view part = spec.part;
  auto normal = [&](double sigma, float offset) {
    const float k = NormalScale(sigma);
    for (float& x : v) x = offset + rng.Normal(k);
  };
  if (EndsWith(part, "norm.weight")) {
    normal(0.2, 1.0f);  // RMSNorm gains around 1
  } else if (EndsWith(part, "_scale.weight")) {
    for (float& x : v) x = 0.5f + 0.5f * rng.Uniform();  // HC pre/post/comb scales
  } else if (EndsWith(part, "_base.weight")) {
    normal(0.5, 0.0f);
  } else if (part == "attn_sinks.weight") {
    normal(0.2, 0.0f);
  } else if (part == "exp_probs_b.bias") {
    normal(0.1, 0.0f);
  } else if (EndsWith(part, "_ape.weight")) {
    normal(0.5, 0.0f);
  } else if (part == "token_embd.weight") {
    normal(1.0, 0.0f);
  } else {
    normal(1.0 / std::sqrt(static_cast<double>(spec.ne[0])), 0.0f);  // matrices: 1/sqrt(fan_in)
  }
  return v;
}

void PutF16(uint8_t* dst, float v) {
  const uint16_t h = F32ToF16(v);
  std::memcpy(dst, &h, 2);
}

// IQ2_XXS: any bit pattern is a valid block, so the quants are random bytes and only the
// scale is chosen. |value| = d (0.5 + ls) grid / 4 averages about 50 d for random bytes, so
// d = 0.016 / sqrt(fan_in) gives values of about 0.8 / sqrt(fan_in), as ds4-tiny has.
std::vector<uint8_t> RandomIq2xxs(const Ds4TensorSpec& spec, uint64_t nbytes, Rng& rng) {
  std::vector<uint8_t> out(nbytes);
  const double d = 0.016 / std::sqrt(static_cast<double>(spec.ne[0]));
  for (uint64_t b = 0; b < nbytes / sizeof(BlockIQ2_XXS); ++b) {
    uint8_t* blk = out.data() + b * sizeof(BlockIQ2_XXS);
    PutF16(blk, static_cast<float>(d) * (0.8f + 0.4f * rng.Uniform()));
    for (size_t i = 2; i < sizeof(BlockIQ2_XXS); i += 8) {
      const uint64_t r = rng.Next();
      std::memcpy(blk + i, &r, 8);
    }
  }
  return out;
}

// Q2_K: random 4-bit scales/mins and 2-bit quants; dmin = 1.5 d centres the values
// (mean of d·sc·q is 11.25 d, of dmin·m is 7.5 dmin).
std::vector<uint8_t> RandomQ2K(const Ds4TensorSpec& spec, uint64_t nbytes, Rng& rng) {
  std::vector<uint8_t> out(nbytes);
  const double d = 0.08 / std::sqrt(static_cast<double>(spec.ne[0]));
  for (uint64_t b = 0; b < nbytes / sizeof(BlockQ2_K); ++b) {
    uint8_t* blk = out.data() + b * sizeof(BlockQ2_K);
    for (size_t i = 0; i < offsetof(BlockQ2_K, d); i += 8) {
      const uint64_t r = rng.Next();
      std::memcpy(blk + i, &r, 8);
    }
    const float db = static_cast<float>(d) * (0.8f + 0.4f * rng.Uniform());
    PutF16(blk + offsetof(BlockQ2_K, d), db);
    PutF16(blk + offsetof(BlockQ2_K, dmin), 1.5f * db);
  }
  return out;
}

// Hash routing: k distinct experts per token, [V][k] int32.
std::vector<uint8_t> RandomTokenExperts(const Ds4Hparams& hp, Rng& rng) {
  const uint32_t k = hp.n_expert_used, E = hp.n_expert;
  std::vector<int32_t> ids(static_cast<size_t>(hp.n_vocab) * k);
  std::vector<int32_t> pool(E);
  for (uint32_t v = 0; v < hp.n_vocab; ++v) {
    for (uint32_t e = 0; e < E; ++e) pool[e] = static_cast<int32_t>(e);
    for (uint32_t j = 0; j < k; ++j) {  // partial Fisher-Yates
      const uint32_t pick = j + static_cast<uint32_t>(rng.Next() % (E - j));
      std::swap(pool[j], pool[pick]);
      ids[static_cast<size_t>(v) * k + j] = pool[j];
    }
  }
  std::vector<uint8_t> out(ids.size() * 4);
  std::memcpy(out.data(), ids.data(), out.size());
  return out;
}

uint64_t ElementCount(const Ds4TensorSpec& spec) {
  uint64_t count = 1;
  for (uint64_t n : spec.ne) count *= n;
  return count;
}

// Rows [r0, r1) of a tensor (rows = every dimension past ne[0]) from stream `rng`.
Expected<std::vector<uint8_t>> ProduceRows(const Ds4TensorSpec& spec, DType type, uint64_t r0,
                                           uint64_t r1, uint64_t row_bytes, Rng& rng) {
  const uint64_t nbytes = (r1 - r0) * row_bytes;
  switch (type) {
    case DType::kIQ2_XXS:
      return RandomIq2xxs(spec, nbytes, rng);
    case DType::kQ2_K:
      return RandomQ2K(spec, nbytes, rng);
    default:
      return EncodeTensorRows(FloatValues(spec, (r1 - r0) * spec.ne[0], rng), type,
                              {spec.ne[0], r1 - r0});
  }
}

// The chunked streams: chunk c (kChunkValues values of whole rows) comes from stream
// "<name>#c", so chunks are produced in parallel and the bytes do not depend on the thread
// count; a float tensor's values exist only a chunk at a time.
constexpr uint64_t kChunkValues = uint64_t(1) << 22;

Expected<std::vector<uint8_t>> ProduceChunked(const Ds4TensorSpec& spec, DType type,
                                              uint64_t nbytes, uint64_t seed, int threads) {
  const uint64_t rows = ElementCount(spec) / spec.ne[0];
  const uint64_t row_bytes = nbytes / rows;
  const uint64_t chunk_rows = std::max<uint64_t>(1, kChunkValues / spec.ne[0]);
  const uint64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
  std::vector<uint8_t> out(nbytes);
  std::atomic<uint64_t> next{0};
  std::mutex mu;
  Status first_error;
  auto work = [&] {
    for (uint64_t c = next++; c < chunks; c = next++) {
      const uint64_t r0 = c * chunk_rows, r1 = std::min(rows, r0 + chunk_rows);
      Rng rng(seed, spec.name + "#" + std::to_string(c));
      auto bytes = ProduceRows(spec, type, r0, r1, row_bytes, rng);
      if (!bytes.ok() || bytes->size() != (r1 - r0) * row_bytes) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) {
          first_error = bytes.ok() ? Internal("{}: chunk {} has the wrong size", spec.name, c)
                                   : bytes.status().WithContext(spec.name);
        }
        return;
      }
      std::memcpy(out.data() + r0 * row_bytes, bytes->data(), bytes->size());
    }
  };
  std::vector<std::thread> pool;
  const uint64_t n = std::min<uint64_t>(uint64_t(std::max(threads, 1)), chunks);
  for (uint64_t t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (!first_error.ok()) return first_error;
  return out;
}

Ds4Hparams FlashConstants() {
  Ds4Hparams hp;
  hp.n_ctx_train = 1048576;
  hp.n_vocab = kDs4VocabSize;
  hp.n_head_kv = 1;
  hp.head_dim = 192;
  hp.n_rot = 64;
  hp.n_expert_shared = 1;
  hp.n_hc = 4;
  hp.hc_sinkhorn_iters = 20;
  hp.rope_orig_ctx = 65536;
  hp.rope_freq_base = 10000.0f;
  hp.rope_scaling_factor = 16.0f;
  hp.yarn_beta_fast = 32.0f;
  hp.yarn_beta_slow = 1.0f;
  hp.compress_rope_freq_base = 160000.0f;
  hp.expert_weights_scale = 1.5f;
  hp.rms_eps = 1e-6f;
  hp.hc_eps = 1e-6f;
  hp.expert_weights_norm = true;
  hp.indexer_head_dim = 128;
  return hp;
}

}  // namespace

std::vector<std::string> TinyPresetNames() {
  return {"tiny", "small", "flash"};
}

Expected<Ds4Hparams> TinyPresetHparams(std::string_view preset) {
  Ds4Hparams hp = FlashConstants();
  if (preset == "tiny") {
    hp.compress_ratios = {0, 0, 4, 16, 4, 16};
    hp.n_hash_layer = 3;
    hp.n_embd = 256;
    hp.n_head = 4;
    hp.q_lora_rank = 128;
    hp.o_groups = 2;
    hp.o_lora_rank = 64;
    hp.n_expert = 8;
    hp.n_expert_used = 2;
    hp.n_ff_exp = 256;
    hp.n_swa = 32;
    hp.n_indexer_head = 8;
    hp.indexer_top_k = 8;
  } else if (preset == "small") {
    hp.compress_ratios = {0, 0, 4, 128, 4, 128, 4, 128};
    hp.n_hash_layer = 3;
    hp.n_embd = 512;
    hp.n_head = 8;
    hp.q_lora_rank = 256;
    hp.o_groups = 4;
    hp.o_lora_rank = 128;
    hp.n_expert = 16;
    hp.n_expert_used = 4;
    hp.n_ff_exp = 512;
    hp.n_swa = 128;
    hp.n_indexer_head = 16;
    hp.indexer_top_k = 64;
  } else if (IsFlashPreset(preset)) {
    FLASHKV_RETURN_IF_ERROR(SetFlashWidths(preset, hp));
  } else {
    return InvalidArgument("unknown preset '{}' (expected tiny, small or flash[:LAYERS])", preset);
  }
  hp.n_layer = static_cast<uint32_t>(hp.compress_ratios.size());
  hp.swiglu_clamp.assign(hp.n_layer, 10.0f);
  FLASHKV_RETURN_IF_ERROR(hp.Validate());
  return hp;
}

Status AddTinyModel(const Ds4Hparams& hp, const Vocab& vocab, uint64_t seed,
                    const std::string& name, GgufWriter& w, int threads) {
  FLASHKV_RETURN_IF_ERROR(hp.Validate());
  if (vocab.size() != hp.n_vocab)
    return InvalidArgument("vocabulary has {} tokens, the model {} rows", vocab.size(), hp.n_vocab);
  WriteDs4Metadata(hp, name, w);
  WriteVocabToGguf(vocab, w);
  for (const Ds4TensorSpec& spec : Ds4Layout(hp)) {
    const DType type = Ds4TensorType(spec, Ds4WeightScheme::kQ2);
    FLASHKV_ASSIGN_OR_RETURN(uint64_t nbytes,
                             TensorBytes(type, spec.ne.data(), static_cast<int>(spec.ne.size())));
    auto produce = [spec, type, nbytes, seed, hp, threads]() -> Expected<std::vector<uint8_t>> {
      if (threads > 0 && type != DType::kI32) {
        return ProduceChunked(spec, type, nbytes, seed, threads);
      }
      Rng rng(seed, spec.name);
      switch (type) {
        case DType::kIQ2_XXS:
          return RandomIq2xxs(spec, nbytes, rng);
        case DType::kQ2_K:
          return RandomQ2K(spec, nbytes, rng);
        case DType::kI32:
          return RandomTokenExperts(hp, rng);
        default:
          return EncodeTensorRows(FloatValues(spec, ElementCount(spec), rng), type, spec.ne);
      }
    };
    FLASHKV_RETURN_IF_ERROR(w.AddTensorDeferred(spec.name, type, spec.ne, std::move(produce)));
  }
  return Status::Ok();
}

Expected<TinyModelReport> MakeTinyModel(const TinyModelOptions& opt) {
  FLASHKV_ASSIGN_OR_RETURN(Ds4Hparams hp, TinyPresetHparams(opt.preset));
  FLASHKV_ASSIGN_OR_RETURN(Vocab vocab, LoadVocabFromTokenizerJson(opt.tokenizer_path));
  FLASHKV_RETURN_IF_ERROR(FitVocabToModel(vocab, hp.n_vocab, nullptr));
  // Flash-width files are large: chunked streams on every core (tiny and small keep the
  // per-tensor streams their pinned bytes come from).
  const int threads =
      IsFlashPreset(opt.preset) ? int(std::max(1u, std::thread::hardware_concurrency())) : 0;
  GgufWriter w;
  FLASHKV_RETURN_IF_ERROR(AddTinyModel(
      hp, vocab, opt.seed,
      fmt::format("flashkv-{} (random weights, seed {})", opt.preset, opt.seed), w, threads));
  {
    FLASHKV_ASSIGN_OR_RETURN(std::vector<TinyTensorEntry> dir, TinyModelDirectory(hp));
    Progress progress("make-tiny", (dir.back().offset + dir.back().nbytes) >> 20, "MiB");
    GgufWriter::ProgressFn on_tensor;
    if (opt.show_progress) {
      on_tensor = [&](size_t done, size_t, const std::string& t) {
        progress.Update((dir[done - 1].offset + dir[done - 1].nbytes) >> 20, t);
      };
    }
    FLASHKV_RETURN_IF_ERROR(w.Write(opt.out_path, on_tensor));
  }
  TinyModelReport report;
  report.tensors = w.tensor_count();
  std::error_code ec;
  report.bytes = std::filesystem::file_size(opt.out_path, ec);
  return report;
}

}  // namespace flashkv
