// The MoE block with its routed experts on several backends. Why the bits equal one
// backend's: a pair's output depends only on its token's input row, its expert and its route
// weight (MoeExperts' batching contract: the multi-token kernels give every output the bits
// of a single-token dot), so a shard that runs its pairs as tokens of one slot each
// (n_used 1) computes the very rows one backend computes; MoeExperts' out starts at +0 and
// adds the slots in slot order, and so does the sum here over the slot-major rows.
#include "model/sharded_moe.h"

#include <utility>

#include "backend/moe_route.h"
#include "model/model.h"

namespace flashkv {
namespace {

Status Grow(Backend& be, DeviceBuffer& buf, size_t bytes) {
  if (buf.bytes() >= bytes) return Status::Ok();
  buf = DeviceBuffer();
  FLASHKV_ASSIGN_OR_RETURN(buf, be.Alloc(bytes));
  return Status::Ok();
}

}  // namespace

Expected<Weight> PlaceExpertBlock(const Weight& stack, const GgufFile* file, Backend& home,
                                  int first, int count, Backend& to, std::vector<uint8_t>& bytes) {
  const uint64_t mb = stack.matrix_bytes();
  const uint64_t want = mb * uint64_t(count);
  if (first < 0 || count < 1 || uint64_t(first) + uint64_t(count) > stack.ne[2]) {
    return InvalidArgument("{}: experts [{}, {}) outside its {}", stack.name, first,
                           int64_t(first) + count, stack.ne[2]);
  }
  WeightSource s{
      stack.name, stack.type, {stack.ne[0], stack.ne[1], uint64_t(count)}, nullptr, want};
  const GgufTensorInfo* t = file != nullptr ? file->FindTensor(stack.name) : nullptr;
  if (t != nullptr) {
    if (t->type != stack.type || t->nbytes < mb * stack.ne[2]) {
      return Corrupt("{}: the file's tensor is not the bound stack", stack.name);
    }
    s.host_data = t->data + mb * uint64_t(first);
  } else {
    if (!stack.present()) {
      return FailedPrecondition("{}: not placed on the home backend and no file to place it from",
                                stack.name);
    }
    bytes.resize(size_t(want));
    FLASHKV_RETURN_IF_ERROR(
        home.Read(stack.data + size_t(mb) * size_t(first), bytes.data(), bytes.size()));
    s.host_data = bytes.data();
  }
  return to.PlaceWeight(s);
}

Expected<std::unique_ptr<ExpertShards>> ExpertShards::Create(const ModelConfig& config,
                                                             const ModelWeights& weights,
                                                             const GgufFile* file, Backend& home,
                                                             std::span<Backend* const> shards,
                                                             RowExchange& exchange) {
  FLASHKV_ASSIGN_OR_RETURN(ExpertShardPlan plan,
                           ExpertShardPlan::Make(config.n_expert, int(shards.size())));
  std::unique_ptr<ExpertShards> out(new ExpertShards(std::move(plan), home, exchange));
  out->shards_.resize(shards.size());
  for (size_t d = 0; d < shards.size(); ++d) {
    Shard& sh = out->shards_[d];
    if (shards[d] == nullptr) return InvalidArgument("expert shards: shard {} has no backend", d);
    sh.be = shards[d];
    sh.layers.resize(weights.layers.size());
    sh.bytes.resize(weights.layers.size() * 3);
    for (size_t l = 0; l < weights.layers.size(); ++l) {
      const LayerWeights& w = weights.layers[l];
      const Weight* stacks[3] = {&w.ffn_gate_exps, &w.ffn_up_exps, &w.ffn_down_exps};
      for (int i = 0; i < 3; ++i) {
        auto placed =
            PlaceExpertBlock(*stacks[i], file, home, out->plan_.first(int(d)),
                             out->plan_.count(int(d)), *sh.be, sh.bytes[l * 3 + size_t(i)]);
        if (!placed.ok()) {
          return placed.status().WithContext(fmt::format("expert shard {}, layer {}", d, l));
        }
        sh.layers[l][size_t(i)] = std::move(*placed);
      }
    }
  }
  return out;
}

uint64_t ExpertShards::placed_bytes(int shard) const {
  uint64_t total = 0;
  for (const auto& layer : shards_[size_t(shard)].layers) {
    for (const Weight& w : layer) total += w.matrix_bytes() * w.ne[2];
  }
  return total;
}

void ExpertShards::MoeBlock(Backend& home, int layer, const MoeBlockArgs& a) {
  if (!error_.ok()) return;
  error_ = Run(home, layer, a);
}

Status ExpertShards::TakeError() {
  return std::exchange(error_, Status::Ok());
}

Status ExpertShards::Run(Backend& be, int layer, const MoeBlockArgs& a) {
  const int T = a.n_tokens;
  const int k = a.n_used;
  const int D = a.hc.n_embd;
  const size_t n_pairs = size_t(T) * size_t(k);

  // Routing on home, as Backend::MoeBlock does (backend/moe_route.h).
  RouteMoeBlock(be, a);

  // The choice comes to the host to split the pairs (docs/MULTI_GPU.md: on CUDA every device
  // routes its own replicated rows instead, and no index crosses to the host).
  selected_.resize(n_pairs);
  route_w_.resize(n_pairs);
  FLASHKV_RETURN_IF_ERROR(be.Read(a.selected, selected_.data(), n_pairs * sizeof(int32_t)));
  FLASHKV_RETURN_IF_ERROR(be.Read(a.weights, route_w_.data(), n_pairs * sizeof(float)));
  FLASHKV_RETURN_IF_ERROR(PartitionPairs(plan_, selected_, parts_));

  HomeRows* mine = nullptr;
  for (HomeRows& h : slot_rows_) {
    if (h.home == &be) mine = &h;
  }
  if (mine == nullptr) mine = &slot_rows_.emplace_back(HomeRows{&be, DeviceBuffer()});
  FLASHKV_RETURN_IF_ERROR(Grow(be, mine->rows, n_pairs * size_t(D) * sizeof(float)));
  const DevPtr<float> rows = mine->rows.as<float>();
  for (size_t d = 0; d < shards_.size(); ++d) {
    Status s = RunShard(be, shards_[d], parts_[d], layer, a, D, rows);
    if (!s.ok()) return s.WithContext(fmt::format("expert shard {}, layer {}", d, layer));
  }

  // routed[t] = Σ_slot rows[slot, t] in slot order from +0.
  const size_t plane = size_t(T) * size_t(D);
  be.Fill(a.routed, 0.0f, plane);
  for (int s = 0; s < k; ++s) be.Add(a.routed, rows + size_t(s) * plane, a.routed, plane);

  // The shared expert, the sum and HC_post: the rest of Backend::MoeBlock's chain.
  const size_t n_ff_shared = size_t(a.shared_gate->ne[1]);
  be.MatMul(*a.shared_gate, a.x, T, a.shared_gate_out, a.aq);
  be.MatMul(*a.shared_up, a.x, T, a.shared_up_out, a.aq);
  be.SwiGlu(a.shared_gate_out, a.shared_up_out, a.shared_mid, size_t(T) * n_ff_shared, a.clamp);
  be.MatMul(*a.shared_down, a.shared_mid, T, a.f, a.aq);
  be.Add(a.routed, a.f, a.f, plane);
  be.HcPost(a.x_hc, a.f, a.post, a.comb, T, a.hc, a.out);
  return Status::Ok();
}

Status ExpertShards::RunShard(Backend& home, Shard& sh, const ShardPairs& part, int layer,
                              const MoeBlockArgs& a, int n_embd, DevPtr<float> slot_rows) {
  const size_t P = part.pairs.size();
  if (P == 0) return Status::Ok();
  const int T = a.n_tokens;
  const int k = a.n_used;
  if (sh.capacity < P) {
    FLASHKV_RETURN_IF_ERROR(Grow(*sh.be, sh.x, P * size_t(n_embd) * sizeof(float)));
    FLASHKV_RETURN_IF_ERROR(Grow(*sh.be, sh.y, P * size_t(n_embd) * sizeof(float)));
    FLASHKV_RETURN_IF_ERROR(Grow(*sh.be, sh.selected, P * sizeof(int32_t)));
    FLASHKV_RETURN_IF_ERROR(Grow(*sh.be, sh.weights, P * sizeof(float)));
    sh.capacity = P;
  }

  // Dispatch: pair i's token row of the FFN input, its local expert and route weight.
  moves_.resize(P);
  pair_w_.resize(P);
  for (size_t i = 0; i < P; ++i) {
    const int32_t p = part.pairs[i];
    moves_[i] = RowMove{p / k, int32_t(i)};
    pair_w_[i] = route_w_[size_t(p)];
  }
  FLASHKV_RETURN_IF_ERROR(
      exchange_.MoveRows(home, a.x, *sh.be, sh.x.as<float>(), size_t(n_embd), moves_));
  FLASHKV_RETURN_IF_ERROR(
      sh.be->Write(sh.selected.as<void>(), part.local_expert.data(), P * sizeof(int32_t)));
  FLASHKV_RETURN_IF_ERROR(sh.be->Write(sh.weights.as<void>(), pair_w_.data(), P * sizeof(float)));

  const std::array<Weight, 3>& w = sh.layers[size_t(layer)];
  MoeArgs m;
  m.x = sh.x.as<float>();
  m.selected = sh.selected.as<int32_t>();
  m.weights = sh.weights.as<float>();
  m.gate = &w[0];
  m.up = &w[1];
  m.down = &w[2];
  m.out = sh.y.as<float>();
  m.n_tokens = int(P);
  m.n_used = 1;
  m.clamp = a.clamp;
  m.act_quant = a.aq;
  sh.be->MoeExperts(m);

  // Combine: pair p = t·k + s lands in row s·T + t of the slot-major rows on home.
  for (size_t i = 0; i < P; ++i) {
    const int32_t p = part.pairs[i];
    moves_[i] = RowMove{int32_t(i), (p % k) * T + p / k};
  }
  return exchange_.MoveRows(*sh.be, sh.y.as<float>(), home, slot_rows, size_t(n_embd), moves_);
}

Status Model::ShardExperts(std::span<Backend* const> shards, RowExchange& exchange) {
  const GgufFile* file = file_ ? &*file_ : nullptr;
  if (shards.empty()) {
    // Back to one backend: the experts go home first if they were placed on shards only.
    for (size_t l = 0; l < weights_.layers.size(); ++l) {
      LayerWeights& w = weights_.layers[l];
      for (Weight* stack : {&w.ffn_gate_exps, &w.ffn_up_exps, &w.ffn_down_exps}) {
        if (stack->present()) continue;
        std::vector<uint8_t> unused;  // a stack that is not on home comes from the file
        auto placed =
            PlaceExpertBlock(*stack, file, backend_, 0, int(stack->ne[2]), backend_, unused);
        if (!placed.ok()) return placed.status().WithContext(fmt::format("layer {}", l));
        *stack = std::move(*placed);
      }
    }
    experts_.reset();
    return Status::Ok();
  }
  FLASHKV_ASSIGN_OR_RETURN(
      experts_, ExpertShards::Create(config_, weights_, file, backend_, shards, exchange));
  return Status::Ok();
}

Expected<std::unique_ptr<Model>> Model::LoadExpertParallel(const std::string& path, Backend& home,
                                                           std::span<Backend* const> shards,
                                                           RowExchange& exchange,
                                                           const ModelOptions* options) {
  if (shards.empty()) return InvalidArgument("{}: expert parallel needs one shard or more", path);
  FLASHKV_ASSIGN_OR_RETURN(std::unique_ptr<Model> m,
                           LoadFile(path, home, options, /*place_routed_experts=*/false));
  Status s = m->ShardExperts(shards, exchange);
  if (!s.ok()) return s.WithContext(path);
  return m;
}

Expected<std::unique_ptr<Model>> Model::LoadSharingExperts(const std::string& path, Backend& home,
                                                           const Model& other,
                                                           const ModelOptions* options) {
  if (!other.experts_) {
    return InvalidArgument("{}: the model to share experts with holds them on its own backend",
                           path);
  }
  FLASHKV_ASSIGN_OR_RETURN(std::unique_ptr<Model> m,
                           LoadFile(path, home, options, /*place_routed_experts=*/false));
  if (m->config_.n_expert != other.config_.n_expert ||
      m->config_.n_layer != other.config_.n_layer) {
    return InvalidArgument("{}: not the model whose experts it would share", path);
  }
  m->experts_ = other.experts_;
  return m;
}

Model::WeightBytes Model::PlacedBytes() const {
  WeightBytes out;
  out.home = PlacedWeightBytes(config_, weights_);
  if (experts_) {
    for (int d = 0; d < experts_->plan().n_shards(); ++d) {
      out.shards.push_back(experts_->placed_bytes(d));
    }
  }
  return out;
}

}  // namespace flashkv
