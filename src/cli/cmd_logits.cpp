// `flashkv logits`: float32 logits for token ids, used by the reference tests and external
// checks, so its interface is kept stable:
//   flashkv logits --model M.gguf --tokens 1,2,3|--tokens-file F [--decode N] [--chunk N]
//                  [--numerics hf|official|fast] [--act-quant off|q8] [--backend cpu|cuda]
//                  [--gpus 0,1,...] [--expert-shards N] --out FILE.f32
// FILE.f32 holds [positions, vocab] row-major: one row per prompt position (from the
// prefill), then one per greedy decode step (each greedy token fed alone). The greedy
// tokens are printed on stdout. The ids run as one request through the engine — the
// prefill and decode path of `run` and the server — asking it for every row's logits and
// an exact greedy decode that EOS does not end, its last id evaluated (engine/evaluation.h).
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/gpus_flag.h"
#include "engine/engine.h"
#include "evaluate/run_stepped.h"
#include "runtime/runtime.h"
#include "tokenizer/token_id_list.h"
#include "tokenizer/tokenizer.h"

namespace flashkv::cli {
namespace {

struct LogitsFlags {
  std::string model;
  std::string tokens;
  std::string tokens_file;
  int decode = 0;
  int chunk = 0;
  int threads = 0;
  std::string backend = "cpu";
  std::string gpus;  // cli/gpus_flag.h
  int expert_shards = 0;
  int ctx = 0;
  std::string numerics;
  std::string act_quant;
  std::string out;
  std::string hc_out;
};

Expected<std::vector<int32_t>> ReadTokens(const LogitsFlags& f) {
  if (!f.tokens.empty()) return ParseTokenIdList(f.tokens);
  std::ifstream in(f.tokens_file, std::ios::binary);
  if (!in) return IoError("cannot open tokens file {}", f.tokens_file);
  std::stringstream ss;
  ss << in.rdbuf();
  auto ids = ParseTokenIdList(ss.str());
  if (!ids.ok()) return ids.status().WithContext(f.tokens_file);
  return ids;
}

Status WriteFloats(const std::string& path, const std::vector<float>& data) {
  std::FILE* fp = std::fopen(path.c_str(), "wb");
  if (fp == nullptr) return IoError("cannot create {}", path);
  const size_t wrote = std::fwrite(data.data(), sizeof(float), data.size(), fp);
  const bool closed = std::fclose(fp) == 0;
  if (wrote != data.size() || !closed) return IoError("cannot write {}", path);
  return Status::Ok();
}

Status RunLogits(const LogitsFlags& f) {
  FLASHKV_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, ReadTokens(f));
  if (prompt.empty()) return InvalidArgument("no tokens given");
  if (f.decode < 0) return InvalidArgument("--decode must be >= 0");

  // Options: the file's defaults, overridden by the flags given.
  RuntimeOptions ro;
  ro.model_path = f.model;
  ro.threads = f.threads;
  ro.backend = f.backend;
  ro.expert_shards = f.expert_shards;
  if (!f.gpus.empty()) {
    std::string why;
    const int present = Runtime::CudaDeviceCount(&why);
    FLASHKV_ASSIGN_OR_RETURN(ro.gpus, ParseGpus(f.gpus, present, why));
  }
  ModelOptions mo;
  std::optional<Tokenizer> tokenizer;  // the engine's EOS and streamed bytes
  {
    FLASHKV_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(f.model));
    auto config = ModelConfig::FromGguf(file);
    if (!config.ok()) return config.status().WithContext(f.model);
    mo = DefaultModelOptions(*config);
    auto tok = Tokenizer::FromGguf(file);
    if (!tok.ok()) return tok.status().WithContext(f.model);
    tokenizer.emplace(std::move(*tok));
  }
  if (!f.numerics.empty()) {
    FLASHKV_RETURN_IF_ERROR(ApplyNumericsFlag(f.numerics, &mo));
  }
  if (!f.act_quant.empty()) {
    FLASHKV_ASSIGN_OR_RETURN(mo.act_quant, ParseActQuantMode(f.act_quant));
  }
  ro.model = &mo;
  FLASHKV_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::Open(ro));
  Model& model = rt->model();
  const int vocab = model.config().n_vocab;

  const int ctx = f.ctx > 0 ? f.ctx : int(prompt.size()) + f.decode;

  std::vector<float> hc;
  if (!f.hc_out.empty()) {
    // [n_layer, prompt positions, hc_dim]: the residual after each layer of the prefill
    // (the decode steps' rows are not part of it).
    const size_t hc_dim = model.config().hc_dim();
    const int64_t n_prompt = int64_t(prompt.size());
    hc.resize(size_t(model.config().n_layer) * prompt.size() * hc_dim);
    model.SetLayerObserver([&hc, n_prompt, hc_dim](int layer, int64_t pos0, int n, const float* x) {
      if (pos0 + n > n_prompt) return;
      std::copy(x, x + size_t(n) * hc_dim,
                hc.begin() + (size_t(layer) * size_t(n_prompt) + size_t(pos0)) * hc_dim);
    });
  }

  EngineOptions eo;
  eo.ctx_size = ctx;
  eo.live_sessions = 1;
  eo.prefill_chunk = f.chunk > 0 ? f.chunk : int(prompt.size());
  eo.max_batch = 1;
  EngineMetrics metrics;
  ToolReplayMap replay;
  Engine engine(model, *tokenizer, replay, metrics, eo);

  std::vector<float> logits;
  logits.reserve(size_t(prompt.size() + f.decode) * vocab);
  GenerationRequest req;
  req.prompt_tokens = prompt;
  req.output = OutputMode::kRaw;
  req.max_tokens = f.decode;
  req.eval.prompt_logits = &logits;  // then the decode rows after them
  req.eval.decode_logits = &logits;
  req.eval.exact_length = true;
  req.eval.evaluate_last = true;
  RequestHandle handle(std::move(req));
  auto result = RunStepped(engine, handle);
  model.SetLayerObserver(nullptr);
  if (!result.ok()) return result.status();
  const std::vector<int32_t>& greedy = (*result)->ids;
  FLASHKV_RETURN_IF_ERROR(WriteFloats(f.out, logits));
  if (!hc.empty()) FLASHKV_RETURN_IF_ERROR(WriteFloats(f.hc_out, hc));
  std::printf("%s\n", FormatTokenIdList(greedy).c_str());
  return Status::Ok();
}

void RegisterLogits(CLI::App& app) {
  auto* cmd = app.add_subcommand("logits", "Write float32 logits for token ids (reference tests)");
  auto f = std::make_shared<LogitsFlags>();
  cmd->add_option("--model,-m", f->model, "GGUF model")->required();
  auto* tokens = cmd->add_option("--tokens", f->tokens, "prompt token ids: 1,2,3");
  cmd->add_option("--tokens-file", f->tokens_file,
                  "file of prompt token ids (whitespace/comma separated, or a JSON array)")
      ->excludes(tokens);
  cmd->add_option("--decode", f->decode, "greedy decode steps after the prompt")
      ->capture_default_str();
  cmd->add_option("--prefill-chunk,--chunk", f->chunk,
                  "prefill chunk size (default: the whole prompt)");
  cmd->add_option(
      "--numerics", f->numerics,
      "hf | official | fast (default: official for ds4 GGUFs; fast: tensor-core prefill, "
      "docs/CUDA.md)");
  cmd->add_option("--act-quant", f->act_quant, "off | q8 (default: q8 with official numerics)");
  cmd->add_option("--threads,-t", f->threads, "worker threads (default: all cores)");
  cmd->add_option("--backend", f->backend, "cpu | cuda (when built with CUDA)")
      ->capture_default_str();
  cmd->add_option("--gpus", f->gpus,
                  "with --backend cuda: CUDA devices 0,1,... or auto, the routed experts spread "
                  "over them (default device 0)");
  cmd->add_option("--expert-shards", f->expert_shards,
                  "spread the routed experts over N CPU backends (the CPU form of several "
                  "--gpus; the logits do not change)");
  cmd->add_option("--ctx,-c,--ctx-size", f->ctx, "context size (default: prompt + decode)");
  cmd->add_option("--out,-o", f->out, "output file, float32 [positions, vocab]")->required();
  cmd->add_option("--hc-out", f->hc_out,
                  "also write the residual after every layer, float32 [layers, prompt, "
                  "n_hc·n_embd] (debugging against hc_states.f32)");
  cmd->callback([f] {
    if (f->tokens.empty() && f->tokens_file.empty()) {
      Fail("logits", InvalidArgument("give --tokens or --tokens-file"));
    }
    Status s = RunLogits(*f);
    if (!s.ok()) Fail("logits", s);
  });
}

}  // namespace

FLASHKV_REGISTER_COMMAND(40, RegisterLogits);

}  // namespace flashkv::cli
