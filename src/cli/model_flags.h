// The flags and setup every model-loading subcommand shares (run, serve, bench):
// --model/--threads, and --backend/--numerics/--act-quant/--tokenizer where the command
// offers them; then the model source opened once for its ModelOptions, tokenizer and
// snapshot fingerprint — a GGUF file, or a `random:` shape (model/random_model.h) whose
// weights the Runtime generates on the backend — and the Runtime.
// Exists so each cmd_<name>.cpp stays thin and the commands cannot drift apart in how a
// flag is read. Must not: hold command logic (prompting, serving, timing).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "gguf/gguf_file.h"
#include "model/model_options.h"
#include "model/random_model.h"
#include "runtime/runtime.h"
#include "snapshot/snapshot_format.h"
#include "tokenizer/tokenizer.h"
#include "util/sha1.h"
#include "util/status.h"

namespace flashkv::cli {

struct ModelFlags {
  std::string model;                // empty: DefaultModelPath()
  int threads = 0;                  // <= 0: one per core
  std::string backend = "auto";     // Runtime::ResolveBackend
  std::string gpus;                 // cli/gpus_flag.h; empty: one GPU, device 0
  int expert_shards = 0;            // CPU backends for the routed experts; <= 1: one
  std::string numerics;             // empty: DefaultModelOptions for the file
  std::string act_quant;            // empty: DefaultModelOptions for the file
  std::string tokenizer;            // random: sources only (empty: models/tokenizer/tokenizer.json)
  std::string gpu_memory = "auto";  // --gpu-memory: auto (what the device has free) or GiB
  int64_t expert_cache_slots = -1;  // --expert-cache-slots: >= 0 forces the expert cache
  int expert_gather_rows = 16;      // --expert-gather-rows: decode gather up to this many rows
  int expert_stage_rows = 256;      // --expert-stage-rows: prefill staging from this many rows
  std::string expert_host = "auto";  // --expert-host: auto | pin | pageable
};

// What the caller keeps free on the device after the weights, when --gpu-memory (or the
// device's size) makes the routed experts stay in host memory (model/expert_cache_plan.h):
// the forward pass's activations and `sessions` live sessions of KV at `ctx`.
struct DeviceReserve {
  int ctx = 0;  // 0: no KV
  int sessions = 1;
  int prefill_chunk = 2048;
};

// --model/-m and --threads/-t.
void AddModelFlags(CLI::App* cmd, ModelFlags* flags);
// --backend, --gpus, --expert-shards, --numerics and --act-quant.
void AddNumericsFlags(CLI::App* cmd, ModelFlags* flags);
// --tokenizer, for random: model sources (they have no vocabulary of their own).
void AddTokenizerFlag(CLI::App* cmd, ModelFlags* flags);

// A model source opened (a file's tensor bytes stay mapped, no weights loaded yet) with what
// the commands need from it before the Runtime: the options the flags ask for, the
// tokenizer and the fingerprint its KV snapshots carry.
struct ModelSetup {
  std::string path;              // the resolved --model, or the random: source
  std::optional<GgufFile> file;  // absent for random: sources
  ModelOptions options;
  Tokenizer tokenizer;
  std::optional<RandomModelSpec> random;  // set for random: sources
  std::string description;                // for log lines: the path, or the shape and the tokenizer
};

// Resolves the path (ResolveModelPath), reads ModelConfig for DefaultModelOptions, applies
// --numerics / --act-quant and builds the tokenizer (from the GGUF, or for a random: source
// from --tokenizer). Errors name the file or the flag.
Expected<ModelSetup> OpenModel(const ModelFlags& flags);

// The tokenizer of a random: model: a GGUF's, or a tokenizer.json's completed with the DS4
// chat markers up to `n_vocab` ids as make-tiny does (plain text tokenizes the same).
Expected<Tokenizer> LoadTokenizerFile(const std::string& path, int n_vocab);

// The backend OpenRuntime opens for these flags: --backend resolved as Runtime::ResolveBackend
// does, auto meaning cuda when --gpus names devices.
std::string ResolvedBackend(const ModelFlags& flags);

// Loads the weights of `setup` onto the flags' backend with its options. --gpus is checked
// against the devices present first, and makes --backend auto mean cuda. `reserve`: what
// stays free when the routed experts must move to host memory. `progress` follows the
// weights onto the backend (cli/load_progress.h).
Expected<std::unique_ptr<Runtime>> OpenRuntime(const ModelFlags& flags, const ModelSetup& setup,
                                               const DeviceReserve& reserve = {},
                                               LoadProgressFn progress = {});

// The fingerprint a KV snapshot of this model carries: ModelFingerprint of the file (it
// reads the first bytes of every tensor, so only commands that use snapshots ask for it),
// RandomModelFingerprint of a random: shape.
Expected<Sha1Digest> SetupFingerprint(const ModelSetup& setup);

// Who a KV snapshot belongs to: the model's fingerprint and "<numerics>/<act-quant>", so a
// snapshot of another model or numerics is never loaded.
SnapshotIdentity CacheIdentity(const Sha1Digest& fingerprint, const ModelOptions& options);

}  // namespace flashkv::cli
