// Model: a loaded DeepSeek V4 GGUF (config + bound weights) and its forward pass, written
// once against Backend. Forward() appends tokens to a KvState and produces logits; a
// prompt may be fed in chunks of any size, token by token or at once, with bit-identical
// logits and state (each op computes a token's values in the same float order whatever
// the chunk). ForwardBatch() runs the chunks of several sessions as one step (shared
// weights read once for all rows), with each session's bits as if it ran alone. Must not:
// do HTTP, tokenization or sampling.
//
// Threading: one Forward / ForwardBatch at a time per Model (activations are shared scratch).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf_file.h"
#include "model/activations.h"
#include "model/expert_cache.h"
#include "model/model_config.h"
#include "model/model_options.h"
#include "model/model_weights.h"
#include "state/kv_state.h"

namespace flashkv {

class ExpertShards;  // model/sharded_moe.h
class RowExchange;   // backend/exchange.h

// Which positions of a Forward call get logits.
enum class LogitsFor {
  kNone,  // state only
  kLast,  // [1, n_vocab] for the last token
  kAll,   // [n_tokens, n_vocab], one row per token
};

// One session's part of a ForwardBatch step: its next tokens (one decode token or a prefill
// chunk), appended at state->n_tokens() …, and which of them get logits.
struct SessionChunk {
  std::span<const int32_t> tokens;
  KvState* state = nullptr;
  LogitsFor logits_for = LogitsFor::kNone;
  float* logits = nullptr;  // n_vocab floats per row that logits_for asks for
};

// The KV a session of `config` holds at ctx_size tokens (Model::StateShape, before a model
// is loaded: the memory planners size the device's budget with it).
KvShape StateShapeFor(const ModelConfig& config, int ctx_size);

class Model {
 public:
  // Opens and validates `path`, binds every tensor on `backend` (which must outlive the
  // model). `options` null: DefaultModelOptions for the file. Errors name the key or
  // tensor at fault.
  // `progress` (model_weights.h) follows the weights onto the backend.
  static Expected<std::unique_ptr<Model>> Load(const std::string& path, Backend& backend,
                                               const ModelOptions* options = nullptr,
                                               const LoadProgressFn& progress = {});
  // A model over weights already placed on `backend` (no GGUF file: e.g. the random-weight
  // models of model/random_model.h). `storage` holds the buffers some of those weights
  // live in and is freed with the model. Checks the config and the numerics options as
  // Load does; `name` is for the log line.
  static Expected<std::unique_ptr<Model>> FromWeights(const std::string& name, ModelConfig config,
                                                      ModelWeights weights,
                                                      std::vector<DeviceBuffer> storage,
                                                      Backend& backend,
                                                      const ModelOptions* options = nullptr);

  ~Model();

  const ModelConfig& config() const { return config_; }
  const ModelOptions& options() const { return options_; }
  Backend& backend() const { return backend_; }

  // The KvState shape for a context of ctx_size tokens.
  KvShape StateShape(int ctx_size) const;
  Expected<KvState> NewState(int ctx_size) const;

  // Runs `tokens` at positions state.n_tokens() … and appends them to `state`, in chunks
  // of at most `max_chunk` tokens (<= 0: all at once). Writes logits per `which` to
  // `logits` (row-major, n_vocab floats per row). Token ids must be < n_vocab.
  Status Forward(std::span<const int32_t> tokens, KvState& state, LogitsFor which, float* logits,
                 int max_chunk = 0);

  // One step over the chunks of several sessions (model/forward_batch.cpp): the row-wise
  // work (projections, HC, norms, MoE, head) runs once over every chunk's rows, the work
  // that reads a session's state (positions, window, compressors, indexer, attention) per
  // session. Every session's logits and KvState are bit-identical to Forward() of its
  // chunk alone (the batching contract, docs/DESIGN.md "Batching"). Each state at most
  // once; chunks without tokens are skipped. Nothing runs unless every chunk is valid.
  Status ForwardBatch(std::span<const SessionChunk> chunks);

  // Debug hook: called after every layer with the residual streams of the chunk (in a
  // ForwardBatch step, once per session's chunk), x_hc [n_tokens, n_hc·n_embd] on the host. Costs a
  // device read per layer when set.
  using LayerObserver =
      std::function<void(int layer, int64_t pos0, int n_tokens, const float* x_hc)>;
  void SetLayerObserver(LayerObserver observer) { observer_ = std::move(observer); }

  // Expert parallel (docs/MULTI_GPU.md, model/sharded_moe.cpp): from the next step on, the
  // routed experts run on `shards` (a contiguous block of every layer's experts each, placed
  // from the GGUF mapping, or for a model without a file copied from backend()), their rows
  // moved through `exchange`; everything else stays on backend(). Logits and KvState keep
  // their bits. Both must outlive the model or the next call; an empty span goes back to one
  // backend (placing the experts there if it lacks them). Not during a Forward.
  Status ShardExperts(std::span<Backend* const> shards, RowExchange& exchange);

  // Load() with the routed experts expert-parallel from the start: `home` gets everything
  // but the routed-expert stacks, each shard only its block of them, placed straight from
  // the GGUF mapping (the other shards' expert bytes are never read). `home` may be one of
  // the shards (a device that is home and shard, as in a server over N devices). Logits
  // equal Load()'s on one backend bit for bit. Lifetimes as for Load and ShardExperts.
  static Expected<std::unique_ptr<Model>> LoadExpertParallel(const std::string& path, Backend& home,
                                                             std::span<Backend* const> shards,
                                                             RowExchange& exchange,
                                                             const ModelOptions* options = nullptr);

  // A second home device for the same file (several homes, docs/MULTI_GPU.md): `home` gets
  // every weight but the routed experts, which stay where `other` (loaded with
  // LoadExpertParallel) placed them and are shared with it. Its sessions' state lives on
  // `home`; their logits equal one backend's bit for bit. One Forward at a time over all
  // the models sharing the experts; the shards' backends and exchange must outlive them all.
  static Expected<std::unique_ptr<Model>> LoadSharingExperts(const std::string& path, Backend& home,
                                                             const Model& other,
                                                             const ModelOptions* options = nullptr);

  // The weight bytes each backend was given (PlacedWeightBytes): home's, and each expert
  // shard's (empty without shards). A backend that is home and a shard holds both.
  struct WeightBytes {
    uint64_t home = 0;
    std::vector<uint64_t> shards;
  };
  WeightBytes PlacedBytes() const;
  // The routed experts' shards; null on one backend.
  const ExpertShards* expert_shards() const { return experts_.get(); }

  // Load() with the routed experts in host memory behind a device cache of options.slots
  // whole experts (model/expert_cache.h): logits equal Load()'s bit for bit. `backend` must
  // read host memory in place (Backend::MapHost).
  static Expected<std::unique_ptr<Model>> LoadWithExpertCache(const std::string& path,
                                                              Backend& backend,
                                                              const ExpertCacheOptions& cache,
                                                              const ModelOptions* options = nullptr,
                                                              const LoadProgressFn& progress = {});
  // The routed experts' device cache; null when they are all on the device.
  ExpertCache* expert_cache() { return cache_.get(); }
  const ExpertCache* expert_cache() const { return cache_.get(); }

 private:
  Model(std::optional<GgufFile> file, ModelConfig config, ModelOptions options, Backend& backend);
  static Expected<std::unique_ptr<Model>> LoadFile(const std::string& path, Backend& backend,
                                                   const ModelOptions* options,
                                                   bool place_routed_experts,
                                                   const LoadProgressFn& progress = {});
  // The rope tables and the log line, once the weights are bound.
  void FinishLoad(const std::string& source);
  Status EnsureActivations(int capacity, int logits_rows);
  // Checks ids against the vocabulary and the chunk against the context.
  Status CheckChunk(std::span<const int32_t> tokens, const KvState& state) const;
  // One step over checked, non-empty chunks (model/forward_batch.cpp).
  Status RunStep(std::span<const SessionChunk> chunks);

  std::optional<GgufFile> file_;       // keeps the weight bytes mapped (none: FromWeights)
  std::vector<DeviceBuffer> storage_;  // weights' buffers owned by the model (FromWeights)
  ModelConfig config_;
  ModelOptions options_;
  Backend& backend_;
  ModelWeights weights_;
  RopeParams main_rope_;
  RopeParams compress_rope_;
  Activations act_;
  struct StepScratch;                  // model/forward_batch.cpp: reused so steps do not allocate
  std::unique_ptr<StepScratch> step_;  // host-side lists of the step
  std::vector<float> observer_buf_;
  LayerObserver observer_;
  // Null: the routed experts run on backend_. Shared by the Models of several home devices
  // (LoadSharingExperts).
  std::shared_ptr<ExpertShards> experts_;
  // Declared last, destroyed first: it unmaps host memory the kernels read.
  std::unique_ptr<ExpertCache> cache_;
};

}  // namespace flashkv
