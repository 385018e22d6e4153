// `flashkv run`: one-shot generation. Renders -p as one user turn of the DS4 chat template
// (or uses it verbatim with --raw), prefills it in chunks with a progress line on a TTY,
// then samples up to -n tokens, streaming the text as it is produced, and prints prefill
// and decode tokens/s on stderr at the end.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "chat/prompt_renderer.h"
#include "cli/commands.h"
#include "engine/runtime.h"
#include "engine/sampler.h"
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
  int ctx = 0;
  int chunk = 256;
  bool raw = false;
  bool think = false;
  std::string numerics;
  std::string act_quant;
};

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
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
  const std::vector<int32_t> prompt = tokenizer->Encode(text, /*allow_specials=*/true);
  if (prompt.empty()) return InvalidArgument("the prompt encodes to no tokens");
  const int ctx = f.ctx > 0 ? f.ctx : int(prompt.size()) + f.n_predict;
  FLASHKV_ASSIGN_OR_RETURN(KvState state, model.NewState(ctx));

  // Prefill, chunk by chunk, with the last chunk's last logits kept.
  std::vector<float> logits(vocab);
  const auto t_prefill = std::chrono::steady_clock::now();
  {
    Progress progress("prefill", prompt.size(), "tok");
    for (size_t done = 0; done < prompt.size(); done += f.chunk) {
      const size_t n = std::min(prompt.size() - done, size_t(f.chunk));
      const bool last = done + n == prompt.size();
      FLASHKV_RETURN_IF_ERROR(model.Forward(std::span(prompt).subspan(done, n), state,
                                            last ? LogitsFor::kLast : LogitsFor::kNone,
                                            logits.data()));
      progress.Update(done + n);
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

  std::fprintf(stderr, "prefill: %zu tokens in %.3f s (%.2f tok/s)\n", prompt.size(), prefill_s,
               prefill_s > 0 ? prompt.size() / prefill_s : 0.0);
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
  cmd->add_option("--ctx", f->ctx, "context size (default: prompt + n)");
  cmd->add_option("--chunk", f->chunk, "prefill chunk size")->capture_default_str();
  cmd->add_flag("--raw", f->raw, "use the prompt text as is (no chat template)");
  cmd->add_flag("--think", f->think, "open the assistant turn in thinking mode");
  cmd->add_option("--numerics", f->numerics, "hf | official (default: official for ds4 GGUFs)");
  cmd->add_option("--act-quant", f->act_quant, "off | q8 (default: q8 with official numerics)");
  cmd->callback([f] {
    Status s = RunOnce(*f);
    if (!s.ok()) Fail("run", s);
  });
}

}  // namespace

FLASHKV_REGISTER_COMMAND(20, RegisterRun);

}  // namespace flashkv::cli
