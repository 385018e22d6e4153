// `flashkv make-tiny OUT.gguf`: a deterministic random-weight model in DS4's GGUF layout
// with the real DeepSeek tokenizer (tests and the default model of `make run`).
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/project_files.h"
#include "convert/tiny_model.h"

namespace flashkv::cli {
namespace {

void RegisterMakeTiny(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "make-tiny", "Write a small random-weight model in DS4's GGUF layout (real tokenizer)");
  auto opt = std::make_shared<TinyModelOptions>();
  auto tokenizer = std::make_shared<std::string>();
  cmd->add_option("OUT", opt->out_path, "GGUF file to write")->required();
  cmd->add_option("--preset", opt->preset,
                  "tiny (6 layers, D 256: tests), small (8 layers, D 512: benchmarks) or "
                  "flash[:LAYERS] (DeepSeek V4 Flash's widths, ~81 GB at all 43 layers)")
      ->check([](const std::string& p) {
        auto hp = TinyPresetHparams(p);
        return hp.ok() ? std::string() : hp.status().message();
      })
      ->capture_default_str();
  cmd->add_option("--seed", opt->seed, "random seed; the same seed gives the same file")
      ->capture_default_str();
  cmd->add_option("--tokenizer", *tokenizer,
                  "tokenizer.json (default: the project's models/tokenizer/tokenizer.json)");
  cmd->callback([opt, tokenizer] {
    opt->tokenizer_path = *tokenizer;
    if (opt->tokenizer_path.empty()) {
      auto found = FindProjectFile("models/tokenizer/tokenizer.json");
      if (!found.ok()) Fail("make-tiny", found.status().WithContext("pass --tokenizer"));
      opt->tokenizer_path = *found;
    }
    auto report = MakeTinyModel(*opt);
    if (!report.ok()) Fail("make-tiny", report.status());
    std::printf("wrote %s: preset %s, seed %llu, %zu tensors, %.1f MiB\n", opt->out_path.c_str(),
                opt->preset.c_str(), static_cast<unsigned long long>(opt->seed), report->tensors,
                static_cast<double>(report->bytes) / (1 << 20));
  });
}

}  // namespace

FLASHKV_REGISTER_COMMAND(71, RegisterMakeTiny);

}  // namespace flashkv::cli
