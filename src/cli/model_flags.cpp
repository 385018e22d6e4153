#include "cli/model_flags.h"

#include <fmt/format.h>

#include "cli/project_files.h"
#include "kv/model_fingerprint.h"
#include "model/model_config.h"

namespace flashkv::cli {

void AddModelFlags(CLI::App* cmd, ModelFlags* flags) {
  cmd->add_option("--model,-m", flags->model,
                  "GGUF model (default ./ds4flash.gguf if present, else models/flashkv-tiny.gguf)");
  cmd->add_option("--threads,-t", flags->threads, "CPU threads for the model (default: all cores)");
}

void AddNumericsFlags(CLI::App* cmd, ModelFlags* flags) {
  cmd->add_option("--backend", flags->backend, "cpu | cuda (when built with CUDA)")
      ->capture_default_str();
  cmd->add_option("--numerics", flags->numerics, "hf | official (default: official for ds4 GGUFs)");
  cmd->add_option("--act-quant", flags->act_quant, "off | q8 (default: q8 with official numerics)");
}

Expected<ModelSetup> OpenModel(const ModelFlags& flags) {
  FLASHKV_ASSIGN_OR_RETURN(std::string path, ResolveModelPath(flags.model));
  FLASHKV_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(path));
  Expected<ModelConfig> config = ModelConfig::FromGguf(file);
  if (!config.ok()) return config.status().WithContext(path);
  ModelOptions options = DefaultModelOptions(*config);
  if (!flags.numerics.empty()) {
    FLASHKV_ASSIGN_OR_RETURN(options.numerics, ParseNumericsMode(flags.numerics));
  }
  if (!flags.act_quant.empty()) {
    FLASHKV_ASSIGN_OR_RETURN(options.act_quant, ParseActQuantMode(flags.act_quant));
  }
  Expected<Tokenizer> tokenizer = Tokenizer::FromGguf(file);
  if (!tokenizer.ok()) return tokenizer.status().WithContext(path);
  return ModelSetup{std::move(path), std::move(file), options, std::move(*tokenizer)};
}

Expected<std::unique_ptr<Runtime>> OpenRuntime(const ModelFlags& flags, const ModelSetup& setup) {
  RuntimeOptions ro;
  ro.model_path = setup.path;
  ro.threads = flags.threads;
  ro.backend = flags.backend;
  ro.model = &setup.options;
  return Runtime::Open(ro);
}

Expected<SnapshotIdentity> CacheIdentity(const GgufFile& file, const ModelOptions& options) {
  FLASHKV_ASSIGN_OR_RETURN(Sha1Digest fingerprint, ModelFingerprint(file));
  return SnapshotIdentity{fingerprint, fmt::format("{}/{}", NumericsModeName(options.numerics),
                                                   ActQuantModeName(options.act_quant))};
}

}  // namespace flashkv::cli
