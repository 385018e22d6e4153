// `flashkv bench`: throughput at context frontiers (docs/PERFORMANCE.md "Bench sweeps",
// issue 7). Tokenizes a plain-text prompt file (no chat template), loads the model once,
// runs the sweep (evaluate/bench_sweep_driver.h: one engine request per frontier; the figures in
// tools/bench_sweep.h) and writes one CSV row per frontier (stdout or
// --csv), optionally an SVG plot; a progress line on a TTY. --from-csv only re-plots a
// saved run. `--model random:flash[:LAYERS]` runs the same Model code on weights generated
// on the backend (model/random_model.h), tokenized with --tokenizer (a file carrying the
// DeepSeek vocabulary: random models have none); cli/model_flags opens either source.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_flags.h"
#include "cli/prefill_chunk_flag.h"
#include "cli/project_files.h"
#include "evaluate/bench_sweep_driver.h"
#include "runtime/runtime.h"
#include "tokenizer/tokenizer.h"
#include "tools/bench_csv.h"
#include "tools/bench_plot.h"
#include "util/file_io.h"
#include "util/progress.h"

namespace flashkv::cli {
namespace {

constexpr const char* kDefaultPrompt = "data/bench/devils-dictionary.txt";

struct BenchFlags {
  ModelFlags model;  // --model, --threads, --backend, --numerics, --act-quant, --tokenizer
  std::string prompt_file;
  BenchOptions sweep;
  std::string prefill_chunk_solo = "auto";  // cli/prefill_chunk_flag.h
  std::string csv;
  std::string plot;
  std::string from_csv;  // re-plot a saved run instead of running
  std::string title;
};

// A CSV sink: stdout, or a file opened before the (long) run so a bad path fails at once.
class CsvOut {
 public:
  static Expected<CsvOut> Open(const std::string& path) {
    CsvOut out;
    if (path.empty()) {
      out.fp_ = stdout;
      return out;
    }
    out.fp_ = std::fopen(path.c_str(), "w");
    if (out.fp_ == nullptr) return IoError("cannot open {} for writing", path);
    out.owned_ = true;
    return out;
  }
  CsvOut(CsvOut&& o) noexcept : fp_(o.fp_), owned_(o.owned_) { o.owned_ = false; }
  CsvOut& operator=(CsvOut&&) = delete;
  ~CsvOut() {
    if (owned_) std::fclose(fp_);
  }
  // Each line is flushed, so a long run can be watched (tail -f) and survives a kill.
  void Line(std::string_view s) {
    std::fwrite(s.data(), 1, s.size(), fp_);
    std::fputc('\n', fp_);
    std::fflush(fp_);
  }
  Status Close(const std::string& path) {
    if (!owned_) return Status::Ok();
    owned_ = false;
    if (std::ferror(fp_) != 0 || std::fclose(fp_) != 0) return IoError("writing {} failed", path);
    return Status::Ok();
  }

 private:
  CsvOut() = default;
  std::FILE* fp_ = nullptr;
  bool owned_ = false;
};

// A user-facing output file (mode per umask, unlike the cache's 0600 files).
Status WriteTextFile(const std::string& path, std::string_view text) {
  std::FILE* fp = std::fopen(path.c_str(), "w");
  if (fp == nullptr) return IoError("cannot open {} for writing", path);
  const bool ok = std::fwrite(text.data(), 1, text.size(), fp) == text.size();
  if (std::fclose(fp) != 0 || !ok) return IoError("writing {} failed", path);
  return Status::Ok();
}

std::string FileName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// --from-csv: the plot of a saved run. A log2 context axis when the steps between
// frontiers (the last may be cut short at ctx-max) are not all equal, i.e. --step-mul.
Status Replot(const BenchFlags& f) {
  if (f.plot.empty()) return InvalidArgument("--from-csv needs --plot OUT.svg");
  auto text = ReadWholeFile(f.from_csv);
  if (!text.ok()) return text.status().WithContext(f.from_csv);
  auto rows = ParseBenchCsv(*text);
  if (!rows.ok()) return rows.status().WithContext(f.from_csv);
  BenchPlotOptions po;
  po.title = f.title.empty() ? "flashkv bench: " + FileName(f.from_csv) : f.title;
  for (size_t i = 2; i + 1 < rows->size(); ++i) {
    const auto& r = *rows;
    if (r[i].ctx - r[i - 1].ctx != r[1].ctx - r[0].ctx) po.log2_x = true;
  }
  FLASHKV_RETURN_IF_ERROR(WriteTextFile(f.plot, BenchPlotSvg(*rows, po)));
  std::fprintf(stderr, "bench: wrote %s (%zu rows of %s)\n", f.plot.c_str(), rows->size(),
               f.from_csv.c_str());
  return Status::Ok();
}

Status RunBench(BenchFlags f) {
  if (!f.from_csv.empty()) return Replot(f);
  std::string why;
  f.model.backend = Runtime::ResolveBackend(f.model.backend, &why);
  const std::string& backend = f.model.backend;
  if (!why.empty())
    std::fprintf(stderr, "bench: backend auto: %s (%s)\n", backend.c_str(), why.c_str());
  if (backend != "cpu" && backend != "cuda")
    return InvalidArgument("--backend must be auto, cpu or cuda, got '{}'", backend);
  if (!Runtime::HasBackend(backend)) {
    return Unsupported("--backend {}: this flashkv was built without it; use --backend cpu",
                       backend);
  }
  // One session: every prefill step is a solo one.
  FLASHKV_ASSIGN_OR_RETURN(
      f.sweep.prefill_chunk_solo,
      ResolvePrefillChunkSolo(f.prefill_chunk_solo, f.sweep.prefill_chunk, backend));
  if (f.prompt_file.empty()) {
    FLASHKV_ASSIGN_OR_RETURN(f.prompt_file, FindProjectFile(kDefaultPrompt));
  }
  FLASHKV_ASSIGN_OR_RETURN(std::vector<int> frontiers, BenchFrontiers(f.sweep));

  FLASHKV_ASSIGN_OR_RETURN(ModelSetup setup, OpenModel(f.model));
  const Tokenizer* tokenizer = &setup.tokenizer;
  FLASHKV_ASSIGN_OR_RETURN(const Sha1Digest fingerprint, SetupFingerprint(setup));
  const SnapshotIdentity identity = CacheIdentity(fingerprint, setup.options);

  auto text = ReadWholeFile(f.prompt_file);
  if (!text.ok()) return text.status().WithContext(f.prompt_file);
  const std::vector<int32_t> tokens = tokenizer->Encode(*text, /*allow_specials=*/false);
  if (int64_t(tokens.size()) < f.sweep.ctx_max) {
    return InvalidArgument("{} encodes to {} tokens; --ctx-max {} needs at least that many",
                           f.prompt_file, tokens.size(), f.sweep.ctx_max);
  }
  FLASHKV_ASSIGN_OR_RETURN(CsvOut csv, CsvOut::Open(f.csv));

  const int ctx_alloc =
      f.sweep.ctx_alloc > 0 ? f.sweep.ctx_alloc : f.sweep.ctx_max + f.sweep.gen_tokens;
  FLASHKV_ASSIGN_OR_RETURN(
      std::unique_ptr<Runtime> rt,
      OpenRuntime(f.model, setup, DeviceReserve{ctx_alloc, 1, f.sweep.prefill_chunk_solo}));
  if (const RandomModelInfo* r = rt->random_model()) {
    std::fprintf(stderr,
                 "bench: %s: %.2f GiB of random weights generated on %s in %.1f s; %.3f GB of "
                 "weights read per decoded token\n",
                 r->spec.Describe().c_str(), double(r->total_bytes) / double(1ull << 30),
                 backend.c_str(), r->seconds, double(r->bytes_per_token) / 1e9);
  }
  {
    // Only for the summary line: what the state of the sweep's capacity allocates.
    FLASHKV_ASSIGN_OR_RETURN(KvState probe_state, rt->model().NewState(ctx_alloc));
    std::fprintf(stderr,
                 "bench: %s (%s, %s), backend %s, threads %d; %s: %zu tokens; %zu frontiers "
                 "%d..%d, %d gen tokens each; prefill chunks of %d; KV state for %d tokens "
                 "allocates %.1f MiB\n",
                 setup.description.c_str(), identity.numerics.c_str(),
                 Sha1Hex(fingerprint).substr(0, 12).c_str(), backend.c_str(), rt->pool().size(),
                 f.prompt_file.c_str(), tokens.size(), frontiers.size(), frontiers.front(),
                 frontiers.back(), f.sweep.gen_tokens, f.sweep.prefill_chunk_solo, ctx_alloc,
                 double(KvAllocBytes(probe_state)) / (1024.0 * 1024.0));
  }

  csv.Line(BenchCsvHeader());
  std::vector<BenchCsvRow> plotted;
  Progress progress("bench", uint64_t(frontiers.back()), "tok");
  BenchCallbacks cb;
  cb.on_progress = [&](int64_t done, int64_t frontier, const char* phase) {
    progress.Update(uint64_t(done), fmt::format("ctx {}: {}", frontier, phase));
  };
  ExpertCacheStats cache_seen;  // the expert cache's figures at the last row
  cb.on_row = [&](const BenchRow& row) {
    csv.Line(FormatBenchCsvRow(row));
    plotted.push_back(ToCsvRow(row));
    // The greedy tokens, so that two runs (another placement, another build) can be compared.
    std::string probe;
    for (int32_t t : row.probe) probe += fmt::format("{}{}", probe.empty() ? "" : " ", t);
    std::fprintf(stderr, "bench: ctx %lld greedy probe: %s\n", (long long)row.ctx, probe.c_str());
    if (ExpertCache* cache = rt->model().expert_cache(); cache != nullptr && cache->Fold().ok()) {
      const ExpertCacheStats st = cache->stats();
      const uint64_t hits = st.hits - cache_seen.hits, misses = st.misses - cache_seen.misses;
      const double per_route =
          misses > 0 ? double(st.miss_bytes - cache_seen.miss_bytes) / double(misses) : 0.0;
      const auto& cfg = rt->model().config();
      const double routes_per_token = double(cfg.n_expert_used) * double(cfg.n_layer);
      const double rate = hits + misses > 0 ? double(hits) / double(hits + misses) : 0.0;
      std::fprintf(stderr,
                   "bench: expert cache at ctx %lld: %.1f %% of %llu routes hit %lld of %lld "
                   "experts on the device; %.3f GB of experts a decoded token reads from host "
                   "memory at that rate; %llu experts traded (%.2f GB); %.2f GB staged ahead of "
                   "prefill steps; %llu steps gathered their misses\n",
                   (long long)row.ctx, 100.0 * rate, (unsigned long long)(hits + misses),
                   (long long)st.slots, (long long)st.experts,
                   (1.0 - rate) * routes_per_token * per_route / 1e9,
                   (unsigned long long)(st.swaps - cache_seen.swaps),
                   double(st.swap_bytes - cache_seen.swap_bytes) / 1e9,
                   double(st.staged_bytes - cache_seen.staged_bytes) / 1e9,
                   (unsigned long long)(st.gather_steps - cache_seen.gather_steps));
      cache_seen = st;
    }
  };
  auto rows = RunBenchSweep(rt->model(), *tokenizer, tokens, f.sweep, cb);
  progress.Finish();
  if (!rows.ok()) return rows.status();
  FLASHKV_RETURN_IF_ERROR(csv.Close(f.csv));
  if (!f.csv.empty())
    std::fprintf(stderr, "bench: wrote %zu rows to %s\n", rows->size(), f.csv.c_str());

  if (!f.plot.empty()) {
    BenchPlotOptions po;
    const int threads = rt->pool().size();
    po.title = !f.title.empty()
                   ? f.title
                   : fmt::format("flashkv bench: {}{} ({}, {}, {} thread{})", FileName(setup.path),
                                 rt->random_model() ? ", random weights" : "", backend,
                                 identity.numerics, threads, threads == 1 ? "" : "s");
    po.log2_x = f.sweep.step_mul > 0;
    const std::string svg = BenchPlotSvg(plotted, po);
    FLASHKV_RETURN_IF_ERROR(WriteTextFile(f.plot, svg));
    std::fprintf(stderr, "bench: wrote %s\n", f.plot.c_str());
  }
  return Status::Ok();
}

void RegisterBench(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench", "Prefill and generation speed, KV and snapshot size at growing context frontiers");
  auto f = std::make_shared<BenchFlags>();
  AddModelFlags(cmd, &f->model);
  AddNumericsFlags(cmd, &f->model);
  AddTokenizerFlag(cmd, &f->model);
  cmd->add_option("--prompt-file", f->prompt_file,
                  "plain text, tokenized without a chat template (default: " +
                      std::string(kDefaultPrompt) + ")");
  cmd->add_option("--ctx-start", f->sweep.ctx_start, "first frontier")->capture_default_str();
  cmd->add_option("--ctx-max", f->sweep.ctx_max, "last frontier")->capture_default_str();
  auto* incr = cmd->add_option("--step-incr", f->sweep.step_incr, "additive step between frontiers")
                   ->capture_default_str();
  cmd->add_option("--step-mul", f->sweep.step_mul, "multiplicative step (> 1, rounded up)")
      ->excludes(incr);
  cmd->add_option("--gen-tokens,-n,--n-predict,--tokens", f->sweep.gen_tokens,
                  "greedy decode steps per frontier")
      ->capture_default_str();
  cmd->add_option("--ctx-alloc", f->sweep.ctx_alloc,
                  "KV state capacity (default: ctx-max + gen-tokens)");
  cmd->add_option("--prefill-chunk,--chunk", f->sweep.prefill_chunk,
                  "prefill chunk (tokens per forward call)")
      ->capture_default_str();
  AddPrefillChunkSoloFlag(cmd, &f->prefill_chunk_solo);
  cmd->add_option("--csv", f->csv, "write the CSV here instead of stdout");
  cmd->add_option("--plot", f->plot, "write an SVG of tokens/s and KV size against context");
  cmd->add_option("--title", f->title, "the plot's title (default: model, backend, numerics)");
  cmd->add_option("--from-csv", f->from_csv, "plot this saved bench CSV instead of running");
  cmd->callback([f] {
    Status s = RunBench(*f);
    if (!s.ok()) Fail("bench", s);
  });
}

}  // namespace

FLASHKV_REGISTER_COMMAND(30, RegisterBench);

}  // namespace flashkv::cli
