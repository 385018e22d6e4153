// ExpertShards: a model's routed experts spread over several backends (expert parallel,
// docs/MULTI_GPU.md). The home backend runs everything else (router, shared expert, HC,
// attention, KV); each shard holds a contiguous block of every layer's experts
// (ExpertShardPlan) and computes the (token, slot) pairs routed to them. Rows travel through
// a RowExchange: the pairs' inputs to their shards, each pair's weighted down projection
// back into a slot-major buffer on home, which sums the slots in slot order from 0, as one
// backend's MoeExperts does: the logits equal one backend's bit for bit.
// Must not: own the backends or the exchange (the caller does; they outlive the model).
#pragma once

#include <array>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/exchange.h"
#include "gguf/gguf_file.h"
#include "model/expert_shards.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace flashkv {

// Experts [first, first + count) of the 3-D expert stack `stack`, placed on `to`: a slice of
// `file`'s mapping when the file holds the tensor (no other expert's byte is read), else read
// back from `home` into `bytes` (which must then outlive the Weight on a backend that keeps
// host bytes in place). The Weight's ne[2] is `count`.
Expected<Weight> PlaceExpertBlock(const Weight& stack, const GgufFile* file, Backend& home,
                                  int first, int count, Backend& to, std::vector<uint8_t>& bytes);

class ExpertShards {
 public:
  // Places each shard's block of every layer's expert stacks on its backend: from `file`'s
  // mapping when given (only the block's bytes: the tensors must be those `weights` were
  // bound from), else read back from `home`, where `weights` then must hold them.
  // shards.size() in [1, n_expert]; a shard may be `home` itself; errors name the layer.
  static Expected<std::unique_ptr<ExpertShards>> Create(const ModelConfig& config,
                                                        const ModelWeights& weights,
                                                        const GgufFile* file, Backend& home,
                                                        std::span<Backend* const> shards,
                                                        RowExchange& exchange);

  const ExpertShardPlan& plan() const { return plan_; }
  // The expert weight bytes shard d holds (its blocks of every layer's three stacks).
  uint64_t placed_bytes(int shard) const;
  // Shard d's block of layer l's stack i (0 gate, 1 up, 2 down).
  const Weight& block(int shard, int layer, int i) const {
    return shards_[size_t(shard)].layers[size_t(layer)][size_t(i)];
  }

  // Backend::MoeBlock's chain for layer `layer` with the routed experts on the shards; `a`
  // lives on `home`, which runs the router, the slot sum, the shared expert and HC_post.
  // Several home backends may share one ExpertShards (several Models, one a home device:
  // Model::LoadSharingExperts), one call at a time. An error is sticky (like a device
  // error): later calls do nothing until TakeError().
  void MoeBlock(Backend& home, int layer, const MoeBlockArgs& a);
  // The first error since the last call, and clears it.
  Status TakeError();

 private:
  struct Shard {
    Backend* be = nullptr;
    std::vector<std::array<Weight, 3>> layers;  // gate, up, down: this shard's experts
    std::vector<std::vector<uint8_t>> bytes;    // read back from home (PlaceWeight may keep them)
    DeviceBuffer x, selected, weights, y;       // per pair: input, local expert, weight, output
    size_t capacity = 0;                        // pairs the buffers hold
  };

  ExpertShards(ExpertShardPlan plan, Backend& home, RowExchange& exchange)
      : plan_(std::move(plan)), home_(home), exchange_(exchange) {}
  Status Run(Backend& home, int layer, const MoeBlockArgs& a);
  Status RunShard(Backend& home, Shard& shard, const ShardPairs& part, int layer,
                  const MoeBlockArgs& a, int n_embd, DevPtr<float> slot_rows);

  // A home's [n_used, n_tokens, n_embd] buffer of each pair's routed output.
  struct HomeRows {
    Backend* home = nullptr;
    DeviceBuffer rows;
  };

  ExpertShardPlan plan_;
  Backend& home_;  // where Create read blocks back from (a model without a file)
  RowExchange& exchange_;
  std::vector<Shard> shards_;
  std::vector<HomeRows> slot_rows_;  // one per home seen
  std::vector<int32_t> selected_;    // host copies of the router's choice
  std::vector<float> route_w_;
  std::vector<ShardPairs> parts_;
  std::vector<RowMove> moves_;
  std::vector<float> pair_w_;
  Status error_;
};

}  // namespace flashkv
