// The flags and setup every model-loading subcommand shares (run, serve; bench should
// too): --model/--threads, and --backend/--numerics/--act-quant where the command offers
// them; then the GGUF opened once for its ModelOptions and tokenizer, and the Runtime.
// Exists so each cmd_<name>.cpp stays thin and the commands cannot drift apart in how a
// flag is read. Must not: hold command logic (prompting, serving, timing).
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/runtime.h"
#include "gguf/gguf_file.h"
#include "kv/snapshot_format.h"
#include "model/model_options.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace flashkv::cli {

struct ModelFlags {
  std::string model;  // empty: DefaultModelPath()
  int threads = 0;    // <= 0: one per core
  std::string backend = "cpu";
  std::string numerics;   // empty: DefaultModelOptions for the file
  std::string act_quant;  // empty: DefaultModelOptions for the file
};

// --model/-m and --threads/-t.
void AddModelFlags(CLI::App* cmd, ModelFlags* flags);
// --backend, --numerics and --act-quant.
void AddNumericsFlags(CLI::App* cmd, ModelFlags* flags);

// A model file opened (tensor bytes stay mapped, no weights loaded yet) with what the
// commands need from it before the Runtime: the options the flags ask for and the
// tokenizer.
struct ModelSetup {
  std::string path;  // the resolved --model
  GgufFile file;
  ModelOptions options;
  Tokenizer tokenizer;
};

// Resolves the path (ResolveModelPath), reads ModelConfig for DefaultModelOptions, applies
// --numerics / --act-quant and builds the tokenizer. Errors name the file or the flag.
Expected<ModelSetup> OpenModel(const ModelFlags& flags);

// Loads the weights of `setup` onto the flags' backend with its options.
Expected<std::unique_ptr<Runtime>> OpenRuntime(const ModelFlags& flags, const ModelSetup& setup);

// Who a KV snapshot belongs to: this file's fingerprint and "<numerics>/<act-quant>", so a
// snapshot of another model or numerics is never loaded.
Expected<SnapshotIdentity> CacheIdentity(const GgufFile& file, const ModelOptions& options);

}  // namespace flashkv::cli
