// `flashkv logits`: float32 logits for token ids, used by the reference tests and external
// checks, so its interface is kept stable:
//   flashkv logits --model M.gguf --tokens 1,2,3|--tokens-file F [--decode N] [--chunk N]
//                  [--numerics hf|official] [--act-quant off|q8] [--backend cpu|cuda] --out
//                  FILE.f32
// FILE.f32 holds [positions, vocab] row-major: one row per prompt position (from the
// prefill), then one per greedy decode step (each greedy token fed alone). The greedy
// tokens are printed on stdout.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "runtime/runtime.h"
#include "tokenizer/token_id_list.h"

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

int32_t Argmax(const float* x, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
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
  ModelOptions mo;
  {
    FLASHKV_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(f.model));
    auto config = ModelConfig::FromGguf(file);
    if (!config.ok()) return config.status().WithContext(f.model);
    mo = DefaultModelOptions(*config);
  }
  if (!f.numerics.empty()) {
    FLASHKV_ASSIGN_OR_RETURN(mo.numerics, ParseNumericsMode(f.numerics));
  }
  if (!f.act_quant.empty()) {
    FLASHKV_ASSIGN_OR_RETURN(mo.act_quant, ParseActQuantMode(f.act_quant));
  }
  ro.model = &mo;
  FLASHKV_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::Open(ro));
  Model& model = rt->model();
  const int vocab = model.config().n_vocab;

  const int ctx = f.ctx > 0 ? f.ctx : int(prompt.size()) + f.decode;
  FLASHKV_ASSIGN_OR_RETURN(KvState state, model.NewState(ctx));

  std::vector<float> hc;
  if (!f.hc_out.empty()) {
    // [n_layer, prompt positions, hc_dim]: the residual after each layer of the prefill.
    const size_t hc_dim = model.config().hc_dim();
    hc.resize(size_t(model.config().n_layer) * prompt.size() * hc_dim);
    model.SetLayerObserver([&hc, &prompt, hc_dim](int layer, int64_t pos0, int n, const float* x) {
      std::copy(x, x + size_t(n) * hc_dim,
                hc.begin() + (size_t(layer) * prompt.size() + pos0) * hc_dim);
    });
  }

  std::vector<float> logits(size_t(prompt.size() + f.decode) * vocab);
  FLASHKV_RETURN_IF_ERROR(model.Forward(prompt, state, LogitsFor::kAll, logits.data(), f.chunk));
  model.SetLayerObserver(nullptr);

  std::vector<int32_t> greedy;
  for (int step = 0; step < f.decode; ++step) {
    const float* last = logits.data() + (prompt.size() + step - 1) * size_t(vocab);
    const int32_t next = Argmax(last, vocab);
    greedy.push_back(next);
    float* row = logits.data() + (prompt.size() + step) * size_t(vocab);
    FLASHKV_RETURN_IF_ERROR(model.Forward({&next, 1}, state, LogitsFor::kAll, row));
  }
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
  cmd->add_option("--chunk", f->chunk, "prefill chunk size (default: the whole prompt)");
  cmd->add_option("--numerics", f->numerics, "hf | official (default: official for ds4 GGUFs)");
  cmd->add_option("--act-quant", f->act_quant, "off | q8 (default: q8 with official numerics)");
  cmd->add_option("--threads,-t", f->threads, "worker threads (default: all cores)");
  cmd->add_option("--backend", f->backend, "cpu | cuda (when built with CUDA)")
      ->capture_default_str();
  cmd->add_option("--ctx", f->ctx, "context size (default: prompt + decode)");
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
