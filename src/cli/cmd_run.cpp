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
#include "cli/kv_cache_flags.h"
#include "cli/model_flags.h"
#include "engine/runtime.h"
#include "engine/sampler.h"
#include "kv/cache_policy.h"
#include "kv/disk_cache.h"
#include "tokenizer/stream_decoder.h"
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

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
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
  FLASHKV_ASSIGN_OR_RETURN(ModelSetup setup, OpenModel(f.model));
  const Tokenizer& tokenizer = setup.tokenizer;
  FLASHKV_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, OpenRuntime(f.model, setup));
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
  std::vector<int32_t> prompt = tokenizer.Encode(text, /*allow_specials=*/true);
  if (prompt.empty()) return InvalidArgument("the prompt encodes to no tokens");
  const int ctx = f.ctx > 0 ? f.ctx : int(prompt.size()) + f.n_predict;
  FLASHKV_ASSIGN_OR_RETURN(KvState state, model.NewState(ctx));

  // Tier 2: the longest usable disk snapshot. A cache that cannot open is reported and
  // the run continues without it.
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
            tokenizer.Encode(std::string_view(text).substr(hit->text_bytes), true);
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
        cold = policy.ColdBoundary(prompt, ChatMarkerIds{tokenizer.FindToken(kUserMarker),
                                                         tokenizer.FindToken(kAssistantMarker)});
        if (!cold) {
          std::fprintf(stderr,
                       "kv: no cold snapshot for a prompt of %zu tokens (--kv-cache-min-"
                       "tokens %lld, --kv-cache-cold-max-tokens %lld)\n",
                       prompt.size(), static_cast<long long>(f.kv.policy.min_tokens),
                       static_cast<long long>(f.kv.policy.cold_max_tokens));
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
        SaveSnapshot(*cache, tokenizer, state, std::span(prompt).first(done), logits,
                     cold && int64_t(done) == *cold ? SaveReason::kCold : SaveReason::kContinued);
      }
    }
  }
  const double prefill_s = Seconds(std::chrono::steady_clock::now() - t_prefill);

  // Decode: sample, print, feed back.
  Sampler sampler(SamplerOptions{f.temperature, f.top_k, f.top_p, f.min_p, f.seed});
  StreamDecoder decoder(tokenizer);
  const int32_t eos = tokenizer.eos_id();
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
