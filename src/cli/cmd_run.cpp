// `flashkv run`: one-shot generation. Renders -p as one user turn of the DS4 chat template
// (or uses it verbatim with --raw) and runs it as one request through the engine — the
// resume, chunked prefill and decode path the server uses — streaming the text as it is
// produced, with a progress line on a TTY while prefilling and prefill and decode tokens/s
// on stderr at the end. With --kv-disk-dir the prompt's longest cached prefix is restored
// from the disk KV cache (a text match continues with the snapshot's resume tail, as in
// the server), and CachePolicy's cold and continued snapshots are written while
// prefilling; stderr says where the prefix came from.
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "chat/prompt_renderer.h"
#include "cli/commands.h"
#include "cli/kv_cache_flags.h"
#include "cli/model_flags.h"
#include "engine/engine.h"
#include "kv/cache_policy.h"
#include "kv/disk_cache.h"
#include "runtime/runtime.h"
#include "tokenizer/tokenizer.h"
#include "util/progress.h"

namespace flashkv::cli {
namespace {

struct RunFlags {
  ModelFlags model;
  std::string prompt;
  int n_predict = 128;
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  uint64_t seed = 0;
  int ctx = 0;
  int chunk = 256;
  bool raw = false;
  bool think = false;
  KvDiskFlags kv;  // disk KV cache (tier 2)
};

// Room beyond prompt + -n in the default context: a text hit continues with the
// snapshot's tail and the re-tokenized rest, which may be longer than the prompt's ids.
constexpr int kSeamRoom = 256;

// What stderr says once the engine has decided where the prompt resumes from.
void ReportResume(const CacheInfo& cache, const RunFlags& f, const CachePolicy& policy,
                  const Tokenizer& tokenizer, const std::vector<int32_t>& prompt) {
  if (cache.source == CacheSource::kDisk) {
    std::fprintf(
        stderr,
        "kv: prefix from disk: %lld of %lld tokens reused (matched by %s), load %.1f ms, "
        "%s\n",
        static_cast<long long>(cache.cached_tokens), static_cast<long long>(cache.prompt_tokens),
        cache.detail == "disk-text" ? "text" : "tokens", cache.restore_ms, cache.origin.c_str());
    return;
  }
  std::fprintf(stderr, "kv: prefix from prefill: no usable disk kv entry\n");
  const ChatMarkerIds markers{tokenizer.FindToken(kUserMarker),
                              tokenizer.FindToken(kAssistantMarker)};
  if (!policy.ColdBoundary(prompt, markers)) {
    std::fprintf(stderr,
                 "kv: no cold snapshot for a prompt of %zu tokens (--kv-cache-min-tokens %lld, "
                 "--kv-cache-cold-max-tokens %lld)\n",
                 prompt.size(), static_cast<long long>(f.kv.policy.min_tokens),
                 static_cast<long long>(f.kv.policy.cold_max_tokens));
  }
}

Status RunOnce(const RunFlags& f) {
  // The engine reads max_tokens <= 0 as "to the end of the context".
  if (f.n_predict < 1) return InvalidArgument("-n must be >= 1");
  if (f.chunk <= 0) return InvalidArgument("--chunk must be positive");

  // Options from the file, then the flags; the tokenizer from the same file.
  FLASHKV_ASSIGN_OR_RETURN(ModelSetup setup, OpenModel(f.model));
  const Tokenizer& tokenizer = setup.tokenizer;
  FLASHKV_ASSIGN_OR_RETURN(
      std::unique_ptr<Runtime> rt,
      OpenRuntime(f.model, setup, DeviceReserve{f.ctx > 0 ? f.ctx : 32768, 1, f.chunk}));

  GenerationRequest req;
  req.prompt_text = f.prompt;
  if (!f.raw) {
    ChatMessage user;
    user.role = ChatRole::kUser;
    user.content = f.prompt;
    PromptOptions po;
    po.thinking = f.think ? ThinkingMode::kHigh : ThinkingMode::kNone;
    req.prompt_text = RenderPrompt({user}, po);
  }
  req.prompt_tokens = tokenizer.Encode(req.prompt_text, /*allow_specials=*/true);
  if (req.prompt_tokens.empty()) return InvalidArgument("the prompt encodes to no tokens");
  req.output = OutputMode::kRaw;
  req.max_tokens = f.n_predict;
  req.sampling = SamplerOptions{f.temperature, f.top_k, f.top_p, f.min_p, f.seed};

  // The disk tier. A cache that cannot open is reported and the run continues without it.
  std::unique_ptr<DiskCache> cache;
  FLASHKV_ASSIGN_OR_RETURN(CachePolicy policy, CachePolicy::Create(f.kv.policy));
  if (!f.kv.dir.empty()) {
    auto opened = OpenDiskCache(f.kv, setup);
    if (opened.ok()) {
      cache = std::move(*opened);
    } else {
      std::fprintf(stderr, "kv: disk cache disabled: %s\n", opened.status().ToString().c_str());
    }
  }

  EngineOptions eo;
  eo.ctx_size = f.ctx > 0 ? f.ctx : int(req.prompt_tokens.size()) + f.n_predict + kSeamRoom;
  eo.live_sessions = 1;
  eo.prefill_chunk = f.chunk;
  eo.max_batch = 1;
  eo.disk = cache.get();
  eo.policy = policy;
  EngineMetrics metrics;
  ToolReplayMap replay;
  Engine engine(rt->model(), tokenizer, replay, metrics, eo);

  const std::vector<int32_t> prompt = req.prompt_tokens;
  auto handle = std::make_shared<RequestHandle>(std::move(req));
  // The engine's own worker, as under the server's scheduler: this thread streams.
  std::thread worker([&] { engine.Run(*handle); });
  std::optional<Progress> progress;
  int64_t cached = 0;
  std::shared_ptr<const GenerationResult> result;
  Status failed;
  while (!result && failed.ok()) {
    std::optional<GenerationEvent> ev = handle->Next(std::chrono::milliseconds(100));
    if (!ev) continue;
    switch (ev->kind) {
      case GenerationEvent::Kind::kStarted:
        if (cache) ReportResume(ev->cache, f, policy, tokenizer, prompt);
        cached = ev->cache.cached_tokens;
        progress.emplace("prefill", uint64_t(ev->cache.prompt_tokens), "tok");
        progress->Update(uint64_t(cached));
        break;
      case GenerationEvent::Kind::kPrefill:
        if (progress) progress->Update(uint64_t(cached + ev->done));
        break;
      case GenerationEvent::Kind::kText:
        if (progress) progress.reset();
        std::fwrite(ev->text.data(), 1, ev->text.size(), stdout);
        std::fflush(stdout);
        break;
      case GenerationEvent::Kind::kDone:
        result = ev->result;
        break;
      case GenerationEvent::Kind::kError:
        failed = ev->error.ok() ? Internal("the request failed") : ev->error;
        break;
      case GenerationEvent::Kind::kChat:
        break;
    }
  }
  worker.join();
  progress.reset();
  FLASHKV_RETURN_IF_ERROR(failed);
  if (result->finish == FinishReason::kError) return Internal("{}", result->error);
  std::printf("\n");

  const RequestTiming& t = result->timing;
  const double prefill_s = t.prefill_ms / 1000.0;
  const double decode_s = t.decode_ms / 1000.0;
  std::fprintf(stderr, "prefill: %lld tokens in %.3f s (%.2f tok/s)\n",
               static_cast<long long>(t.prefill_tokens), prefill_s,
               prefill_s > 0 ? double(t.prefill_tokens) / prefill_s : 0.0);
  if (cache) {
    Status st = cache->Flush();
    if (!st.ok()) std::fprintf(stderr, "kv: %s\n", st.ToString().c_str());
  }
  std::fprintf(stderr, "decode: %lld tokens in %.3f s (%.2f tok/s)\n",
               static_cast<long long>(t.decode_tokens), decode_s,
               decode_s > 0 ? double(t.decode_tokens) / decode_s : 0.0);
  return Status::Ok();
}
void RegisterRun(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Generate a reply to one prompt, streaming it");
  auto f = std::make_shared<RunFlags>();
  AddModelFlags(cmd, &f->model);
  AddNumericsFlags(cmd, &f->model);
  AddTokenizerFlag(cmd, &f->model);
  cmd->add_option("--prompt,-p", f->prompt, "the prompt (one user turn)")->required();
  cmd->add_option("-n,--n-predict", f->n_predict, "most tokens to generate")->capture_default_str();
  cmd->add_option("--temp", f->temperature, "temperature (0: greedy)")->capture_default_str();
  cmd->add_option("--top-k", f->top_k, "keep the k most likely tokens (0: off)");
  cmd->add_option("--top-p", f->top_p, "nucleus mass (1: off)");
  cmd->add_option("--min-p", f->min_p, "drop tokens below min-p · p(best) (0: off)");
  cmd->add_option("--seed", f->seed, "sampler seed")->capture_default_str();
  cmd->add_option("--ctx", f->ctx, "context size (default: prompt + n)");
  cmd->add_option("--chunk", f->chunk, "prefill chunk size")->capture_default_str();
  cmd->add_flag("--raw", f->raw, "use the prompt text as is (no chat template)");
  cmd->add_flag("--think", f->think, "open the assistant turn in thinking mode");
  AddKvDiskFlags(cmd, &f->kv, "disk KV cache directory: reuse and save prompt prefixes");
  cmd->callback([f] {
    Status s = RunOnce(*f);
    if (!s.ok()) Fail("run", s);
  });
}

}  // namespace

FLASHKV_REGISTER_COMMAND(20, RegisterRun);

}  // namespace flashkv::cli
