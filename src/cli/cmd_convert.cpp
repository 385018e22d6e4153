// `flashkv convert HF_DIR OUT.gguf`: a Hugging Face DeepSeek V4 checkpoint to a DS4 GGUF.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/project_files.h"
#include "convert/hf_converter.h"

namespace flashkv::cli {
namespace {

struct ConvertArgs {
  std::string hf_dir;
  std::string out;
  std::string type = "q8_0";
  std::string experts = "type";
  std::string tokenizer;
  std::string name;
};

void RunConvert(const ConvertArgs& a) {
  ConvertOptions opt;
  opt.hf_dir = a.hf_dir;
  opt.out_path = a.out;
  opt.name = a.name;
  auto scheme = ParseDs4WeightScheme(a.type);
  if (!scheme.ok()) Fail("convert", scheme.status(), 2);
  opt.scheme = *scheme;
  opt.keep_mxfp4_experts = a.experts == "mxfp4";
  if (!a.tokenizer.empty()) {
    opt.tokenizer_path = a.tokenizer;
  } else if (std::filesystem::exists(std::filesystem::path(a.hf_dir) / "tokenizer.json")) {
    opt.tokenizer_path = (std::filesystem::path(a.hf_dir) / "tokenizer.json").string();
  } else {
    auto found = FindProjectFile("models/tokenizer/tokenizer.json");
    if (!found.ok())
      Fail("convert", found.status().WithContext("no tokenizer.json in HF_DIR; pass --tokenizer"));
    opt.tokenizer_path = *found;
  }
  auto report = ConvertHfCheckpoint(opt);
  if (!report.ok()) Fail("convert", report.status());
  std::printf("wrote %s: %zu tensors, %.1f MiB (%s weights%s, tokenizer %s)\n", a.out.c_str(),
              report->tensors, static_cast<double>(report->bytes) / (1 << 20), a.type.c_str(),
              opt.keep_mxfp4_experts ? ", MXFP4 experts" : "", opt.tokenizer_path.c_str());
}

void RegisterConvert(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "convert",
      "Convert a Hugging Face DeepSeek V4 checkpoint (config.json + safetensors) to a DS4 GGUF");
  auto args = std::make_shared<ConvertArgs>();
  cmd->add_option("HF_DIR", args->hf_dir, "checkpoint directory")->required();
  cmd->add_option("OUT", args->out, "GGUF file to write")->required();
  cmd->add_option("--type", args->type,
                  "weight types: f32 (everything exact), f16, or q8_0 (ds4's scheme: Q8_0 "
                  "projections and experts, F16 dense, F32 vectors)")
      ->check(CLI::IsMember({"f32", "f16", "q8_0"}))
      ->capture_default_str();
  cmd->add_option("--experts", args->experts,
                  "routed experts: type (as --type says) or mxfp4 (keep the checkpoint's "
                  "FP4-packed experts as MXFP4 blocks, unchanged, as ds4's 0731 files do)")
      ->check(CLI::IsMember({"type", "mxfp4"}))
      ->capture_default_str();
  cmd->add_option("--tokenizer", args->tokenizer,
                  "tokenizer.json to embed (default: HF_DIR/tokenizer.json, else "
                  "models/tokenizer/tokenizer.json)");
  cmd->add_option("--name", args->name, "general.name (default: the directory name)");
  cmd->callback([args] { RunConvert(*args); });
}

}  // namespace

FLASHKV_REGISTER_COMMAND(70, RegisterConvert);

}  // namespace flashkv::cli
