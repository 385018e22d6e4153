#include "state/kv_checkpoint.h"

#include <algorithm>

namespace flashkv {

namespace {

// The sections a forward rewrites in place whatever the token count (LayerCopy::frontiers).
constexpr KvSection kFrontierSections[4] = {KvSection::kCompressorKv, KvSection::kCompressorScore,
                                            KvSection::kIndexerKv, KvSection::kIndexerScore};

size_t Frontier(const KvShape& shape, int layer, KvSection section) {
  // The frontier sections' sizes do not depend on the token count.
  return KvState::SectionFloatsFor(shape, layer, section, 0);
}

}  // namespace

uint64_t KvCheckpoint::BytesFor(const KvShape& shape, int max_tokens) {
  uint64_t floats = 0;
  for (int l = 0; l < int(shape.layers.size()); ++l) {
    floats += uint64_t(max_tokens) * uint64_t(shape.head_dim);
    for (KvSection s : kFrontierSections) floats += Frontier(shape, l, s);
  }
  return floats * sizeof(float);
}

Expected<KvCheckpoint> KvCheckpoint::Create(Backend& backend, const KvShape& shape,
                                            int max_tokens) {
  if (max_tokens < 1 || max_tokens > shape.n_swa) {
    return InvalidArgument("a kv checkpoint covers 1 … {} tokens (the window), not {}", shape.n_swa,
                           max_tokens);
  }
  KvCheckpoint c;
  c.backend_ = &backend;
  c.shape_ = shape;
  c.max_tokens_ = max_tokens;
  auto alloc = [&](size_t floats) -> Expected<DevPtr<float>> {
    if (floats == 0) return DevPtr<float>();
    auto buf = backend.Alloc(floats * sizeof(float));
    if (!buf.ok()) return buf.status().WithContext("allocating a kv checkpoint");
    DevPtr<float> p = buf->as<float>();
    c.buffers_.push_back(std::move(*buf));
    return p;
  };
  c.layers_.resize(shape.layers.size());
  for (int l = 0; l < int(shape.layers.size()); ++l) {
    LayerCopy& L = c.layers_[size_t(l)];
    FLASHKV_ASSIGN_OR_RETURN(L.ring, alloc(size_t(max_tokens) * size_t(shape.head_dim)));
    for (int i = 0; i < 4; ++i) {
      FLASHKV_ASSIGN_OR_RETURN(L.frontiers[i], alloc(Frontier(shape, l, kFrontierSections[i])));
    }
  }
  return c;
}

std::vector<std::pair<int, int>> KvCheckpoint::RingRanges(int64_t n) const {
  const int first = int(n % shape_.n_swa);
  const int head = std::min(max_tokens_, shape_.n_swa - first);
  std::vector<std::pair<int, int>> r{{first, head}};
  if (head < max_tokens_) r.emplace_back(0, max_tokens_ - head);
  return r;
}

void KvCheckpoint::CopyAll(const KvState& state, bool to_state) const {
  const size_t dim = size_t(shape_.head_dim);
  auto copy = [&](DevPtr<float> live, DevPtr<float> aside, size_t floats) {
    if (floats == 0) return;
    if (to_state) {
      backend_->Copy(aside, live, floats);
    } else {
      backend_->Copy(live, aside, floats);
    }
  };
  for (int l = 0; l < int(shape_.layers.size()); ++l) {
    const LayerCopy& C = layers_[size_t(l)];
    size_t at = 0;  // slots copied so far, in position order
    for (const auto& [slot, count] : RingRanges(n_tokens_)) {
      copy(state.SectionPtr(l, KvSection::kRaw) + size_t(slot) * dim, C.ring + at * dim,
           size_t(count) * dim);
      at += size_t(count);
    }
    for (int i = 0; i < 4; ++i) {
      const KvSection s = kFrontierSections[i];
      copy(state.SectionPtr(l, s), C.frontiers[i], Frontier(shape_, l, s));
    }
  }
}

namespace {

bool SameShape(const KvShape& a, const KvShape& b) {
  if (a.head_dim != b.head_dim || a.n_swa != b.n_swa || a.indexer_dim != b.indexer_dim ||
      a.layers.size() != b.layers.size()) {
    return false;
  }
  for (size_t l = 0; l < a.layers.size(); ++l) {
    const KvLayerShape &x = a.layers[l], &y = b.layers[l];
    if (x.compress_ratio != y.compress_ratio || x.overlap != y.overlap || x.indexer != y.indexer) {
      return false;
    }
  }
  return true;
}

}  // namespace

Status KvCheckpoint::Capture(const KvState& state) {
  if (!SameShape(state.shape(), shape_)) {
    return FailedPrecondition("kv checkpoint: the state's shape is not the checkpoint's");
  }
  n_tokens_ = state.n_tokens();
  CopyAll(state, /*to_state=*/false);
  return Status::Ok();
}

Status KvCheckpoint::Restore(KvState& state) const {
  if (!captured()) return FailedPrecondition("kv checkpoint: nothing captured");
  if (!SameShape(state.shape(), shape_)) {
    return FailedPrecondition("kv checkpoint: the state's shape is not the checkpoint's");
  }
  if (state.n_tokens() < n_tokens_ || state.n_tokens() > n_tokens_ + max_tokens_) {
    return FailedPrecondition(
        "kv checkpoint of {} tokens (covering {} more) cannot restore a state of {} tokens",
        n_tokens_, max_tokens_, state.n_tokens());
  }
  FLASHKV_RETURN_IF_ERROR(state.SetTokenCount(n_tokens_));
  CopyAll(state, /*to_state=*/true);
  return Status::Ok();
}

}  // namespace flashkv
