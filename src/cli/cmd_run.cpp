// `flashkv run`: one-shot generation. Renders the prompt (-p TEXT, --prompt-file FILE, or
// stdin: `-p -` or a pipe with neither flag) as one user turn of the DS4 chat template, after
// an optional --system turn (or uses it verbatim with --raw) and runs it as one request through the
// engine — the resume, chunked prefill and decode path the server uses — streaming the text as it
// is produced, with a progress line on a TTY while prefilling and prefill and decode tokens/s on
// stderr at the end. With --kv-disk-dir the prompt's longest cached prefix is restored from the
// disk KV cache (a text match continues with the snapshot's resume tail, as in the server), and
// CachePolicy's cold and continued snapshots are written while prefilling; stderr says where the
// prefix came from. Ctrl+C stops the generation and still prints the stats (a second one exits at
// once). The engine's info log is off unless
// --log-level asks for it, so its lines never land inside the streamed text.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "chat/prompt_renderer.h"
#include "cli/commands.h"
#include "cli/kv_cache_flags.h"
#include "cli/load_progress.h"
#include "cli/model_flags.h"
#include "cli/prefill_chunk_flag.h"
#include "engine/engine.h"
#include "kv/cache_policy.h"
#include "kv_disk/disk_cache.h"
#include "runtime/runtime.h"
#include "tokenizer/tokenizer.h"
#include "util/progress.h"

#include <spdlog/spdlog.h>

namespace flashkv::cli {
namespace {

struct RunFlags {
  ModelFlags model;
  std::string prompt;
  std::string prompt_file;
  std::string system;
  int n_predict = 128;
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  uint64_t seed = 0;
  int ctx = 0;
  int chunk = 256;
  std::string prefill_chunk_solo = "auto";  // cli/prefill_chunk_flag.h
  bool raw = false;
  bool think = false;
  KvDiskFlags kv;  // disk KV cache (tier 3, kv/cache_tier.h)
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

// Set by SIGINT while a generation runs: the loop cancels the request and reports.
std::atomic<bool> g_interrupted{false};

void OnInterrupt(int) {
  g_interrupted.store(true);
}

Expected<std::string> ReadAll(std::istream& in, const std::string& what) {
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return IoError("cannot read {}", what);
  return text;
}

// The prompt from -p, --prompt-file or stdin ("-" for either flag reads stdin; neither flag
// reads a stdin that is not a terminal).
Expected<std::string> ResolvePrompt(const RunFlags& f, bool prompt_given) {
  if (prompt_given && !f.prompt_file.empty()) {
    return InvalidArgument("give the prompt with -p or --prompt-file, not both");
  }
  if ((prompt_given && f.prompt == "-") || f.prompt_file == "-") {
    return ReadAll(std::cin, "stdin");
  }
  if (prompt_given) return f.prompt;
  if (!f.prompt_file.empty()) {
    std::ifstream in(f.prompt_file, std::ios::binary);
    if (!in) return IoError("cannot open --prompt-file {}", f.prompt_file);
    return ReadAll(in, f.prompt_file);
  }
  if (isatty(STDIN_FILENO) == 1) {
    return InvalidArgument(
        "no prompt: pass -p TEXT, --prompt-file FILE, or pipe it (echo hi | flashkv run)");
  }
  return ReadAll(std::cin, "stdin");
}

Status RunOnce(RunFlags f, bool prompt_given) {
  // The engine reads max_tokens <= 0 as "to the end of the context".
  if (f.n_predict < 1) return InvalidArgument("-n must be >= 1");
  if (f.chunk <= 0) return InvalidArgument("--prefill-chunk must be positive");
  // One request, so nothing else decodes: every step takes the solo chunk (8,192 on CUDA).
  FLASHKV_ASSIGN_OR_RETURN(
      const int solo_chunk,
      ResolvePrefillChunkSolo(f.prefill_chunk_solo, f.chunk, ResolvedBackend(f.model)));
  FLASHKV_ASSIGN_OR_RETURN(f.prompt, ResolvePrompt(f, prompt_given));
  if (f.prompt.empty()) return InvalidArgument("the prompt is empty");
  if (f.raw && !f.system.empty())
    return InvalidArgument("--system needs the chat template (not --raw)");

  // Options from the file, then the flags; the tokenizer from the same file.
  FLASHKV_ASSIGN_OR_RETURN(ModelSetup setup, OpenModel(f.model));
  const Tokenizer& tokenizer = setup.tokenizer;
  LoadReporter load;  // a bar on a terminal while the weights load
  FLASHKV_ASSIGN_OR_RETURN(
      std::unique_ptr<Runtime> rt,
      OpenRuntime(f.model, setup, DeviceReserve{f.ctx > 0 ? f.ctx : 32768, 1, solo_chunk},
                  load.Weights(0, 1)));

  GenerationRequest req;
  req.prompt_text = f.prompt;
  if (!f.raw) {
    std::vector<ChatMessage> messages;
    if (!f.system.empty()) {
      ChatMessage system;
      system.role = ChatRole::kSystem;
      system.content = f.system;
      messages.push_back(std::move(system));
    }
    ChatMessage user;
    user.role = ChatRole::kUser;
    user.content = f.prompt;
    messages.push_back(std::move(user));
    PromptOptions po;
    po.thinking = f.think ? ThinkingMode::kHigh : ThinkingMode::kNone;
    req.prompt_text = RenderPrompt(messages, po);
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
  eo.prefill_chunk_solo = solo_chunk;
  eo.max_batch = 1;
  eo.disk = cache.get();
  eo.policy = policy;
  EngineMetrics metrics;
  ToolReplayMap replay;
  Engine engine(rt->model(), tokenizer, replay, metrics, eo);

  const std::vector<int32_t> prompt = req.prompt_tokens;
  auto handle = std::make_shared<RequestHandle>(std::move(req));
  // The engine's own worker, as under the server's scheduler: this thread streams.
  // Ctrl+C cancels the request (the worker stops before its next chunk or token) and the
  // stats still print; SA_RESETHAND makes a second Ctrl+C end the process.
  g_interrupted = false;
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  struct sigaction previous {};
  sigaction(SIGINT, &sa, &previous);
  std::thread worker([&] { engine.Run(*handle); });
  std::optional<Progress> progress;
  int64_t cached = 0;
  std::shared_ptr<const GenerationResult> result;
  Status failed;
  while (!result && failed.ok()) {
    std::optional<GenerationEvent> ev = handle->Next(std::chrono::milliseconds(100));
    if (g_interrupted.load() && !handle->cancelled()) handle->Cancel();
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
  sigaction(SIGINT, &previous, nullptr);
  progress.reset();
  FLASHKV_RETURN_IF_ERROR(failed);
  if (result->finish == FinishReason::kError) return Internal("{}", result->error);
  std::printf("\n");
  std::fflush(stdout);
  if (result->finish == FinishReason::kCancelled) std::fprintf(stderr, "interrupted\n");

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
  auto* prompt_opt = cmd->add_option("--prompt,-p", f->prompt,
                                     "the prompt (one user turn); - reads stdin, as does a pipe");
  cmd->add_option("--prompt-file,-f", f->prompt_file, "read the prompt from a file (- : stdin)");
  cmd->add_option("--system,--system-prompt", f->system, "a system turn before the prompt");
  cmd->add_option("-n,--n-predict,--tokens,--gen-tokens", f->n_predict, "most tokens to generate")
      ->capture_default_str();
  cmd->add_option("--temp", f->temperature, "temperature (0: greedy)")->capture_default_str();
  cmd->add_option("--top-k", f->top_k, "keep the k most likely tokens (0: off)");
  cmd->add_option("--top-p", f->top_p, "nucleus mass (1: off)");
  cmd->add_option("--min-p", f->min_p, "drop tokens below min-p · p(best) (0: off)");
  cmd->add_option("--seed", f->seed, "sampler seed")->capture_default_str();
  cmd->add_option("--ctx,-c,--ctx-size", f->ctx, "context size (default: prompt + n)");
  cmd->add_option("--prefill-chunk,--chunk", f->chunk, "prompt tokens per prefill step")
      ->capture_default_str();
  AddPrefillChunkSoloFlag(cmd, &f->prefill_chunk_solo);
  cmd->add_flag("--raw", f->raw, "use the prompt text as is (no chat template)");
  cmd->add_flag("--think", f->think, "open the assistant turn in thinking mode");
  AddKvDiskFlags(cmd, &f->kv, "disk KV cache directory: reuse and save prompt prefixes");
  cmd->callback([f, cmd, prompt_opt] {
    // On a terminal the engine's per-request info lines would land in the middle of the
    // streamed text; redirected, stderr is its own file and keeps them.
    const CLI::App* root = cmd->get_parent();
    if (root != nullptr && root->get_option("--log-level")->count() == 0 &&
        isatty(STDERR_FILENO) == 1) {
      spdlog::set_level(spdlog::level::warn);
    }
    Status s = RunOnce(*f, prompt_opt->count() > 0);
    if (!s.ok()) Fail("run", s);
  });
}

}  // namespace

FLASHKV_REGISTER_COMMAND(20, RegisterRun);

}  // namespace flashkv::cli
