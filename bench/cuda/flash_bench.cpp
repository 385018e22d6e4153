// flashkv_bench_cuda: DeepSeek V4 Flash's real shape (43 layers, D 4096, 256 experts, vocab
// 129280) in the q2 quant mix (IQ2_XXS gate/up, Q2_K down, Q8_0 attention / shared /
// output, F16 HC, compressor, indexer, router and embedding, F32 vectors), with random
// weights generated on the GPU — the 81 GB file would not fit the benchmark machine's disk.
// Runs the model's own blocks (model/chunk_context.h) on CudaBackend and reports:
//   prefill tokens/s up to each context frontier (chunks of --chunk tokens) and for the
//   chunk ending there; decode tokens/s at the frontier; bytes read per decoded token and
//   the fraction of the HBM bound; snapshot GPU→host→disk and disk→host→GPU GB/s; and
//   time to first token for a --ttft-token prompt, cold and restored from disk.
// Output: a readable table on stdout and, with --json, one JSON object.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_backend.h"
#include "kv/kv_state.h"
#include "model/activations.h"
#include "model/chunk_context.h"
#include "model/model_config.h"
#include "model/model_options.h"
#include "model/rope_table.h"

namespace flashkv {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

ModelConfig FlashConfig(int n_layer) {
  ModelConfig c;
  c.name = "DeepSeek-V4-Flash shape, random weights";
  c.n_layer = n_layer;
  c.n_embd = 4096;
  c.n_vocab = 129280;
  c.n_head = 64;
  c.n_head_kv = 1;
  c.head_dim = 512;
  c.n_rot = 64;
  c.q_lora_rank = 1024;
  c.o_lora_rank = 1024;
  c.n_out_group = 8;
  c.n_expert = 256;
  c.n_expert_used = 6;
  c.n_expert_shared = 1;
  c.n_ff_exp = 2048;
  c.n_hash_layer = 3;
  c.n_swa = 128;
  c.indexer_heads = 64;
  c.indexer_head_dim = 128;
  c.indexer_top_k = 512;
  c.n_hc = 4;
  c.hc_sinkhorn_iters = 20;
  c.context_length = 1048576;
  c.rope_freq_base = 10000;
  c.compress_rope_freq_base = 160000;
  c.rope_scaling_factor = 16;
  c.rope_orig_ctx = 65536;
  c.yarn_beta_fast = 32;
  c.yarn_beta_slow = 1;
  c.rms_eps = 1e-6f;
  c.hc_eps = 1e-6f;
  c.expert_weights_scale = 1.5f;
  for (int l = 0; l < n_layer; ++l) {
    c.compress_ratios.push_back(l < 2 ? 0 : (l % 2 == 0 ? 4 : 128));
    c.swiglu_clamp.push_back(10.0f);
  }
  return c;
}

// Builds every weight on the device; also counts the bytes one decoded token reads.
class WeightMaker {
 public:
  explicit WeightMaker(CudaBackend& be) : be_(be) {}

  Expected<Weight> Random(const std::string& name, DType t, std::array<uint64_t, 3> ne, float scale,
                          uint64_t bytes_per_token_rows) {
    auto w = be_.RandomWeight(name, t, ne, seed_++ * 0x9e3779b9ull, scale);
    if (w.ok()) {
      total_ += w->row_bytes * ne[1] * ne[2];
      per_token_ += w->row_bytes * bytes_per_token_rows;
    }
    return w;
  }
  // A dense matrix read whole by every token.
  Expected<Weight> Dense(const std::string& name, DType t, uint64_t in, uint64_t out) {
    return Random(name, t, {in, out, 1}, 1.0f / std::sqrt(float(in)), out);
  }
  Expected<Weight> Vector(const std::string& name, std::vector<float> v) {
    host_.push_back(std::move(v));
    const auto& h = host_.back();
    WeightSource src{name,
                     DType::kF32,
                     {h.size(), 1, 1},
                     reinterpret_cast<const uint8_t*>(h.data()),
                     h.size() * sizeof(float)};
    auto w = be_.PlaceWeight(src);
    if (w.ok()) {
      total_ += h.size() * 4;
      per_token_ += h.size() * 4;
    }
    return w;
  }
  Expected<Weight> Table(const std::string& name, std::vector<int32_t> v, uint64_t k) {
    host_i_.push_back(std::move(v));
    const auto& h = host_i_.back();
    WeightSource src{name,
                     DType::kI32,
                     {k, h.size() / k, 1},
                     reinterpret_cast<const uint8_t*>(h.data()),
                     h.size() * 4};
    auto w = be_.PlaceWeight(src);
    if (w.ok()) total_ += h.size() * 4;
    return w;
  }
  uint64_t total() const { return total_; }
  uint64_t per_token() const { return per_token_; }
  void AddPerToken(uint64_t b) { per_token_ += b; }

 private:
  CudaBackend& be_;
  uint64_t seed_ = 1;
  uint64_t total_ = 0;
  uint64_t per_token_ = 0;
  std::vector<std::vector<float>> host_;
  std::vector<std::vector<int32_t>> host_i_;
};

std::vector<float> Constant(size_t n, float v) {
  return std::vector<float>(n, v);
}
std::vector<float> Uniform(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

Expected<ModelWeights> MakeWeights(const ModelConfig& c, WeightMaker& m) {
  ModelWeights w;
  const uint64_t D = c.n_embd, V = c.n_vocab, hc = c.hc_dim(), mix = c.hc_mix_dim();
  // The embedding: one row per token.
  FLASHKV_ASSIGN_OR_RETURN(w.token_embd, m.Random("token_embd", DType::kF16, {D, V, 1}, 1.0f, 1));
  FLASHKV_ASSIGN_OR_RETURN(w.output_hc_fn,
                           m.Dense("output_hc_fn", DType::kF16, hc, uint64_t(c.n_hc)));
  FLASHKV_ASSIGN_OR_RETURN(w.output_hc_scale, m.Vector("output_hc_scale", {1.0f}));
  FLASHKV_ASSIGN_OR_RETURN(w.output_hc_base, m.Vector("output_hc_base", Constant(c.n_hc, 0.0f)));
  FLASHKV_ASSIGN_OR_RETURN(w.output_norm, m.Vector("output_norm", Constant(D, 1.0f)));
  FLASHKV_ASSIGN_OR_RETURN(w.output, m.Dense("output", DType::kQ8_0, D, V));
  for (int l = 0; l < c.n_layer; ++l) {
    LayerWeights L;
    const std::string p = "blk." + std::to_string(l) + ".";
    const int ratio = c.compress_ratio(l);
    FLASHKV_ASSIGN_OR_RETURN(L.hc_attn_fn, m.Dense(p + "hc_attn_fn", DType::kF16, hc, mix));
    FLASHKV_ASSIGN_OR_RETURN(L.hc_attn_scale, m.Vector(p + "hc_attn_scale", {1.0f, 1.0f, 1.0f}));
    FLASHKV_ASSIGN_OR_RETURN(L.hc_attn_base,
                             m.Vector(p + "hc_attn_base", Uniform(mix, -0.1f, 0.1f, l)));
    FLASHKV_ASSIGN_OR_RETURN(L.hc_ffn_fn, m.Dense(p + "hc_ffn_fn", DType::kF16, hc, mix));
    FLASHKV_ASSIGN_OR_RETURN(L.hc_ffn_scale, m.Vector(p + "hc_ffn_scale", {1.0f, 1.0f, 1.0f}));
    FLASHKV_ASSIGN_OR_RETURN(L.hc_ffn_base,
                             m.Vector(p + "hc_ffn_base", Uniform(mix, -0.1f, 0.1f, 100 + l)));
    FLASHKV_ASSIGN_OR_RETURN(L.attn_norm, m.Vector(p + "attn_norm", Constant(D, 1.0f)));
    FLASHKV_ASSIGN_OR_RETURN(L.attn_q_a, m.Dense(p + "attn_q_a", DType::kQ8_0, D, c.q_lora_rank));
    FLASHKV_ASSIGN_OR_RETURN(L.attn_q_a_norm,
                             m.Vector(p + "attn_q_a_norm", Constant(c.q_lora_rank, 1.0f)));
    FLASHKV_ASSIGN_OR_RETURN(L.attn_q_b,
                             m.Dense(p + "attn_q_b", DType::kQ8_0, c.q_lora_rank, c.q_dim()));
    FLASHKV_ASSIGN_OR_RETURN(L.attn_kv, m.Dense(p + "attn_kv", DType::kQ8_0, D, c.head_dim));
    FLASHKV_ASSIGN_OR_RETURN(L.attn_kv_norm,
                             m.Vector(p + "attn_kv_norm", Constant(c.head_dim, 1.0f)));
    FLASHKV_ASSIGN_OR_RETURN(L.attn_sinks,
                             m.Vector(p + "attn_sinks", Uniform(c.n_head, -1, 1, 200 + l)));
    FLASHKV_ASSIGN_OR_RETURN(L.attn_output_a,
                             m.Dense(p + "attn_output_a", DType::kQ8_0, c.group_in_dim(),
                                     uint64_t(c.n_out_group) * c.o_lora_rank));
    FLASHKV_ASSIGN_OR_RETURN(L.attn_output_b, m.Dense(p + "attn_output_b", DType::kQ8_0,
                                                      uint64_t(c.n_out_group) * c.o_lora_rank, D));
    if (ratio != 0) {
      const uint64_t width = c.compress_width(l);
      FLASHKV_ASSIGN_OR_RETURN(L.compressor_ape, m.Random(p + "compressor_ape", DType::kF16,
                                                          {width, uint64_t(ratio), 1}, 0.5f, 0));
      FLASHKV_ASSIGN_OR_RETURN(L.compressor_kv,
                               m.Dense(p + "compressor_kv", DType::kF16, D, width));
      FLASHKV_ASSIGN_OR_RETURN(L.compressor_gate,
                               m.Dense(p + "compressor_gate", DType::kF16, D, width));
      FLASHKV_ASSIGN_OR_RETURN(L.compressor_norm,
                               m.Vector(p + "compressor_norm", Constant(c.head_dim, 1.0f)));
    }
    if (c.has_indexer(l)) {
      const uint64_t iw = c.indexer_compress_width();
      FLASHKV_ASSIGN_OR_RETURN(
          L.indexer_q_b, m.Dense(p + "indexer_q_b", DType::kF16, c.q_lora_rank, c.indexer_q_dim()));
      FLASHKV_ASSIGN_OR_RETURN(L.indexer_proj,
                               m.Dense(p + "indexer_proj", DType::kF16, D, c.indexer_heads));
      FLASHKV_ASSIGN_OR_RETURN(
          L.indexer_compressor_ape,
          m.Random(p + "indexer_ape", DType::kF16, {iw, uint64_t(ratio), 1}, 0.5f, 0));
      FLASHKV_ASSIGN_OR_RETURN(L.indexer_compressor_kv,
                               m.Dense(p + "indexer_kv", DType::kF16, D, iw));
      FLASHKV_ASSIGN_OR_RETURN(L.indexer_compressor_gate,
                               m.Dense(p + "indexer_gate", DType::kF16, D, iw));
      FLASHKV_ASSIGN_OR_RETURN(L.indexer_compressor_norm,
                               m.Vector(p + "indexer_norm", Constant(c.indexer_head_dim, 1.0f)));
    }
    FLASHKV_ASSIGN_OR_RETURN(L.ffn_norm, m.Vector(p + "ffn_norm", Constant(D, 1.0f)));
    FLASHKV_ASSIGN_OR_RETURN(L.ffn_gate_inp,
                             m.Dense(p + "ffn_gate_inp", DType::kF16, D, c.n_expert));
    if (c.is_hash_layer(l)) {
      std::vector<int32_t> table(size_t(V) * c.n_expert_used);
      std::mt19937 rng(300 + l);
      for (auto& e : table) e = int32_t(rng() % c.n_expert);
      FLASHKV_ASSIGN_OR_RETURN(L.ffn_gate_tid2eid,
                               m.Table(p + "tid2eid", std::move(table), c.n_expert_used));
    } else {
      FLASHKV_ASSIGN_OR_RETURN(
          L.ffn_exp_probs_b,
          m.Vector(p + "exp_probs_b", Uniform(c.n_expert, -0.1f, 0.1f, 400 + l)));
    }
    const uint64_t F = c.n_ff_exp, E = c.n_expert, k = c.n_expert_used;
    const float s_in = 1.0f / std::sqrt(float(D)), s_mid = 1.0f / std::sqrt(float(F));
    FLASHKV_ASSIGN_OR_RETURN(
        L.ffn_gate_exps, m.Random(p + "ffn_gate_exps", DType::kIQ2_XXS, {D, F, E}, s_in, F * k));
    FLASHKV_ASSIGN_OR_RETURN(L.ffn_up_exps,
                             m.Random(p + "ffn_up_exps", DType::kIQ2_XXS, {D, F, E}, s_in, F * k));
    FLASHKV_ASSIGN_OR_RETURN(L.ffn_down_exps,
                             m.Random(p + "ffn_down_exps", DType::kQ2_K, {F, D, E}, s_mid, D * k));
    FLASHKV_ASSIGN_OR_RETURN(L.ffn_gate_shexp, m.Dense(p + "ffn_gate_shexp", DType::kQ8_0, D, F));
    FLASHKV_ASSIGN_OR_RETURN(L.ffn_up_shexp, m.Dense(p + "ffn_up_shexp", DType::kQ8_0, D, F));
    FLASHKV_ASSIGN_OR_RETURN(L.ffn_down_shexp, m.Dense(p + "ffn_down_shexp", DType::kQ8_0, F, D));
    w.layers.push_back(std::move(L));
  }
  return w;
}

// Model::ForwardChunk, step for step (model.cpp), on weights that have no GGUF file.
class FlashRunner {
 public:
  FlashRunner(CudaBackend& be, ModelConfig cfg, ModelWeights w)
      : be_(be), cfg_(std::move(cfg)), w_(std::move(w)) {}

  Status Init(int capacity) {
    main_rope_ = MainRope(cfg_);
    compress_rope_ = CompressRope(cfg_);
    FLASHKV_ASSIGN_OR_RETURN(act_, Activations::Allocate(be_, cfg_, capacity, 1));
    return Status::Ok();
  }
  KvShape StateShape(int ctx) const {
    KvShape s;
    s.head_dim = cfg_.head_dim;
    s.n_swa = cfg_.n_swa;
    s.indexer_dim = cfg_.indexer_head_dim;
    s.ctx_size = ctx;
    for (int l = 0; l < cfg_.n_layer; ++l) {
      s.layers.push_back({cfg_.compress_ratio(l), cfg_.is_overlapping(l), cfg_.has_indexer(l)});
    }
    return s;
  }
  // One chunk; logits of the last token into `last_logits` when non-null.
  Status Chunk(const int32_t* tokens, int T, KvState& st, float* last_logits) {
    ChunkContext c{
        be_,           cfg_, opt_, w_, act_, st, main_rope_, compress_rope_, MakeHcParams(cfg_),
        st.n_tokens(), T};
    FLASHKV_RETURN_IF_ERROR(be_.Write(act_.tokens, tokens, sizeof(int32_t) * T));
    EmbedChunk(c);
    for (int l = 0; l < cfg_.n_layer; ++l) {
      AttentionSublayer(c, l);
      std::swap(act_.x_hc, act_.x_hc_next);
      FfnSublayer(c, l);
      std::swap(act_.x_hc, act_.x_hc_next);
    }
    st.Advance(T);
    if (last_logits == nullptr) return be_.Synchronize();
    OutputHead(c, T - 1, 1);
    return be_.Read(act_.logits, last_logits, sizeof(float) * cfg_.n_vocab);
  }
  Status Prefill(const std::vector<int32_t>& tokens, int chunk, KvState& st, float* last_logits) {
    for (size_t done = 0; done < tokens.size(); done += chunk) {
      const int n = int(std::min<size_t>(chunk, tokens.size() - done));
      const bool last = done + n == tokens.size();
      FLASHKV_RETURN_IF_ERROR(Chunk(tokens.data() + done, n, st, last ? last_logits : nullptr));
    }
    return Status::Ok();
  }
  const ModelConfig& config() const { return cfg_; }

 private:
  CudaBackend& be_;
  ModelConfig cfg_;
  ModelWeights w_;
  ModelOptions opt_{NumericsMode::kOfficial, ActQuantMode::kQ8};
  RopeParams main_rope_;
  RopeParams compress_rope_;
  Activations act_;
};

// The copies that move a KvState's sections (raw ring in slot order: a snapshot of the
// physical layout is enough to restore the same backend).
std::vector<HostCopy> StateCopies(const KvState& st, std::vector<float>& host) {
  struct Range {
    DevPtr<float> p;
    size_t n;
  };
  std::vector<Range> ranges;
  const KvShape& s = st.shape();
  for (int l = 0; l < int(s.layers.size()); ++l) {
    const KvState::Layer& L = st.layer(l);
    ranges.push_back({L.ring, size_t(s.n_swa) * s.head_dim});
    const int m = s.layers[l].compress_ratio;
    if (m == 0) continue;
    ranges.push_back({L.comp_rows, st.SectionFloats(l, KvSection::kCompressed)});
    ranges.push_back({L.comp_state_kv, st.SectionFloats(l, KvSection::kCompressorKv)});
    ranges.push_back({L.comp_state_score, st.SectionFloats(l, KvSection::kCompressorScore)});
    if (!s.layers[l].indexer) continue;
    ranges.push_back({L.index_rows, st.SectionFloats(l, KvSection::kIndexerRows)});
    ranges.push_back({L.index_state_kv, st.SectionFloats(l, KvSection::kIndexerKv)});
    ranges.push_back({L.index_state_score, st.SectionFloats(l, KvSection::kIndexerScore)});
  }
  size_t total = 0;
  for (const Range& r : ranges) total += r.n;
  host.resize(total);
  std::vector<HostCopy> copies;
  size_t at = 0;
  for (const Range& r : ranges) {
    copies.push_back({DevPtr<void>(r.p.get()), host.data() + at, r.n * sizeof(float)});
    at += r.n;
  }
  return copies;
}

std::vector<int32_t> RandomTokens(size_t n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = int32_t(rng() % uint32_t(vocab));
  return t;
}

int32_t Argmax(const std::vector<float>& v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

struct Options {
  int layers = 43;
  int chunk = 2048;
  std::vector<int> frontiers = {2048, 8192, 32768};
  int decode_steps = 32;
  int warmup_steps = 8;
  bool profile = false;
  int ttft_tokens = 25000;
  std::string snapshot_dir = "/tmp";
  std::string json_out;
};

Status Run(const Options& o) {
  FLASHKV_ASSIGN_OR_RETURN(auto be, CudaBackend::Create());
  be->SetProfiling(o.profile);
  nlohmann::json out;
  out["device"] = be->DeviceDescription();
  out["layers"] = o.layers;
  out["chunk"] = o.chunk;
  const ModelConfig cfg = FlashConfig(o.layers);
  FLASHKV_RETURN_IF_ERROR(cfg.Validate());
  WeightMaker maker(*be);
  auto t0 = Clock::now();
  FLASHKV_ASSIGN_OR_RETURN(ModelWeights w, MakeWeights(cfg, maker));
  FLASHKV_RETURN_IF_ERROR(be->Synchronize());
  const double gen_s = Seconds(t0, Clock::now());
  // Bytes per decoded token: every dense weight, k experts' rows, one embedding row.
  const double bytes_token = double(maker.per_token());
  out["weights_gib"] = double(maker.total()) / double(1ull << 30);
  out["bytes_per_token_gb"] = bytes_token / 1e9;
  std::printf("device: %s\n", be->DeviceDescription().c_str());
  std::printf(
      "weights: %.2f GiB generated on the GPU in %.1f s; %.3f GB read per decoded token "
      "(HBM bound %.0f tok/s at 4.8 TB/s)\n",
      double(maker.total()) / double(1ull << 30), gen_s, bytes_token / 1e9, 4.8e12 / bytes_token);

  FlashRunner runner(*be, cfg, std::move(w));
  FLASHKV_RETURN_IF_ERROR(runner.Init(o.chunk));
  const int max_ctx =
      std::max(*std::max_element(o.frontiers.begin(), o.frontiers.end()), o.ttft_tokens) +
      o.decode_steps + 8;
  std::vector<float> logits(cfg.n_vocab);

  // ---- prefill to each frontier, decode there ----
  {
    FLASHKV_ASSIGN_OR_RETURN(KvState st, KvState::Create(*be, runner.StateShape(max_ctx)));
    const auto prompt = RandomTokens(max_ctx, cfg.n_vocab, 7);
    double prefill_s = 0;
    int64_t prefilled = 0;
    nlohmann::json rows = nlohmann::json::array();
    for (int f : o.frontiers) {
      double last_chunk_s = 0;
      int last_chunk_n = 0;
      while (st.n_tokens() < f) {
        const int n = int(std::min<int64_t>(o.chunk, f - st.n_tokens()));
        const bool last = st.n_tokens() + n == f;
        auto a = Clock::now();
        FLASHKV_RETURN_IF_ERROR(
            runner.Chunk(prompt.data() + st.n_tokens(), n, st, last ? logits.data() : nullptr));
        const double s = Seconds(a, Clock::now());
        prefill_s += s;
        prefilled += n;
        last_chunk_s = s;
        last_chunk_n = n;
      }
      if (o.profile) std::printf("prefill to %d, %s", f, be->ProfileReport(true).c_str());
      // Decode at the frontier (warm-up steps first: graphs are built on repeats).
      int32_t next = 0;
      for (int i = 0; i < o.warmup_steps; ++i) {
        next = Argmax(logits);
        FLASHKV_RETURN_IF_ERROR(runner.Chunk(&next, 1, st, logits.data()));
      }
      if (o.profile) be->ProfileReport(true);
      auto a = Clock::now();
      bool finite = true;
      for (int i = 0; i < o.decode_steps; ++i) {
        next = Argmax(logits);
        FLASHKV_RETURN_IF_ERROR(runner.Chunk(&next, 1, st, logits.data()));
        finite = finite && std::isfinite(logits[next]);
      }
      const double ds = Seconds(a, Clock::now());
      const double tps = o.decode_steps / ds;
      if (o.profile) std::printf("decode at %d, %s", f, be->ProfileReport(true).c_str());
      nlohmann::json r;
      r["frontier"] = f;
      r["prefill_tok_s_cumulative"] = double(prefilled) / prefill_s;
      r["prefill_tok_s_last_chunk"] = last_chunk_n / last_chunk_s;
      r["last_chunk_tokens"] = last_chunk_n;
      r["decode_tok_s"] = tps;
      r["decode_ms_per_token"] = 1e3 * ds / o.decode_steps;
      r["decode_hbm_fraction"] = tps * bytes_token / 4.8e12;
      r["logits_finite"] = finite;
      rows.push_back(r);
      std::printf(
          "frontier %6d: prefill %8.0f tok/s (0..%d), last chunk of %d at %8.0f tok/s; "
          "decode %6.1f tok/s (%.2f ms, %.1f%% of HBM bound)%s\n",
          f, double(prefilled) / prefill_s, f, last_chunk_n, last_chunk_n / last_chunk_s, tps,
          1e3 * ds / o.decode_steps, 100.0 * tps * bytes_token / 4.8e12,
          finite ? "" : " [non-finite logits]");
      std::fflush(stdout);
    }
    out["frontiers"] = rows;
    out["graph_launches"] = be->graph_launches();
  }

  // ---- TTFT cold vs restored, snapshot GB/s ----
  if (o.ttft_tokens > 0) {
    const auto prompt = RandomTokens(o.ttft_tokens, cfg.n_vocab, 11);
    const std::vector<int32_t> head(prompt.begin(), prompt.end() - 1);
    // Cold: prefill all but the last token, then the last token gives the logits. The
    // state before the last token is the snapshot (its save is timed separately).
    FLASHKV_ASSIGN_OR_RETURN(KvState st, KvState::Create(*be, runner.StateShape(max_ctx)));
    auto a = Clock::now();
    FLASHKV_RETURN_IF_ERROR(runner.Prefill(head, o.chunk, st, nullptr));
    const double head_s = Seconds(a, Clock::now());
    std::vector<float> host;
    auto copies = StateCopies(st, host);
    const double bytes = double(host.size()) * 4;
    a = Clock::now();
    FLASHKV_RETURN_IF_ERROR(be->ReadMany(copies.data(), copies.size()));
    const double d2h_s = Seconds(a, Clock::now());
    a = Clock::now();
    FLASHKV_RETURN_IF_ERROR(runner.Chunk(&prompt.back(), 1, st, logits.data()));
    const double cold_s = head_s + Seconds(a, Clock::now());
    const std::vector<float> cold_logits = logits;
    const std::string path = o.snapshot_dir + "/flashkv-bench-snapshot.bin";
    a = Clock::now();
    {
      const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0) return IoError("cannot create {}", path);
      size_t off = 0;
      const char* p = reinterpret_cast<const char*>(host.data());
      while (off < size_t(bytes)) {
        const ssize_t n = ::write(fd, p + off, std::min<size_t>(size_t(bytes) - off, 64 << 20));
        if (n <= 0) {
          ::close(fd);
          return IoError("write {}", path);
        }
        off += size_t(n);
      }
      ::fsync(fd);
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // the restore reads the disk
      ::close(fd);
    }
    const double disk_w_s = Seconds(a, Clock::now());

    // Restore: disk -> host -> a fresh state on the GPU, then the last token.
    FLASHKV_ASSIGN_OR_RETURN(KvState st3, KvState::Create(*be, runner.StateShape(max_ctx)));
    FLASHKV_RETURN_IF_ERROR(st3.SetTokenCount(int64_t(head.size())));
    std::vector<float> host2;
    const auto copies2 = StateCopies(st3, host2);
    a = Clock::now();
    {
      const int fd = ::open(path.c_str(), O_RDONLY);
      if (fd < 0) return IoError("cannot open {}", path);
      size_t off = 0;
      char* p = reinterpret_cast<char*>(host2.data());
      while (off < size_t(bytes)) {
        const ssize_t n = ::read(fd, p + off, std::min<size_t>(size_t(bytes) - off, 64 << 20));
        if (n <= 0) {
          ::close(fd);
          return IoError("read {}", path);
        }
        off += size_t(n);
      }
      ::close(fd);
    }
    const double disk_r_s = Seconds(a, Clock::now());
    auto b = Clock::now();
    FLASHKV_RETURN_IF_ERROR(be->WriteMany(copies2.data(), copies2.size()));
    const double h2d_s = Seconds(b, Clock::now());
    FLASHKV_RETURN_IF_ERROR(runner.Chunk(&prompt.back(), 1, st3, logits.data()));
    const double restored_s = Seconds(a, Clock::now());
    const bool same = std::memcmp(logits.data(), cold_logits.data(), 4 * logits.size()) == 0;
    ::unlink(path.c_str());

    nlohmann::json s;
    s["snapshot_bytes"] = bytes;
    s["gpu_to_host_gb_s"] = bytes / d2h_s / 1e9;
    s["host_to_disk_gb_s"] = bytes / disk_w_s / 1e9;
    s["gpu_to_disk_gb_s"] = bytes / (d2h_s + disk_w_s) / 1e9;
    s["disk_to_host_gb_s"] = bytes / disk_r_s / 1e9;
    s["host_to_gpu_gb_s"] = bytes / h2d_s / 1e9;
    s["disk_to_gpu_gb_s"] = bytes / (disk_r_s + h2d_s) / 1e9;
    s["ttft_tokens"] = o.ttft_tokens;
    s["ttft_cold_s"] = cold_s;
    s["ttft_restored_s"] = restored_s;
    s["restored_logits_bit_identical"] = same;
    out["snapshot"] = s;
    std::printf(
        "snapshot %.1f MB: GPU->host %.1f GB/s, host->disk %.2f GB/s (GPU->disk %.2f GB/s); "
        "disk->host %.2f GB/s, host->GPU %.1f GB/s (disk->GPU %.2f GB/s)\n",
        bytes / 1e6, bytes / d2h_s / 1e9, bytes / disk_w_s / 1e9, bytes / (d2h_s + disk_w_s) / 1e9,
        bytes / disk_r_s / 1e9, bytes / h2d_s / 1e9, bytes / (disk_r_s + h2d_s) / 1e9);
    std::printf("TTFT %d-token prompt: cold %.2f s, restored from disk %.3f s (logits %s)\n",
                o.ttft_tokens, cold_s, restored_s, same ? "bit-identical" : "DIFFER");
  }
  if (!o.json_out.empty()) {
    std::ofstream f(o.json_out);
    f << out.dump(2) << "\n";
  }
  return Status::Ok();
}

}  // namespace
}  // namespace flashkv

int main(int argc, char** argv) {
  flashkv::Options o;
  CLI::App app("flashkv CUDA benchmark on DeepSeek V4 Flash's shape (random weights)");
  app.add_option("--layers", o.layers, "layers (43 = Flash; fewer to fit smaller GPUs)");
  app.add_option("--chunk", o.chunk, "prefill chunk tokens");
  app.add_option("--frontiers", o.frontiers, "context frontiers to prefill to and decode at")
      ->delimiter(',');
  app.add_option("--decode-steps", o.decode_steps, "timed decode steps per frontier");
  app.add_option("--warmup-steps", o.warmup_steps,
                 "untimed decode steps first (the launch graphs are built on repeats)");
  app.add_flag("--profile", o.profile, "time every kernel (graphs off) and print a breakdown");
  app.add_option("--ttft", o.ttft_tokens, "prompt tokens for the TTFT / snapshot test (0: skip)");
  app.add_option("--snapshot-dir", o.snapshot_dir, "where the snapshot file is written");
  app.add_option("--json", o.json_out, "write the results as JSON here");
  CLI11_PARSE(app, argc, argv);
  const flashkv::Status s = flashkv::Run(o);
  if (!s.ok()) {
    std::fprintf(stderr, "flashkv_bench_cuda: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
