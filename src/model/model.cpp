// Model loading and the top-level forward pass (docs/DS4_MODEL.md §2), read top to bottom:
// embed → for each layer: attention sublayer, FFN sublayer → HC head, norm, lm head.
#include "model/model.h"

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include "model/rope_table.h"
#include "model/sharded_moe.h"  // complete for experts_ in the constructor
#include "model/step_scratch.h"

namespace flashkv {

Model::Model(std::optional<GgufFile> file, ModelConfig config, ModelOptions options,
             Backend& backend)
    : file_(std::move(file)), config_(std::move(config)), options_(options), backend_(backend) {}

Expected<std::unique_ptr<Model>> Model::Load(const std::string& path, Backend& backend,
                                             const ModelOptions* options,
                                             const LoadProgressFn& progress) {
  return LoadFile(path, backend, options, /*place_routed_experts=*/true, progress);
}

Expected<std::unique_ptr<Model>> Model::LoadFile(const std::string& path, Backend& backend,
                                                 const ModelOptions* options,
                                                 bool place_routed_experts,
                                                 const LoadProgressFn& progress) {
  auto file = GgufFile::Open(path);
  if (!file.ok()) return file.status();
  auto config = ModelConfig::FromGguf(*file);
  if (!config.ok()) return config.status().WithContext(path);
  const ModelOptions opts = options ? *options : DefaultModelOptions(*config);
  if (opts.numerics == NumericsMode::kOfficial) {
    Status s = CheckOfficialNumericsSupported(*config);
    if (!s.ok()) return s.WithContext(path);
  }
  FLASHKV_RETURN_IF_ERROR(backend.SetFloatPath(opts.float_path));
  std::unique_ptr<Model> m(new Model(std::move(*file), std::move(*config), opts, backend));
  auto weights = BindModelWeights(*m->file_, m->config_, backend, place_routed_experts, progress);
  if (!weights.ok()) return weights.status().WithContext(path);
  m->weights_ = std::move(*weights);
  m->FinishLoad(path);
  return m;
}

Expected<std::unique_ptr<Model>> Model::LoadWithExpertCache(const std::string& path,
                                                            Backend& backend,
                                                            const ExpertCacheOptions& cache,
                                                            const ModelOptions* options,
                                                            const LoadProgressFn& progress) {
  FLASHKV_ASSIGN_OR_RETURN(
      std::unique_ptr<Model> m,
      LoadFile(path, backend, options, /*place_routed_experts=*/false, progress));
  auto made = ExpertCache::Create(m->config_, m->weights_, *m->file_, backend, cache);
  if (!made.ok()) return made.status().WithContext(path);
  m->cache_ = std::move(*made);
  const ExpertCacheStats st = m->cache_->stats();
  spdlog::info("model: routed experts in host memory ({:.2f} GiB), {} of {} on the device",
               double(st.host_bytes) / double(1ull << 30), st.slots, st.experts);
  return m;
}

Expected<std::unique_ptr<Model>> Model::FromWeights(const std::string& name, ModelConfig config,
                                                    ModelWeights weights,
                                                    std::vector<DeviceBuffer> storage,
                                                    Backend& backend, const ModelOptions* options) {
  Status valid = config.Validate();
  if (!valid.ok()) return valid.WithContext(name);
  if (weights.layers.size() != size_t(config.n_layer)) {
    return InvalidArgument("{}: {} layers of weights for a config of {}", name,
                           weights.layers.size(), config.n_layer);
  }
  const ModelOptions opts = options ? *options : DefaultModelOptions(config);
  if (opts.numerics == NumericsMode::kOfficial) {
    Status s = CheckOfficialNumericsSupported(config);
    if (!s.ok()) return s.WithContext(name);
  }
  FLASHKV_RETURN_IF_ERROR(backend.SetFloatPath(opts.float_path));
  std::unique_ptr<Model> m(new Model(std::nullopt, std::move(config), opts, backend));
  m->weights_ = std::move(weights);
  m->storage_ = std::move(storage);
  m->FinishLoad(name);
  return m;
}

void Model::FinishLoad(const std::string& source) {
  main_rope_ = MainRope(config_);
  compress_rope_ = CompressRope(config_);
  spdlog::info("model {}: {} layers, n_embd {}, vocab {}, numerics {}, act-quant {}",
               config_.name.empty() ? source : config_.name, config_.n_layer, config_.n_embd,
               config_.n_vocab, NumericsName(options_), ActQuantModeName(options_.act_quant));
  if (config_.layout == GgufLayout::kLlamaCpp) {
    spdlog::info("model: llama.cpp deepseek4 layout, {} multi-token-prediction layer(s) not run",
                 config_.n_layer_nextn);
  }
}

KvShape StateShapeFor(const ModelConfig& config, int ctx_size) {
  KvShape s;
  s.head_dim = config.head_dim;
  s.n_swa = config.n_swa;
  s.indexer_dim = config.indexer_head_dim;
  s.ctx_size = ctx_size;
  for (int l = 0; l < config.n_layer; ++l) {
    s.layers.push_back(
        KvLayerShape{config.compress_ratio(l), config.is_overlapping(l), config.has_indexer(l)});
  }
  return s;
}

KvShape Model::StateShape(int ctx_size) const {
  return StateShapeFor(config_, ctx_size);
}

Expected<KvState> Model::NewState(int ctx_size) const {
  if (ctx_size <= 0) return InvalidArgument("context size must be positive, got {}", ctx_size);
  return KvState::Create(backend_, StateShape(ctx_size));
}

Status Model::EnsureActivations(int capacity, int logits_rows) {
  if (act_.capacity >= capacity && act_.logits_rows >= logits_rows) return Status::Ok();
  capacity = std::max(capacity, act_.capacity);
  logits_rows = std::max(logits_rows, act_.logits_rows);
  act_ = Activations();  // free the smaller set first
  FLASHKV_ASSIGN_OR_RETURN(act_, Activations::Allocate(backend_, config_, capacity, logits_rows));
  return Status::Ok();
}

Status Model::CheckChunk(std::span<const int32_t> tokens, const KvState& state) const {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= config_.n_vocab) {
      return InvalidArgument("token id {} at index {} is outside the vocabulary (0..{})", tokens[i],
                             i, config_.n_vocab - 1);
    }
  }
  if (state.n_tokens() + int64_t(tokens.size()) > state.ctx_size()) {
    return ResourceExhausted("{} tokens after {} exceed the context size {}", tokens.size(),
                             state.n_tokens(), state.ctx_size());
  }
  return Status::Ok();
}

Status Model::Forward(std::span<const int32_t> tokens, KvState& state, LogitsFor which,
                      float* logits, int max_chunk) {
  FLASHKV_RETURN_IF_ERROR(CheckChunk(tokens, state));
  if (tokens.empty()) return Status::Ok();
  const size_t chunk = max_chunk <= 0 ? tokens.size() : std::min(tokens.size(), size_t(max_chunk));
  for (size_t done = 0; done < tokens.size(); done += chunk) {
    const size_t n = std::min(chunk, tokens.size() - done);
    const bool last_chunk = done + n == tokens.size();
    SessionChunk part{tokens.subspan(done, n), &state, which, logits};
    if (which == LogitsFor::kAll) {
      part.logits = logits + done * size_t(config_.n_vocab);
    } else if (which == LogitsFor::kLast && !last_chunk) {
      part.logits_for = LogitsFor::kNone;
    }
    FLASHKV_RETURN_IF_ERROR(RunStep({&part, 1}));
  }
  return Status::Ok();
}

}  // namespace flashkv
