#include "cli/model_flags.h"

#include <algorithm>
#include <exception>
#include <string>

#include <fmt/format.h>

#include "cli/gpus_flag.h"
#include "cli/project_files.h"
#include "engine/memory_plan.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/random_model.h"
#include "snapshot/model_fingerprint.h"
#include "state/kv_state.h"
#include "tokenizer/vocab.h"

namespace flashkv::cli {

void AddModelFlags(CLI::App* cmd, ModelFlags* flags) {
  cmd->add_option("--model,-m", flags->model,
                  "GGUF model (default ./ds4flash.gguf if present, else models/flashkv-tiny.gguf), "
                  "or random:flash[:LAYERS] / random:tiny[:LAYERS]: that shape (DeepSeek-V4-Flash "
                  "or the tiny model's, optionally only its first LAYERS layers) with random "
                  "weights generated on the backend, no file needed (for speed and sizes; the "
                  "text it writes is meaningless)");
  cmd->add_option("--threads,-t", flags->threads, "CPU threads for the model (default: all cores)");
}

void AddNumericsFlags(CLI::App* cmd, ModelFlags* flags) {
  cmd->add_option("--backend", flags->backend,
                  "auto | cpu | cuda (auto: cuda when this build has it and a GPU answers)")
      ->capture_default_str();
  cmd->add_option("--gpus", flags->gpus,
                  "CUDA devices: 0,1,... or auto (every device), the routed experts spread "
                  "over them; default one GPU, device 0");
  cmd->add_option("--expert-shards", flags->expert_shards,
                  "spread the routed experts over N CPU backends in this process: the CPU "
                  "form of several --gpus (answers do not change; for tests)");
  cmd->add_option("--gpu-memory", flags->gpu_memory,
                  "auto | GiB: device memory flashkv may use (auto: what the GPU has free); when "
                  "the model does not fit, the routed experts stay in host memory behind a "
                  "device cache of the hottest experts (docs/CUDA.md)")
      ->capture_default_str();
  cmd->add_option("--expert-cache-slots", flags->expert_cache_slots,
                  "keep the routed experts in host memory with at most N of them cached on the "
                  "device, even when the model fits (benchmarks, tests)");
  cmd->add_option("--expert-stage-rows", flags->expert_stage_rows,
                  "with experts in host memory: steps of at least N rows copy each layer's "
                  "uncached experts to the device ahead of its MoE block; 0: kernels read them "
                  "across PCIe in place")
      ->capture_default_str();
  cmd->add_option("--expert-gather-rows", flags->expert_gather_rows,
                  "with experts in host memory: steps of at most N rows copy the experts they "
                  "chose to the device with every SM before reading them; 0: kernels read them "
                  "across PCIe in place")
      ->capture_default_str();
  cmd->add_option("--expert-host", flags->expert_host,
                  "with experts in host memory: pin (page-locked: every expert in RAM), pageable "
                  "(the GGUF's pages through the page cache, read from disk when RAM is short; "
                  "needs a GPU with HMM or ATS) or auto (pin when host memory holds them)")
      ->capture_default_str();
  cmd->add_option(
      "--numerics", flags->numerics,
      "hf | official | fast (default: official for ds4 GGUFs; fast: tensor-core prefill, "
      "docs/CUDA.md)");
  cmd->add_option("--act-quant", flags->act_quant, "off | q8 (default: q8 with official numerics)");
}

void AddTokenizerFlag(CLI::App* cmd, ModelFlags* flags) {
  cmd->add_option("--tokenizer", flags->tokenizer,
                  "for --model random:...: a tokenizer.json or GGUF with the DeepSeek vocabulary "
                  "(default models/tokenizer/tokenizer.json)");
}

Expected<Tokenizer> LoadTokenizerFile(const std::string& path, int n_vocab) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0) {
    FLASHKV_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(path));
    auto tokenizer = Tokenizer::FromGguf(file);
    if (!tokenizer.ok()) return tokenizer.status().WithContext(path);
    return tokenizer;
  }
  // Its errors already name the file.
  FLASHKV_ASSIGN_OR_RETURN(Vocab vocab, LoadVocabFromTokenizerJson(path));
  Status s = AddMissingChatMarkers(vocab, size_t(n_vocab));
  if (!s.ok()) return s.WithContext(path);
  auto tokenizer = Tokenizer::FromVocab(vocab);
  if (!tokenizer.ok()) return tokenizer.status().WithContext(path);
  return tokenizer;
}

namespace {

constexpr const char* kDefaultTokenizer = "models/tokenizer/tokenizer.json";

Status ApplyNumericsFlags(const ModelFlags& flags, ModelOptions& options) {
  if (!flags.numerics.empty()) {
    FLASHKV_RETURN_IF_ERROR(ApplyNumericsFlag(flags.numerics, &options));
  }
  if (!flags.act_quant.empty()) {
    FLASHKV_ASSIGN_OR_RETURN(options.act_quant, ParseActQuantMode(flags.act_quant));
  }
  return Status::Ok();
}

Expected<ModelSetup> OpenRandomModel(const ModelFlags& flags) {
  FLASHKV_ASSIGN_OR_RETURN(RandomModelSpec spec, ParseRandomModelSource(flags.model));
  const ModelConfig config = RandomModelConfig(spec);
  ModelOptions options = DefaultModelOptions(config);
  FLASHKV_RETURN_IF_ERROR(ApplyNumericsFlags(flags, options));
  std::string tokenizer_path = flags.tokenizer;
  if (tokenizer_path.empty()) {
    FLASHKV_ASSIGN_OR_RETURN(tokenizer_path, FindProjectFile(kDefaultTokenizer));
  }
  FLASHKV_ASSIGN_OR_RETURN(Tokenizer tokenizer, LoadTokenizerFile(tokenizer_path, config.n_vocab));
  std::string description = spec.Describe() + ", tokenizer " + tokenizer_path;
  return ModelSetup{flags.model,          std::nullopt, options,
                    std::move(tokenizer), spec,         std::move(description)};
}

}  // namespace

Expected<ModelSetup> OpenModel(const ModelFlags& flags) {
  if (IsRandomModelSource(flags.model)) return OpenRandomModel(flags);
  if (!flags.tokenizer.empty()) {
    return InvalidArgument(
        "--tokenizer is for random: models; a GGUF model uses its own vocabulary");
  }
  FLASHKV_ASSIGN_OR_RETURN(std::string path, ResolveModelPath(flags.model));
  FLASHKV_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(path));
  Expected<ModelConfig> config = ModelConfig::FromGguf(file);
  if (!config.ok()) return config.status().WithContext(path);
  ModelOptions options = DefaultModelOptions(*config);
  FLASHKV_RETURN_IF_ERROR(ApplyNumericsFlags(flags, options));
  Expected<Tokenizer> tokenizer = Tokenizer::FromGguf(file);
  if (!tokenizer.ok()) return tokenizer.status().WithContext(path);
  std::string description = path;
  return ModelSetup{std::move(path),       std::move(file), options,
                    std::move(*tokenizer), std::nullopt,    std::move(description)};
}

std::string ResolvedBackend(const ModelFlags& flags) {
  if (flags.backend == "auto" && !flags.gpus.empty()) return "cuda";
  return Runtime::ResolveBackend(flags.backend);
}

Expected<std::unique_ptr<Runtime>> OpenRuntime(const ModelFlags& flags, const ModelSetup& setup,
                                               const DeviceReserve& reserve,
                                               LoadProgressFn progress) {
  RuntimeOptions ro;
  ro.load_progress = std::move(progress);
  if (flags.gpu_memory != "auto") {
    double gib = 0;
    try {
      size_t used = 0;
      gib = std::stod(flags.gpu_memory, &used);
      if (used != flags.gpu_memory.size()) gib = -1;
    } catch (const std::exception&) {
      gib = -1;
    }
    if (!(gib > 0) || gib > 1e6) {
      return InvalidArgument("--gpu-memory: expected auto or a positive number of GiB, got '{}'",
                             flags.gpu_memory);
    }
    ro.gpu_memory_bytes = uint64_t(gib * double(uint64_t(1) << 30));
  }
  ro.expert_stage_min_rows = flags.expert_stage_rows;
  ro.expert_gather_max_rows = flags.expert_gather_rows;
  FLASHKV_ASSIGN_OR_RETURN(ro.expert_host, ParseExpertHostMode(flags.expert_host));
  if (flags.expert_cache_slots >= 0) {
    ro.force_expert_cache = true;
    ro.expert_cache_slots = flags.expert_cache_slots;
  }
  ro.keep_free = [reserve](const ModelConfig& config, const Backend::MemoryInfo& device) {
    const uint64_t kv =
        reserve.ctx > 0 ? KvState::AllocatedBytes(StateShapeFor(config, reserve.ctx)) : 0;
    return ActivationReserveBytes(device, reserve.prefill_chunk) +
           uint64_t(std::max(reserve.sessions, 0)) * kv;
  };
  ro.model_path = setup.path;
  ro.threads = flags.threads;
  ro.backend = flags.backend;
  ro.model = &setup.options;
  ro.expert_shards = flags.expert_shards;
  if (!flags.gpus.empty()) {
    std::string why;
    const int present = Runtime::CudaDeviceCount(&why);
    FLASHKV_ASSIGN_OR_RETURN(ro.gpus, ParseGpus(flags.gpus, present, why));
    if (ro.backend == "auto") ro.backend = ResolvedBackend(flags);
  }
  return Runtime::Open(ro);
}

Expected<Sha1Digest> SetupFingerprint(const ModelSetup& setup) {
  if (setup.random) return RandomModelFingerprint(*setup.random);
  Expected<Sha1Digest> fingerprint = ModelFingerprint(*setup.file);
  if (!fingerprint.ok()) return fingerprint.status().WithContext(setup.path);
  return fingerprint;
}

SnapshotIdentity CacheIdentity(const Sha1Digest& fingerprint, const ModelOptions& options) {
  return SnapshotIdentity{fingerprint, fmt::format("{}/{}", NumericsName(options),
                                                   ActQuantModeName(options.act_quant))};
}

}  // namespace flashkv::cli
