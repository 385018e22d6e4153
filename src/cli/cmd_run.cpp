// `flashkv run`: one-shot generation. Renders -p as one user turn of the DS4 chat template
// (or uses it verbatim with --raw), prefills it in chunks with a progress line on a TTY,
// then samples up to -n tokens, streaming the text as it is produced, and prints prefill
// and decode tokens/s on stderr at the end. With --kv-disk-dir the prompt's longest cached
// prefix is restored from the disk KV cache instead of prefilled, and CachePolicy's cold and
// continued snapshots are written while prefilling; stderr says where the prefix came from.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "chat/prompt_renderer.h"
#include "cli/commands.h"
#include "engine/runtime.h"
#include "engine/sampler.h"
#include "kv/cache_policy.h"
#include "kv/disk_cache.h"
#include "kv/model_fingerprint.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "util/progress.h"

namespace flashkv::cli {
namespace {

struct RunFlags {
  std::string model = "models/flashkv-tiny.gguf";
  std::string prompt;
  int n_predict = 128;
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  uint64_t seed = 0;
  int threads = 0;
  std::string backend = "cpu";
  int ctx = 0;
  int chunk = 256;
  bool raw = false;
  bool think = false;
  std::string numerics;
  std::string act_quant;
  // Disk KV cache (tier 2).
  std::string kv_disk_dir;
  uint64_t kv_disk_space_mb = 4096;
  std::string kv_quarantine = "on";
  CachePolicyOptions kv_policy;
};

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

Expected<std::unique_ptr<DiskCache>> OpenDiskCache(const RunFlags& f, const GgufFile& file,
                                                   const ModelOptions& mo) {
  if (f.kv_quarantine != "on" && f.kv_quarantine != "off") {
    return InvalidArgument("--kv-quarantine must be on or off, got '{}'", f.kv_quarantine);
  }
  DiskCacheOptions o;
  o.dir = f.kv_disk_dir;
  o.budget_bytes = f.kv_disk_space_mb << 20;
  o.quarantine = f.kv_quarantine == "on";
  FLASHKV_ASSIGN_OR_RETURN(Sha1Digest fp, ModelFingerprint(file));
  o.identity = SnapshotIdentity{
      fp, fmt::format("{}/{}", NumericsModeName(mo.numerics), ActQuantModeName(mo.act_quant))};
  return DiskCache::Open(o);
}

// Queues a snapshot of the state after `ids` (written in the background); a refusal (budget)
// or failure is reported, never fatal.
void SaveSnapshot(DiskCache& cache, const Tokenizer& tok, const KvState& state,
                  std::span<const int32_t> ids, std::span<const float> logits, SaveReason reason) {
  auto text = tok.Decode(ids);
  SnapshotContent c;
  c.tokens = ids;
  c.logits = logits;
  c.text = text.ok() ? std::string_view(*text) : std::string_view();
  c.reason = reason;
  auto key = cache.Save(state, c);
  if (key.ok()) {
    std::fprintf(stderr, "kv: saving %s snapshot of %zu tokens as %s.kv\n",
                 std::string(SaveReasonName(reason)).c_str(), ids.size(), key->c_str());
  } else {
    std::fprintf(stderr, "kv: snapshot of %zu tokens not saved: %s\n", ids.size(),
                 key.status().message().c_str());
  }
}

Status RunOnce(const RunFlags& f) {
  if (f.n_predict < 0) return InvalidArgument("-n must be >= 0");
  if (f.chunk <= 0) return InvalidArgument("--chunk must be positive");

  // Options from the file, then the flags; the tokenizer from the same file.
  FLASHKV_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(f.model));
  auto config = ModelConfig::FromGguf(file);
  if (!config.ok()) return config.status().WithContext(f.model);
  ModelOptions mo = DefaultModelOptions(*config);
  if (!f.numerics.empty()) {
    FLASHKV_ASSIGN_OR_RETURN(mo.numerics, ParseNumericsMode(f.numerics));
  }
  if (!f.act_quant.empty()) {
    FLASHKV_ASSIGN_OR_RETURN(mo.act_quant, ParseActQuantMode(f.act_quant));
  }
  auto tokenizer = Tokenizer::FromGguf(file);
  if (!tokenizer.ok()) return tokenizer.status().WithContext(f.model);

  RuntimeOptions ro;
  ro.model_path = f.model;
  ro.threads = f.threads;
  ro.backend = f.backend;
  ro.model = &mo;
  FLASHKV_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::Open(ro));
  Model& model = rt->model();
  const int vocab = model.config().n_vocab;

  std::string text = f.prompt;
  if (!f.raw) {
    ChatMessage user;
    user.role = ChatRole::kUser;
    user.content = f.prompt;
    PromptOptions po;
    po.thinking = f.think ? ThinkingMode::kHigh : ThinkingMode::kNone;
    text = RenderPrompt({user}, po);
  }
  std::vector<int32_t> prompt = tokenizer->Encode(text, /*allow_specials=*/true);
  if (prompt.empty()) return InvalidArgument("the prompt encodes to no tokens");
  const int ctx = f.ctx > 0 ? f.ctx : int(prompt.size()) + f.n_predict;
  FLASHKV_ASSIGN_OR_RETURN(KvState state, model.NewState(ctx));

  // Tier 2: the longest usable disk snapshot. A cache that cannot open is reported and
  // the run continues without it.
  std::unique_ptr<DiskCache> cache;
  FLASHKV_ASSIGN_OR_RETURN(CachePolicy policy, CachePolicy::Create(f.kv_policy));
  if (!f.kv_disk_dir.empty()) {
    auto opened = OpenDiskCache(f, file, mo);
    if (opened.ok()) {
      cache = std::move(*opened);
    } else {
      std::fprintf(stderr, "kv: disk cache disabled: %s\n", opened.status().ToString().c_str());
    }
  }
  std::vector<float> logits(vocab);
  size_t reused = 0;
  if (cache) {
    DiskLookup lookup{
        .tokens = prompt, .text = text, .min_tokens = policy.min_load_tokens(), .max_tokens = ctx};
    auto hit = cache->Load(lookup, state);
    if (hit.ok()) {
      reused = hit->tokens.size();
      if (hit->by_text) {
        // The snapshot's ids are authoritative; only the text after it is tokenized.
        std::vector<int32_t> rest =
            tokenizer->Encode(std::string_view(text).substr(hit->text_bytes), true);
        prompt = hit->tokens;
        prompt.insert(prompt.end(), rest.begin(), rest.end());
      }
      logits = hit->logits;
      std::fprintf(stderr,
                   "kv: prefix from disk: %zu of %zu tokens reused (matched by %s), "
                   "load %.1f ms, %s\n",
                   reused, prompt.size(), hit->by_text ? "text" : "tokens", hit->load_ms,
                   hit->entry.path.c_str());
    } else {
      std::fprintf(stderr, "kv: prefix from prefill: %s\n", hit.status().message().c_str());
    }
  }
  if (int64_t(prompt.size()) + f.n_predict > ctx && f.ctx <= 0) {
    return ResourceExhausted("the prompt grew to {} tokens at the cached seam; pass --ctx",
                             prompt.size());
  }

  // Prefill the rest, chunk by chunk, pausing where a snapshot is due.
  const auto t_prefill = std::chrono::steady_clock::now();
  {
    std::vector<int64_t> save_points;
    std::optional<int64_t> cold;
    if (cache) {
      if (reused == 0) {
        cold = policy.ColdBoundary(prompt, ChatMarkerIds{tokenizer->FindToken(kUserMarker),
                                                         tokenizer->FindToken(kAssistantMarker)});
        if (!cold) {
          std::fprintf(stderr,
                       "kv: no cold snapshot for a prompt of %zu tokens (--kv-cache-min-"
                       "tokens %lld, --kv-cache-cold-max-tokens %lld)\n",
                       prompt.size(), static_cast<long long>(f.kv_policy.min_tokens),
                       static_cast<long long>(f.kv_policy.cold_max_tokens));
        }
      }
      save_points =
          policy.SavePoints(int64_t(reused), int64_t(prompt.size()), cold, int64_t(reused));
    }
    Progress progress("prefill", prompt.size(), "tok");
    size_t done = reused;
    size_t next_point = 0;
    while (done < prompt.size()) {
      size_t stop = std::min(prompt.size(), done + size_t(f.chunk));
      if (next_point < save_points.size()) stop = std::min(stop, size_t(save_points[next_point]));
      const bool at_point =
          next_point < save_points.size() && stop == size_t(save_points[next_point]);
      const bool last = stop == prompt.size();
      FLASHKV_RETURN_IF_ERROR(model.Forward(std::span(prompt).subspan(done, stop - done), state,
                                            last || at_point ? LogitsFor::kLast : LogitsFor::kNone,
                                            logits.data()));
      done = stop;
      progress.Update(done);
      if (at_point) {
        ++next_point;
        SaveSnapshot(*cache, *tokenizer, state, std::span(prompt).first(done), logits,
                     cold && int64_t(done) == *cold ? SaveReason::kCold : SaveReason::kContinued);
      }
    }
  }
  const double prefill_s = Seconds(std::chrono::steady_clock::now() - t_prefill);

  // Decode: sample, print, feed back.
  Sampler sampler(SamplerOptions{f.temperature, f.top_k, f.top_p, f.min_p, f.seed});
  StreamDecoder decoder(*tokenizer);
  const int32_t eos = tokenizer->eos_id();
  int generated = 0;
  const auto t_decode = std::chrono::steady_clock::now();
  while (generated < f.n_predict) {
    const int32_t next = sampler.Sample(logits);
    ++generated;
    if (next == eos) break;
    FLASHKV_ASSIGN_OR_RETURN(std::string piece, decoder.Push(next));
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    if (generated == f.n_predict) break;
    FLASHKV_RETURN_IF_ERROR(model.Forward({&next, 1}, state, LogitsFor::kLast, logits.data()));
  }
  const std::string tail = decoder.Flush();
  std::fwrite(tail.data(), 1, tail.size(), stdout);
  std::printf("\n");
  const double decode_s = Seconds(std::chrono::steady_clock::now() - t_decode);

  std::fprintf(stderr, "prefill: %zu tokens in %.3f s (%.2f tok/s)\n", prompt.size() - reused,
               prefill_s, prefill_s > 0 ? (prompt.size() - reused) / prefill_s : 0.0);
  if (cache) {
    Status st = cache->Flush();
    if (!st.ok()) std::fprintf(stderr, "kv: %s\n", st.ToString().c_str());
  }
  std::fprintf(stderr, "decode: %d tokens in %.3f s (%.2f tok/s)\n", generated, decode_s,
               decode_s > 0 ? generated / decode_s : 0.0);
  return Status::Ok();
}

void RegisterRun(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Generate a reply to one prompt, streaming it");
  auto f = std::make_shared<RunFlags>();
  cmd->add_option("--model,-m", f->model, "GGUF model")->capture_default_str();
  cmd->add_option("--prompt,-p", f->prompt, "the prompt (one user turn)")->required();
  cmd->add_option("-n,--n-predict", f->n_predict, "most tokens to generate")->capture_default_str();
  cmd->add_option("--temp", f->temperature, "temperature (0: greedy)")->capture_default_str();
  cmd->add_option("--top-k", f->top_k, "keep the k most likely tokens (0: off)");
  cmd->add_option("--top-p", f->top_p, "nucleus mass (1: off)");
  cmd->add_option("--min-p", f->min_p, "drop tokens below min-p · p(best) (0: off)");
  cmd->add_option("--seed", f->seed, "sampler seed")->capture_default_str();
  cmd->add_option("--threads,-t", f->threads, "worker threads (default: all cores)");
  cmd->add_option("--backend", f->backend, "cpu | cuda (when built with CUDA)")
      ->capture_default_str();
  cmd->add_option("--ctx", f->ctx, "context size (default: prompt + n)");
  cmd->add_option("--chunk", f->chunk, "prefill chunk size")->capture_default_str();
  cmd->add_flag("--raw", f->raw, "use the prompt text as is (no chat template)");
  cmd->add_flag("--think", f->think, "open the assistant turn in thinking mode");
  cmd->add_option("--numerics", f->numerics, "hf | official (default: official for ds4 GGUFs)");
  cmd->add_option("--act-quant", f->act_quant, "off | q8 (default: q8 with official numerics)");
  cmd->add_option("--kv-disk-dir", f->kv_disk_dir,
                  "disk KV cache directory: reuse and save prompt prefixes");
  cmd->add_option("--kv-disk-space-mb", f->kv_disk_space_mb, "disk KV cache budget (MiB)")
      ->capture_default_str();
  cmd->add_option("--kv-quarantine", f->kv_quarantine,
                  "on: move damaged cache files to quarantine/; off: delete them")
      ->capture_default_str();
  cmd->add_option("--kv-cache-min-tokens", f->kv_policy.min_tokens,
                  "never save or load snapshots shorter than this")
      ->capture_default_str();
  cmd->add_option("--kv-cache-cold-max-tokens", f->kv_policy.cold_max_tokens,
                  "cold saves only for prompts up to this long (0: off)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-continued-interval-tokens", f->kv_policy.continued_interval_tokens,
                  "spacing of continued snapshots (0: off)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-boundary-trim-tokens", f->kv_policy.boundary_trim_tokens,
                  "tail tokens trimmed before a cold boundary")
      ->capture_default_str();
  cmd->add_option("--kv-cache-boundary-align-tokens", f->kv_policy.boundary_align_tokens,
                  "align cold and continued boundaries to this (0: off)")
      ->capture_default_str();
  cmd->callback([f] {
    Status s = RunOnce(*f);
    if (!s.ok()) Fail("run", s);
  });
}

}  // namespace

FLASHKV_REGISTER_COMMAND(20, RegisterRun);

}  // namespace flashkv::cli
