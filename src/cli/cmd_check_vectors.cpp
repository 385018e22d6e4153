// `flashkv check-vectors`: validates an install against the official DeepSeek API vectors
// (tests/data/official-vectors). For each case: render the request with the DS4 chat
// template, tokenize, compare the prompt count with the API's usage.prompt_tokens, then
// decode greedily and compare each chosen token (by bytes), our log-probability of the
// official token, and the top-20 overlap. Exit 0 when every count and chosen token
// matches, 1 on a mismatch, 2 on an error.
#include <cstdio>

#include "cli/commands.h"
#include "cli/project_files.h"
#include "evaluate/vector_case_runner.h"
#include "gguf/gguf_file.h"
#include "runtime/runtime.h"
#include "util/progress.h"

namespace flashkv::cli {
namespace {

struct CheckVectorsFlags {
  std::string model;
  std::string dir;
  std::string backend = "cpu";
  bool prompt_only = false;
  int threads = 0;
  int chunk = 2048;
};

Status RunCheckVectors(const CheckVectorsFlags& f, bool* all_ok) {
  std::string model_path = f.model.empty() ? DefaultModelPath() : f.model;
  std::string dir = f.dir;
  if (dir.empty()) {
    FLASHKV_ASSIGN_OR_RETURN(dir, FindProjectFile("tests/data/official-vectors"));
  }
  FLASHKV_ASSIGN_OR_RETURN(std::vector<VectorCase> cases, LoadVectorCases(dir));

  FLASHKV_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::Open(model_path));
  auto tokenizer = Tokenizer::FromGguf(gguf);
  if (!tokenizer.ok()) return tokenizer.status().WithContext(model_path);

  std::unique_ptr<Runtime> runtime;
  if (!f.prompt_only) {
    RuntimeOptions ro;
    ro.model_path = model_path;
    ro.threads = f.threads;
    // Runtime::Open says what is wrong with a backend name (unknown, or CUDA not built in).
    ro.backend = f.backend;
    FLASHKV_ASSIGN_OR_RETURN(runtime, Runtime::Open(ro));
  }
  std::printf("check-vectors: model %s, %zu cases from %s%s\n", model_path.c_str(), cases.size(),
              dir.c_str(), f.prompt_only ? " (prompt counts only)" : "");
  *all_ok = true;
  int passed = 0;
  for (const VectorCase& c : cases) {
    VectorRunOptions vo;
    vo.prefill_chunk = f.chunk;
    // Created on the first callback, when the prompt length is known.
    std::unique_ptr<Progress> progress;
    if (!f.prompt_only) {
      vo.on_prefill = [&](int64_t done, int64_t total) {
        if (!progress)
          progress =
              std::make_unique<Progress>("prefill " + c.id, static_cast<uint64_t>(total), "tok");
        progress->Update(static_cast<uint64_t>(done));
      };
    }
    auto verdict = RunVectorCase(c, *tokenizer, runtime ? &runtime->model() : nullptr, vo);
    progress.reset();
    if (!verdict.ok()) return verdict.status().WithContext("case " + c.id);
    std::fputs(FormatVerdict(*verdict).c_str(), stdout);
    if (verdict->ok()) {
      ++passed;
    } else {
      *all_ok = false;
    }
  }
  std::printf("%d passed, %d failed\n", passed, static_cast<int>(cases.size()) - passed);
  return Status::Ok();
}

void RegisterCheckVectors(CLI::App& app) {
  auto f = std::make_shared<CheckVectorsFlags>();
  auto* cmd = app.add_subcommand(
      "check-vectors", "Check prompt counts and greedy tokens against the official DeepSeek API");
  cmd->add_option("-m,--model", f->model,
                  "DS4 GGUF (default ./ds4flash.gguf if present, else the tiny default model)");
  cmd->add_option("--dir", f->dir, "vector directory (default tests/data/official-vectors)");
  cmd->add_option("--backend", f->backend,
                  "cpu | cuda | auto (cuda when built in and a GPU answers)")
      ->capture_default_str();
  cmd->add_flag("--prompt-only", f->prompt_only,
                "only compare prompt token counts (needs no real weights)");
  cmd->add_option("-t,--threads", f->threads, "worker threads (default: all cores)");
  cmd->add_option("--prefill-chunk,--chunk", f->chunk, "prefill chunk size")->capture_default_str();
  cmd->callback([f] {
    bool all_ok = false;
    Status s = RunCheckVectors(*f, &all_ok);
    if (!s.ok()) Fail("check-vectors", s, 2);
    if (!all_ok) throw CLI::RuntimeError(1);
  });
}

}  // namespace

FLASHKV_REGISTER_COMMAND(90, RegisterCheckVectors);

}  // namespace flashkv::cli
