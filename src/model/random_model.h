// Random-weight DeepSeek V4 models: a model source `random:SHAPE[:LAYERS]` (e.g.
// `random:flash`, `random:flash:12`, `random:tiny`) names a ModelConfig and weights that
// the backend generates itself (Backend::RandomWeight), so the real Model code can be
// benchmarked at DeepSeek-V4-Flash's shape without its 81 GB file. Weights are valid
// blocks in Flash's q2 quant mix (IQ2_XXS expert gate/up, Q2_K expert down, Q8_0 attention,
// shared expert and lm head, F16 embedding, HC, compressor, indexer and router, F32
// vectors), deterministic for a shape. The text they produce is meaningless; speed, KV and
// snapshot sizes are those of the shape.
// Must not: do I/O (there is no file), tokenize (the caller brings a tokenizer with the
// shape's 129280-id DeepSeek vocabulary).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "util/sha1.h"
#include "util/status.h"

namespace flashkv {

struct RandomModelSpec {
  std::string shape;  // "flash" | "tiny"
  int n_layer = 0;    // layers built (the shape's full count unless reduced)
  int full_layers = 0;

  bool reduced() const { return n_layer < full_layers; }
  // The canonical source ("random:flash", "random:flash:12").
  std::string Source() const;
  // For logs and plots: "random:flash:12 (DeepSeek-V4-Flash shape, 12 of 43 layers, random
  // weights)".
  std::string Describe() const;
};

// True for sources of the form `random:...` (the rest may still be invalid).
bool IsRandomModelSource(std::string_view source);
// Parses `random:SHAPE[:LAYERS]`; LAYERS in 1..the shape's layer count. Errors name the
// bad part and list the shapes.
Expected<RandomModelSpec> ParseRandomModelSource(std::string_view source);

// The shapes. Flash: DeepSeek-V4-Flash (43 layers, n_embd 4096, 256 experts, 6 used).
// Tiny: the shape of `flashkv make-tiny --preset tiny` (6 layers, n_embd 256, 8 experts),
// small enough for CPU tests. The first n_layer layers of the shape's schedule.
ModelConfig RandomModelConfig(const RandomModelSpec& spec);

// The weights of `config` generated on `backend`.
struct RandomWeights {
  ModelWeights weights;
  std::vector<DeviceBuffer> storage;  // F32 vectors and I32 tables (RandomWeight bytes are
                                      // the backend's)
  uint64_t total_bytes = 0;           // every weight
  // What one decoded token reads: every dense weight, n_expert_used experts' rows of each
  // routed expert stack, one embedding row (for an HBM bound).
  uint64_t bytes_per_token = 0;
};
Expected<RandomWeights> MakeRandomWeights(const ModelConfig& config, Backend& backend);

// The snapshot identity of a random model: SHA1 of its canonical source and generator
// version (the weights are a pure function of both).
Sha1Digest RandomModelFingerprint(const RandomModelSpec& spec);

// RandomModelConfig + MakeRandomWeights + Model::FromWeights. `weights_info` (optional)
// receives the byte counts (its weights and storage are left empty).
Expected<std::unique_ptr<Model>> MakeRandomModel(const RandomModelSpec& spec, Backend& backend,
                                                 const ModelOptions* options = nullptr,
                                                 RandomWeights* weights_info = nullptr);

}  // namespace flashkv
