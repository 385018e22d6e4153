// `flashkv bench`: throughput at context frontiers (spec ds4-server-and-cache.md §5.2,
// issue 7). Tokenizes a plain-text prompt file (no chat template), loads the model once,
// runs the sweep of engine/bench_sweep.h and writes one CSV row per frontier (stdout or
// --csv), optionally an SVG plot; a progress line on a TTY. --from-csv only re-plots a
// saved run. `--model random:flash[:LAYERS]` runs the same Model code on weights generated
// on the backend (model/random_model.h), tokenized with --tokenizer (a file carrying the
// DeepSeek vocabulary: random models have none).
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/project_files.h"
#include "engine/bench_csv.h"
#include "engine/bench_plot.h"
#include "engine/bench_sweep.h"
#include "engine/runtime.h"
#include "kv/model_fingerprint.h"
#include "model/random_model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"
#include "util/file_io.h"
#include "util/progress.h"

namespace flashkv::cli {
namespace {

constexpr const char* kDefaultPrompt = "data/bench/devils-dictionary.txt";
constexpr const char* kDefaultTokenizer = "models/tokenizer/tokenizer.json";

struct BenchFlags {
  std::string model;
  std::string prompt_file;
  std::string tokenizer;  // random: models only
  BenchOptions sweep;
  std::string backend = "cpu";
  int threads = 0;
  std::string csv;
  std::string plot;
  std::string from_csv;  // re-plot a saved run instead of running
  std::string title;
  std::string numerics;
  std::string act_quant;
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

// The tokenizer of a random: model, which has no vocabulary of its own: a GGUF's (e.g. the
// tiny model's) or a tokenizer.json's completed with the DS4 chat markers as make-tiny does
// (plain text tokenizes the same either way).
Expected<Tokenizer> LoadTokenizerFile(const std::string& path, int n_vocab) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0) {
    FLASHKV_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(path));
    auto tokenizer = Tokenizer::FromGguf(file);
    if (!tokenizer.ok()) return tokenizer.status().WithContext(path);
    return tokenizer;
  }
  auto vocab = LoadVocabFromTokenizerJson(path);
  if (!vocab.ok()) return vocab.status().WithContext(path);
  Status s = AddMissingChatMarkers(*vocab, size_t(n_vocab));
  if (!s.ok()) return s.WithContext(path);
  auto tokenizer = Tokenizer::FromVocab(*vocab);
  if (!tokenizer.ok()) return tokenizer.status().WithContext(path);
  return tokenizer;
}

// What the model source provides before the model is loaded: options, tokenizer and the
// snapshot fingerprint.
struct SourceInfo {
  ModelOptions options;
  std::optional<Tokenizer> tokenizer;
  Sha1Digest fingerprint{};
  std::string description;  // for the log line
};

Status ApplyNumericsFlags(const BenchFlags& f, ModelOptions& mo) {
  if (!f.numerics.empty()) {
    FLASHKV_ASSIGN_OR_RETURN(mo.numerics, ParseNumericsMode(f.numerics));
  }
  if (!f.act_quant.empty()) {
    FLASHKV_ASSIGN_OR_RETURN(mo.act_quant, ParseActQuantMode(f.act_quant));
  }
  return Status::Ok();
}

Expected<SourceInfo> OpenSource(BenchFlags& f) {
  SourceInfo info;
  if (IsRandomModelSource(f.model)) {
    FLASHKV_ASSIGN_OR_RETURN(RandomModelSpec spec, ParseRandomModelSource(f.model));
    const ModelConfig config = RandomModelConfig(spec);
    info.options = DefaultModelOptions(config);
    FLASHKV_RETURN_IF_ERROR(ApplyNumericsFlags(f, info.options));
    if (f.tokenizer.empty()) {
      FLASHKV_ASSIGN_OR_RETURN(f.tokenizer, FindProjectFile(kDefaultTokenizer));
    }
    FLASHKV_ASSIGN_OR_RETURN(Tokenizer tokenizer, LoadTokenizerFile(f.tokenizer, config.n_vocab));
    info.tokenizer.emplace(std::move(tokenizer));
    info.fingerprint = RandomModelFingerprint(spec);
    info.description = spec.Describe() + ", tokenizer " + f.tokenizer;
    return info;
  }
  if (!f.tokenizer.empty()) {
    return InvalidArgument("--tokenizer is for random: models; {} uses its own vocabulary",
                           f.model);
  }
  // Options and tokenizer from the file, as `flashkv run` does.
  FLASHKV_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(f.model));
  auto config = ModelConfig::FromGguf(file);
  if (!config.ok()) return config.status().WithContext(f.model);
  info.options = DefaultModelOptions(*config);
  FLASHKV_RETURN_IF_ERROR(ApplyNumericsFlags(f, info.options));
  auto tokenizer = Tokenizer::FromGguf(file);
  if (!tokenizer.ok()) return tokenizer.status().WithContext(f.model);
  info.tokenizer.emplace(std::move(*tokenizer));
  FLASHKV_ASSIGN_OR_RETURN(info.fingerprint, ModelFingerprint(file));
  info.description = f.model;
  return info;
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
  if (f.backend != "cpu" && f.backend != "cuda")
    return InvalidArgument("--backend must be cpu or cuda, got '{}'", f.backend);
  if (!Runtime::HasBackend(f.backend)) {
    return Unsupported("--backend {}: this flashkv was built without it; use --backend cpu",
                       f.backend);
  }
  if (f.model.empty()) f.model = DefaultModelPath();
  if (f.prompt_file.empty()) {
    FLASHKV_ASSIGN_OR_RETURN(f.prompt_file, FindProjectFile(kDefaultPrompt));
  }
  FLASHKV_ASSIGN_OR_RETURN(std::vector<int> frontiers, BenchFrontiers(f.sweep));

  FLASHKV_ASSIGN_OR_RETURN(SourceInfo source, OpenSource(f));
  ModelOptions& mo = source.options;
  const Tokenizer* tokenizer = &*source.tokenizer;
  const Sha1Digest fingerprint = source.fingerprint;
  const SnapshotIdentity identity{fingerprint, fmt::format("{}/{}", NumericsModeName(mo.numerics),
                                                           ActQuantModeName(mo.act_quant))};

  auto text = ReadWholeFile(f.prompt_file);
  if (!text.ok()) return text.status().WithContext(f.prompt_file);
  const std::vector<int32_t> tokens = tokenizer->Encode(*text, /*allow_specials=*/false);
  if (int64_t(tokens.size()) < f.sweep.ctx_max) {
    return InvalidArgument("{} encodes to {} tokens; --ctx-max {} needs at least that many",
                           f.prompt_file, tokens.size(), f.sweep.ctx_max);
  }
  FLASHKV_ASSIGN_OR_RETURN(CsvOut csv, CsvOut::Open(f.csv));

  RuntimeOptions ro;
  ro.model_path = f.model;
  ro.threads = f.threads;
  ro.backend = f.backend;
  ro.model = &mo;
  FLASHKV_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::Open(ro));
  if (const RandomModelInfo* r = rt->random_model()) {
    std::fprintf(stderr,
                 "bench: %s: %.2f GiB of random weights generated on %s in %.1f s; %.3f GB of "
                 "weights read per decoded token\n",
                 r->spec.Describe().c_str(), double(r->total_bytes) / double(1ull << 30),
                 f.backend.c_str(), r->seconds, double(r->bytes_per_token) / 1e9);
  }
  const int ctx_alloc =
      f.sweep.ctx_alloc > 0 ? f.sweep.ctx_alloc : f.sweep.ctx_max + f.sweep.gen_tokens;
  {
    // Only for the summary line: what the state of the sweep's capacity allocates.
    FLASHKV_ASSIGN_OR_RETURN(KvState probe_state, rt->model().NewState(ctx_alloc));
    std::fprintf(stderr,
                 "bench: %s (%s, %s), backend %s, threads %d; %s: %zu tokens; %zu frontiers "
                 "%d..%d, %d gen tokens each; KV state for %d tokens allocates %.1f MiB\n",
                 source.description.c_str(), identity.numerics.c_str(),
                 Sha1Hex(fingerprint).substr(0, 12).c_str(), f.backend.c_str(), rt->pool().size(),
                 f.prompt_file.c_str(), tokens.size(), frontiers.size(), frontiers.front(),
                 frontiers.back(), f.sweep.gen_tokens, ctx_alloc,
                 double(KvAllocBytes(probe_state)) / (1024.0 * 1024.0));
  }

  csv.Line(BenchCsvHeader());
  std::vector<BenchCsvRow> plotted;
  Progress progress("bench", uint64_t(frontiers.back()), "tok");
  BenchCallbacks cb;
  cb.on_progress = [&](int64_t done, int64_t frontier, const char* phase) {
    progress.Update(uint64_t(done), fmt::format("ctx {}: {}", frontier, phase));
  };
  cb.on_row = [&](const BenchRow& row) {
    csv.Line(FormatBenchCsvRow(row));
    plotted.push_back(ToCsvRow(row));
  };
  auto rows = RunBenchSweep(rt->model(), tokens, f.sweep, tokenizer->eos_id(), identity, cb);
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
                   : fmt::format("flashkv bench: {}{} ({}, {}, {} thread{})", FileName(f.model),
                                 rt->random_model() ? ", random weights" : "", f.backend,
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
  cmd->add_option("--model,-m", f->model,
                  "GGUF model (default: ./ds4flash.gguf, else the tiny model), or "
                  "random:flash[:LAYERS] / random:tiny[:LAYERS]: that shape (DeepSeek-V4-Flash, "
                  "or the tiny model's; optionally only its first LAYERS layers) with random "
                  "weights generated on the backend, no file needed (speed and sizes are the "
                  "shape's; the text is meaningless)");
  cmd->add_option("--tokenizer", f->tokenizer,
                  "random: models only: tokenize the prompt with this tokenizer.json or GGUF's "
                  "vocabulary (default: " +
                      std::string(kDefaultTokenizer) + ", the DeepSeek vocabulary)");
  cmd->add_option("--prompt-file", f->prompt_file,
                  "plain text, tokenized without a chat template (default: " +
                      std::string(kDefaultPrompt) + ")");
  cmd->add_option("--ctx-start", f->sweep.ctx_start, "first frontier")->capture_default_str();
  cmd->add_option("--ctx-max", f->sweep.ctx_max, "last frontier")->capture_default_str();
  auto* incr = cmd->add_option("--step-incr", f->sweep.step_incr, "additive step between frontiers")
                   ->capture_default_str();
  cmd->add_option("--step-mul", f->sweep.step_mul, "multiplicative step (> 1, rounded up)")
      ->excludes(incr);
  cmd->add_option("--gen-tokens,-n", f->sweep.gen_tokens, "greedy decode steps per frontier")
      ->capture_default_str();
  cmd->add_option("--ctx-alloc", f->sweep.ctx_alloc,
                  "KV state capacity (default: ctx-max + gen-tokens)");
  cmd->add_option("--chunk", f->sweep.prefill_chunk, "prefill chunk (tokens per forward call)")
      ->capture_default_str();
  cmd->add_option("--backend", f->backend, "cpu | cuda")->capture_default_str();
  cmd->add_option("--threads,-t", f->threads, "worker threads (default: all cores)");
  cmd->add_option("--csv", f->csv, "write the CSV here instead of stdout");
  cmd->add_option("--plot", f->plot, "write an SVG of tokens/s and KV size against context");
  cmd->add_option("--title", f->title, "the plot's title (default: model, backend, numerics)");
  cmd->add_option("--from-csv", f->from_csv, "plot this saved bench CSV instead of running");
  cmd->add_option("--numerics", f->numerics, "hf | official (default: official for ds4 GGUFs)");
  cmd->add_option("--act-quant", f->act_quant, "off | q8 (default: q8 with official numerics)");
  cmd->callback([f] {
    Status s = RunBench(*f);
    if (!s.ok()) Fail("bench", s);
  });
}

}  // namespace

FLASHKV_REGISTER_COMMAND(30, RegisterBench);

}  // namespace flashkv::cli
