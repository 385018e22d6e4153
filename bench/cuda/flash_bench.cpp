// flashkv_bench_cuda: DeepSeek V4 Flash's real shape (43 layers, D 4096, 256 experts, vocab
// 129280) in the q2 quant mix (IQ2_XXS gate/up, Q2_K down, Q8_0 attention / shared /
// output, F16 HC, compressor, indexer, router and embedding, F32 vectors), with random
// weights generated on the GPU — the 81 GB file would not fit the benchmark machine's disk.
// The model is `random:flash[:LAYERS]` (model/random_model.h), run by the real Model on
// CudaBackend, as `flashkv bench --backend cuda --model random:flash` does; this binary adds
// what that sweep does not measure. It reports:
//   prefill tokens/s up to each context frontier (chunks of --chunk tokens) and for the
//   chunk ending there; decode tokens/s at the frontier; bytes read per decoded token and
//   the fraction of the HBM bound; snapshot GPU→host→disk and disk→host→GPU GB/s; and
//   time to first token for a --ttft-token prompt, cold and restored from disk.
//   --decode-micro instead: the decode step taken apart, unfused vs fused (decode_micro.h).
// Output: a readable table on stdout and, with --json, one JSON object.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_backend.h"
#include "batch_micro.h"
#include "decode_micro.h"
#include "fast_spread.h"
#include "formats_bench.h"
#include "matmul_bench.h"
#include "model/model.h"
#include "model/random_model.h"
#include "state/kv_state.h"
#include "util/logit_distance.h"

namespace flashkv {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

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
  bool matmul = false;  // the Q8_0 kernel microbenchmark (matmul_bench.h)
  MatMulBenchOptions matmul_options;
  bool formats = false;  // the block-type matvec microbenchmark (formats_bench.h)
  FormatsBenchOptions formats_options;
  bool skip_model = false;            // only the microbenchmark
  std::vector<int> imma_compare;      // prefill + decode once per tensor-core variant
  std::vector<int> tiled_compare;     // … and per setting of the tiled prefill kernels
  std::vector<int> fast_compare;      // … and per fast float path (0 exact, 1 or 2 TF32 terms)
  std::vector<int> profile_at = {0};  // compare: profile the chunks starting here
  bool decode_micro = false;          // the decode microbenchmark (decode_micro.h)
  int profile_steps = 4;
  std::vector<int> verify_rows;  // --decode-micro: speculative verify steps of these many rows
  std::vector<int> batch_micro;  // the batched decode microbenchmark's batch sizes (batch_micro.h)
  int batch_pinned = 1;          // --batch-pinned: BatchMicroOptions::pinned_logits
  int fast_spread = 0;           // prompt tokens of the fast path's spread (fast_spread.h)
  int fast_indexer = 1;          // CudaBackend::SetFastIndexer for every fast setup
};

Status WriteJson(const Options& o, const nlohmann::json& out) {
  if (!o.json_out.empty()) {
    std::ofstream f(o.json_out);
    f << out.dump(2) << "\n";
    if (!f) return IoError("cannot write {}", o.json_out);
  }
  return Status::Ok();
}

// Prefill to each frontier and decode at the last one, once per kernel setup — tensor-core
// variant (CudaBackendOptions::imma; 0 = the dp4a kernels) × tiled prefill kernels on/off
// (CudaBackendOptions::tiled) × float path (CudaBackend::SetFastTerms: 0 exact, 1 or 2 the
// fast path's TF32 terms) — on fresh states, so old and new kernels are timed in one process
// on the same weights. The logits at every frontier and the greedy decode tokens must be
// bit-identical to the first setup's where both are exact; a fast setup reports its distance
// instead (NMSE and top-1 of the frontier logits, how many greedy tokens agree).
Status PrefillCompare(const Options& o, CudaBackend& be, Model& model, int max_ctx,
                      nlohmann::json& out) {
  struct Setup {
    int imma;
    // 0 off, 1 on, 2 on but the indexer's one-token score kernel (CudaBackend::SetTiledIndexer,
    // a switch for this comparison only: the backend has no option for it).
    int tiled;
    int fast;
  };
  std::vector<Setup> setups;
  const std::vector<int> immas =
      o.imma_compare.empty() ? std::vector<int>{be.imma()} : o.imma_compare;
  const std::vector<int> tileds =
      o.tiled_compare.empty() ? std::vector<int>{be.tiled_prefill() ? 1 : 0} : o.tiled_compare;
  const std::vector<int> fasts =
      o.fast_compare.empty() ? std::vector<int>{be.fast_terms()} : o.fast_compare;
  for (int v : immas) {
    for (int t : tileds) {
      for (int f : fasts) setups.push_back({v, t, f});
    }
  }
  auto apply = [&](const Setup& su) -> Status {
    if (!be.SetImma(su.imma)) return InvalidArgument("--imma-compare: unknown variant {}", su.imma);
    be.SetTiledPrefill(su.tiled != 0);
    be.SetTiledIndexer(su.tiled != 2);
    if (!be.SetFastTerms(su.fast))
      return InvalidArgument("--fast-compare: {} is not 0..2", su.fast);
    return Status::Ok();
  };
  auto label = [](const Setup& su) {
    return fmt::format("imma {} tiled {} fast {}", su.imma, su.tiled, su.fast);
  };
  const ModelConfig& cfg = model.config();
  const auto prompt = RandomTokens(max_ctx, cfg.n_vocab, 7);
  std::vector<std::vector<float>> first_logits;
  std::vector<int32_t> first_tokens;
  nlohmann::json rows = nlohmann::json::array();
  {
    // Untimed warm-up chunk (scratch growth, first launches), so the first setup timed
    // is not the one that pays for them.
    FLASHKV_RETURN_IF_ERROR(apply(setups.back()));
    FLASHKV_ASSIGN_OR_RETURN(KvState st, model.NewState(max_ctx));
    FLASHKV_RETURN_IF_ERROR(
        model.Forward(std::span<const int32_t>(prompt.data(), size_t(std::min(o.chunk, max_ctx))),
                      st, LogitsFor::kNone, nullptr));
    // What a chunk's activations and scratch cost (compare runs with another --chunk).
    if (const auto mem = be.DeviceMemory()) {
      std::printf("device memory after a %d-token chunk (state of %d tokens live): %.2f GiB used\n",
                  std::min(o.chunk, max_ctx), max_ctx,
                  double(mem->total_bytes - mem->free_bytes) / double(1ull << 30));
    }
  }
  for (size_t vi = 0; vi < setups.size(); ++vi) {
    const Setup& su = setups[vi];
    FLASHKV_RETURN_IF_ERROR(apply(su));
    const std::string name = label(su);
    FLASHKV_ASSIGN_OR_RETURN(KvState st, model.NewState(max_ctx));
    std::vector<float> logits(cfg.n_vocab);
    double prefill_s = 0;
    bool same = true;
    nlohmann::json r;
    r["imma"] = su.imma;
    r["tiled"] = su.tiled;
    r["fast"] = su.fast;
    const bool exact_pair = su.fast == 0 && setups[0].fast == 0;
    for (size_t fi = 0; fi < o.frontiers.size(); ++fi) {
      const int f = o.frontiers[fi];
      while (st.n_tokens() < f) {
        const int n = int(std::min<int64_t>(o.chunk, f - st.n_tokens()));
        const bool last = st.n_tokens() + n == f;
        const int64_t at = st.n_tokens();
        const bool profile_chunk = o.profile && std::find(o.profile_at.begin(), o.profile_at.end(),
                                                          at) != o.profile_at.end();
        if (profile_chunk) be.SetProfiling(true);
        auto a = Clock::now();
        FLASHKV_RETURN_IF_ERROR(model.Forward(
            std::span<const int32_t>(prompt.data() + st.n_tokens(), size_t(n)), st,
            last ? LogitsFor::kLast : LogitsFor::kNone, last ? logits.data() : nullptr));
        prefill_s += Seconds(a, Clock::now());
        if (profile_chunk) {
          std::printf("%s, chunk at %lld (%d tokens), %s", name.c_str(), static_cast<long long>(at),
                      n, be.ProfileReport(true).c_str());
          be.SetProfiling(false);
        }
      }
      if (vi == 0) {
        first_logits.push_back(logits);
      } else {
        same = same && std::memcmp(logits.data(), first_logits[fi].data(), 4 * logits.size()) == 0;
        if (!exact_pair) {
          const std::vector<float>& ref = first_logits[fi];
          const double nmse = Nmse(ref.data(), logits.data(), ref.size());
          double max_abs = 0;
          for (size_t i = 0; i < ref.size(); ++i) {
            max_abs = std::max(max_abs, std::fabs(double(logits[i]) - double(ref[i])));
          }
          const bool top1 = Argmax(logits) == Argmax(ref);
          r["logits_nmse"][std::to_string(f)] = nmse;
          r["logits_top1_same"][std::to_string(f)] = top1;
          std::printf("%s: logits at %d vs %s: NMSE %.3g, max|d| %.3g, top-1 %s\n", name.c_str(), f,
                      label(setups[0]).c_str(), nmse, max_abs, top1 ? "same" : "DIFFERS");
        }
      }
      r["prefill_tok_s"][std::to_string(f)] = double(f) / prefill_s;
      std::printf("%s: prefill 0..%d %8.0f tok/s\n", name.c_str(), f, double(f) / prefill_s);
      std::fflush(stdout);
    }
    std::vector<int32_t> tokens;
    int32_t next = 0;
    for (int i = 0; i < o.warmup_steps; ++i) {
      next = Argmax(logits);
      tokens.push_back(next);
      FLASHKV_RETURN_IF_ERROR(
          model.Forward(std::span<const int32_t>(&next, 1), st, LogitsFor::kLast, logits.data()));
    }
    auto a = Clock::now();
    for (int i = 0; i < o.decode_steps; ++i) {
      next = Argmax(logits);
      tokens.push_back(next);
      FLASHKV_RETURN_IF_ERROR(
          model.Forward(std::span<const int32_t>(&next, 1), st, LogitsFor::kLast, logits.data()));
    }
    const double ds = Seconds(a, Clock::now());
    if (vi == 0) {
      first_tokens = tokens;
    } else {
      same = same && tokens == first_tokens;
    }
    r["decode_tok_s"] = o.decode_steps / ds;
    r["bit_identical_to_first"] = same;
    if (vi > 0 && !exact_pair) {
      size_t agree = 0;
      while (agree < tokens.size() && agree < first_tokens.size() &&
             tokens[agree] == first_tokens[agree]) {
        ++agree;
      }
      r["greedy_tokens_agreeing"] = agree;
      std::printf("%s: the first %zu of %zu greedy tokens agree with %s\n", name.c_str(), agree,
                  tokens.size(), label(setups[0]).c_str());
    }
    std::printf("%s: decode %.1f tok/s at %d; logits and greedy tokens %s %s\n", name.c_str(),
                o.decode_steps / ds, o.frontiers.back(),
                vi == 0 ? "are the reference for" : (same ? "bit-identical to" : "DIFFER from"),
                label(setups[0]).c_str());
    rows.push_back(r);
  }
  out["imma_compare"] = rows;
  return Status::Ok();
}

Status Run(const Options& o) {
  FLASHKV_ASSIGN_OR_RETURN(auto be, CudaBackend::Create());
  nlohmann::json out;
  out["device"] = be->DeviceDescription();
  std::printf("device: %s\n", be->DeviceDescription().c_str());
  be->SetFastIndexer(o.fast_indexer != 0);
  if (o.matmul) FLASHKV_RETURN_IF_ERROR(RunMatMulBench(*be, o.matmul_options, out));
  if (o.formats) FLASHKV_RETURN_IF_ERROR(RunFormatsBench(*be, o.formats_options, out));
  if (o.skip_model) return WriteJson(o, out);
  const bool compare =
      !o.imma_compare.empty() || !o.tiled_compare.empty() || !o.fast_compare.empty();
  be->SetProfiling(o.profile && !compare);
  out["layers"] = o.layers;
  out["chunk"] = o.chunk;
  FLASHKV_ASSIGN_OR_RETURN(
      const RandomModelSpec spec,
      ParseRandomModelSource(o.layers == 43 ? "random:flash"
                                            : fmt::format("random:flash:{}", o.layers)));
  const ModelOptions options{NumericsMode::kOfficial, ActQuantMode::kQ8};
  RandomWeights info;
  auto t0 = Clock::now();
  FLASHKV_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                           MakeRandomModel(spec, *be, &options, &info));
  const double gen_s = Seconds(t0, Clock::now());
  const ModelConfig& cfg = model->config();
  // Bytes per decoded token: every dense weight, k experts' rows, one embedding row.
  const double bytes_token = double(info.bytes_per_token);
  out["model"] = spec.Source();
  out["weights_gib"] = double(info.total_bytes) / double(1ull << 30);
  out["bytes_per_token_gb"] = bytes_token / 1e9;
  std::printf(
      "%s: %.2f GiB of weights generated on the GPU in %.1f s; %.3f GB read per decoded token "
      "(HBM bound %.0f tok/s at 4.8 TB/s)\n",
      spec.Describe().c_str(), double(info.total_bytes) / double(1ull << 30), gen_s,
      bytes_token / 1e9, 4.8e12 / bytes_token);

  // One chunk through the real forward pass; logits of the last token into `last_logits`
  // when non-null.
  auto chunk = [&](const int32_t* tokens, int n, KvState& st, float* last_logits) {
    return model->Forward(std::span<const int32_t>(tokens, size_t(n)), st,
                          last_logits != nullptr ? LogitsFor::kLast : LogitsFor::kNone,
                          last_logits);
  };
  const int max_ctx =
      std::max(*std::max_element(o.frontiers.begin(), o.frontiers.end()), o.ttft_tokens) +
      o.decode_steps + o.warmup_steps + 8;
  std::vector<float> logits(cfg.n_vocab);
  if (o.decode_micro) {
    DecodeMicroOptions m;
    m.frontiers = o.frontiers;
    m.chunk = o.chunk;
    m.warmup_steps = o.warmup_steps;
    m.decode_steps = o.decode_steps;
    m.profile_steps = o.profile_steps;
    m.bytes_per_token = bytes_token;
    m.verify_rows = o.verify_rows;
    FLASHKV_RETURN_IF_ERROR(RunDecodeMicro(*be, *model, m, out));
    return WriteJson(o, out);
  }
  if (o.fast_spread > 0) {
    FastSpreadOptions m;
    m.prompt_tokens = o.fast_spread;
    FLASHKV_RETURN_IF_ERROR(RunFastSpread(*be, *model, spec, m, out));
    return WriteJson(o, out);
  }
  if (!o.batch_micro.empty()) {
    BatchMicroOptions m;
    m.batches = o.batch_micro;
    m.frontier = o.frontiers.front();
    m.chunk = o.chunk;
    m.warmup_steps = o.warmup_steps;
    m.decode_steps = o.decode_steps;
    m.profile_steps = o.profile_steps;
    m.pinned_logits = o.batch_pinned != 0;
    FLASHKV_RETURN_IF_ERROR(RunBatchMicro(*be, *model, m, out));
    return WriteJson(o, out);
  }
  if (compare) {
    FLASHKV_RETURN_IF_ERROR(PrefillCompare(o, *be, *model, max_ctx, out));
    return WriteJson(o, out);
  }

  // ---- prefill to each frontier, decode there ----
  {
    FLASHKV_ASSIGN_OR_RETURN(KvState st, model->NewState(max_ctx));
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
            chunk(prompt.data() + st.n_tokens(), n, st, last ? logits.data() : nullptr));
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
        FLASHKV_RETURN_IF_ERROR(chunk(&next, 1, st, logits.data()));
      }
      if (o.profile) be->ProfileReport(true);
      auto a = Clock::now();
      bool finite = true;
      for (int i = 0; i < o.decode_steps; ++i) {
        next = Argmax(logits);
        FLASHKV_RETURN_IF_ERROR(chunk(&next, 1, st, logits.data()));
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
    FLASHKV_ASSIGN_OR_RETURN(KvState st, model->NewState(max_ctx));
    auto a = Clock::now();
    FLASHKV_RETURN_IF_ERROR(model->Forward(head, st, LogitsFor::kNone, nullptr, o.chunk));
    const double head_s = Seconds(a, Clock::now());
    std::vector<float> host;
    auto copies = StateCopies(st, host);
    const double bytes = double(host.size()) * 4;
    a = Clock::now();
    FLASHKV_RETURN_IF_ERROR(be->ReadMany(copies.data(), copies.size()));
    const double d2h_s = Seconds(a, Clock::now());
    a = Clock::now();
    FLASHKV_RETURN_IF_ERROR(chunk(&prompt.back(), 1, st, logits.data()));
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
    FLASHKV_ASSIGN_OR_RETURN(KvState st3, model->NewState(max_ctx));
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
    FLASHKV_RETURN_IF_ERROR(chunk(&prompt.back(), 1, st3, logits.data()));
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
  return WriteJson(o, out);
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
  app.add_flag("--matmul", o.matmul,
               "first time the Q8_0 MatMul kernels (dp4a vs int8 tensor cores) at Flash's "
               "projection shapes");
  app.add_option("--matmul-tokens", o.matmul_options.tokens, "tokens per --matmul call");
  app.add_option("--matmul-reps", o.matmul_options.reps, "timed calls per --matmul kernel");
  app.add_flag("--formats", o.formats,
               "first time the one-token matvec of every GGUF block type (GB/s of weights)");
  app.add_option("--formats-rows", o.formats_options.rows, "output rows of the --formats matrix");
  app.add_flag("--skip-model", o.skip_model, "stop after --matmul / --formats (no Flash model)");
  app.add_option("--imma-compare", o.imma_compare,
                 "instead of the frontier sweep: prefill to the frontiers and decode at the "
                 "last once per tensor-core variant (0 = dp4a kernels; 4 = 1 with 32-pair "
                 "expert tiles), e.g. 0,1")
      ->delimiter(',');
  app.add_option("--profile-at", o.profile_at,
                 "with a compare and --profile: the positions of the chunks to profile (default 0)")
      ->delimiter(',');
  app.add_option("--tiled-compare", o.tiled_compare,
                 "the same comparison over the tiled prefill kernels (attention, compressor, "
                 "F16 products, indexer scores; 0 = off, 2 = on but the indexer's one-token "
                 "score kernel), e.g. 0,2,1; with --imma-compare, every pair")
      ->delimiter(',');
  app.add_option("--fast-compare", o.fast_compare,
                 "the same comparison over the float path (0 = exact, 2 = --numerics fast, 1 = "
                 "fast with one TF32 term an activation), e.g. 0,2,1; a fast setup reports its "
                 "logits' NMSE and top-1 against the first setup and the greedy tokens that agree")
      ->delimiter(',');
  app.add_option("--fast-spread", o.fast_spread,
                 "the fast float path's distance from the exact one over this many "
                 "teacher-forced positions, beside the CPU backend's (fast_spread.h)");
  app.add_option("--fast-indexer", o.fast_indexer,
                 "on the fast path, the indexer scores on the tensor cores too (1, the "
                 "default) or on the exact kernel (0; CudaBackend::SetFastIndexer)")
      ->check(CLI::Range(0, 1));
  app.add_flag("--decode-micro", o.decode_micro,
               "instead of the frontier sweep: the decode microbenchmark at each frontier — "
               "unfused vs fused kernels (bits compared), kernels per token and per layer, "
               "per-kernel GB/s next to a device-to-device copy");
  app.add_option("--profile-steps", o.profile_steps,
                 "--decode-micro / --batch-micro: profiled decode steps");
  app.add_option("--verify-rows", o.verify_rows,
                 "--decode-micro: also time speculative decoding's verify step (checkpoint, one "
                 "forward of r rows, restore) for each r, e.g. 1,2,3,4")
      ->delimiter(',');
  app.add_option("--batch-micro", o.batch_micro,
                 "instead of the frontier sweep: batched decode steps of these many sessions "
                 "(e.g. 1,4,16,64; the sessions at the first frontier + 8·i), kernels per step")
      ->delimiter(',');
  app.add_option("--batch-pinned", o.batch_pinned,
                 "--batch-micro: 1 the rows' logits page-locked, as the engine keeps them; 0 "
                 "pageable (staged copies)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const flashkv::Status s = flashkv::Run(o);
  if (!s.ok()) {
    std::fprintf(stderr, "flashkv_bench_cuda: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
