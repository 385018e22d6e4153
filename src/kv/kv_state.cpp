#include "kv/kv_state.h"

#include <algorithm>
#include <limits>

#include "util/memory_budget.h"

namespace flashkv {
namespace {

int Coff(const KvLayerShape& l) {
  return l.overlap ? 2 : 1;
}

size_t FrontierFloats(const KvLayerShape& l, int dim) {
  const size_t c = Coff(l);
  return c * l.compress_ratio * c * dim;
}

size_t IndexerFrontierFloats(const KvLayerShape& l, int dim) {
  return size_t(2) * l.compress_ratio * 2 * dim;
}

// What Create allocates, summed first: a shape from a hostile model file or a huge context
// is refused with its numbers before any buffer exists.
ByteCount StateBytes(const KvShape& shape) {
  ByteCount total;
  for (const KvLayerShape& ls : shape.layers) {
    total.Add(uint64_t(shape.n_swa), uint64_t(shape.head_dim), sizeof(float));
    if (ls.compress_ratio == 0) continue;
    const uint64_t cap = uint64_t(shape.ctx_size / ls.compress_ratio + 2);
    total.Add(cap, uint64_t(shape.head_dim), sizeof(float));
    total.Add(2, FrontierFloats(ls, shape.head_dim), sizeof(float));
    if (!ls.indexer) continue;
    total.Add(cap, uint64_t(shape.indexer_dim), sizeof(float));
    total.Add(2, IndexerFrontierFloats(ls, shape.indexer_dim), sizeof(float));
  }
  return total;
}

}  // namespace

Expected<KvState> KvState::Create(Backend& backend, const KvShape& shape) {
  if (shape.head_dim <= 0 || shape.n_swa <= 0 || shape.ctx_size <= 0) {
    return InvalidArgument("kv state shape has a non-positive size");
  }
  for (const KvLayerShape& ls : shape.layers) {
    if (ls.compress_ratio < 0) return InvalidArgument("kv state shape has a negative ratio");
  }
  FLASHKV_RETURN_IF_ERROR(CheckFitsInMemory(
      fmt::format("a KV state of {} tokens ({} layers, window {} × {} floats)", shape.ctx_size,
                  shape.layers.size(), shape.n_swa, shape.head_dim),
      StateBytes(shape)));
  KvState s;
  s.backend_ = &backend;
  s.shape_ = shape;
  s.layers_.resize(shape.layers.size());
  auto alloc = [&](size_t floats) -> Expected<DevPtr<float>> {
    auto buf = backend.Alloc(std::max<size_t>(floats, 1) * sizeof(float));
    if (!buf.ok()) return buf.status().WithContext("allocating kv state");
    DevPtr<float> p = buf->as<float>();
    s.buffers_.push_back(std::move(*buf));
    return p;
  };
  for (size_t l = 0; l < shape.layers.size(); ++l) {
    const KvLayerShape& ls = shape.layers[l];
    Layer& L = s.layers_[l];
    FLASHKV_ASSIGN_OR_RETURN(L.ring, alloc(size_t(shape.n_swa) * shape.head_dim));
    if (ls.compress_ratio == 0) continue;
    L.comp_cap = shape.ctx_size / ls.compress_ratio + 2;
    FLASHKV_ASSIGN_OR_RETURN(L.comp_rows, alloc(size_t(L.comp_cap) * shape.head_dim));
    FLASHKV_ASSIGN_OR_RETURN(L.comp_state_kv, alloc(FrontierFloats(ls, shape.head_dim)));
    FLASHKV_ASSIGN_OR_RETURN(L.comp_state_score, alloc(FrontierFloats(ls, shape.head_dim)));
    if (!ls.indexer) continue;
    FLASHKV_ASSIGN_OR_RETURN(L.index_rows, alloc(size_t(L.comp_cap) * shape.indexer_dim));
    FLASHKV_ASSIGN_OR_RETURN(L.index_state_kv, alloc(IndexerFrontierFloats(ls, shape.indexer_dim)));
    FLASHKV_ASSIGN_OR_RETURN(L.index_state_score,
                             alloc(IndexerFrontierFloats(ls, shape.indexer_dim)));
  }
  FLASHKV_RETURN_IF_ERROR(s.ResetFrontiers());
  return s;
}

Status KvState::ResetFrontiers() {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (size_t l = 0; l < layers_.size(); ++l) {
    const KvLayerShape& ls = shape_.layers[l];
    if (ls.compress_ratio == 0) continue;
    const Layer& L = layers_[l];
    const size_t n = FrontierFloats(ls, shape_.head_dim);
    backend_->Fill(L.comp_state_kv, 0.0f, n);
    backend_->Fill(L.comp_state_score, neg_inf, n);
    if (!ls.indexer) continue;
    const size_t ni = IndexerFrontierFloats(ls, shape_.indexer_dim);
    backend_->Fill(L.index_state_kv, 0.0f, ni);
    backend_->Fill(L.index_state_score, neg_inf, ni);
  }
  return backend_->Synchronize();
}

Status KvState::Clear() {
  n_tokens_ = 0;
  return ResetFrontiers();
}

Status KvState::SetTokenCount(int64_t n_tokens) {
  if (n_tokens < 0 || n_tokens > shape_.ctx_size) {
    return OutOfRange("token count {} is outside this state's context of {}", n_tokens,
                      shape_.ctx_size);
  }
  n_tokens_ = n_tokens;
  return Status::Ok();
}

size_t KvState::SectionFloatsFor(const KvShape& shape, int layer, KvSection section,
                                 int64_t n_tokens) {
  const KvLayerShape& ls = shape.layers[layer];
  const int m = ls.compress_ratio;
  switch (section) {
    case KvSection::kRaw:
      return size_t(std::min<int64_t>(n_tokens, shape.n_swa)) * shape.head_dim;
    case KvSection::kCompressed:
      return m == 0 ? 0 : size_t(n_tokens / m) * shape.head_dim;
    case KvSection::kCompressorKv:
    case KvSection::kCompressorScore:
      return m == 0 ? 0 : FrontierFloats(ls, shape.head_dim);
    case KvSection::kIndexerRows:
      return ls.indexer ? size_t(n_tokens / m) * shape.indexer_dim : 0;
    case KvSection::kIndexerKv:
    case KvSection::kIndexerScore:
      return ls.indexer ? IndexerFrontierFloats(ls, shape.indexer_dim) : 0;
  }
  return 0;
}

DevPtr<float> KvState::SectionPtr(int layer, KvSection section) const {
  const Layer& L = layers_[layer];
  switch (section) {
    case KvSection::kRaw:
      return L.ring;
    case KvSection::kCompressed:
      return L.comp_rows;
    case KvSection::kCompressorKv:
      return L.comp_state_kv;
    case KvSection::kCompressorScore:
      return L.comp_state_score;
    case KvSection::kIndexerRows:
      return L.index_rows;
    case KvSection::kIndexerKv:
      return L.index_state_kv;
    case KvSection::kIndexerScore:
      return L.index_state_score;
  }
  return {};
}

Status KvState::CheckLayer(int layer) const {
  if (layer < 0 || layer >= static_cast<int>(layers_.size())) {
    return OutOfRange("kv layer {} outside 0..{}", layer, layers_.size() - 1);
  }
  return Status::Ok();
}

// The raw ring in logical order is at most two contiguous slot ranges: the oldest live
// position's slot to the end, then the start of the ring. Every other section is one range.
size_t KvState::SectionCopies(int layer, KvSection section, float* host,
                              std::vector<HostCopy>& out) const {
  const size_t n = SectionFloats(layer, section);
  if (n == 0) return 0;
  if (section != KvSection::kRaw) {
    out.push_back({DevPtr<void>(SectionPtr(layer, section).get()), host, n * sizeof(float)});
    return n;
  }
  const int64_t live = std::min<int64_t>(n_tokens_, shape_.n_swa);
  const int64_t slot0 = (n_tokens_ - live) % shape_.n_swa;
  const int64_t head = std::min<int64_t>(live, shape_.n_swa - slot0);
  const size_t row = shape_.head_dim;
  out.push_back(
      {DevPtr<void>((layers_[layer].ring + slot0 * row).get()), host, head * row * sizeof(float)});
  if (live > head) {
    out.push_back({DevPtr<void>(layers_[layer].ring.get()), host + head * row,
                   (live - head) * row * sizeof(float)});
  }
  return n;
}

Status KvState::ReadSection(int layer, KvSection section, float* dst) const {
  FLASHKV_RETURN_IF_ERROR(CheckLayer(layer));
  std::vector<HostCopy> copies;
  SectionCopies(layer, section, dst, copies);
  for (const HostCopy& c : copies) {
    FLASHKV_RETURN_IF_ERROR(backend_->Read(c.device, c.host, c.bytes));
  }
  return Status::Ok();
}

Status KvState::WriteSection(int layer, KvSection section, const float* src) {
  FLASHKV_RETURN_IF_ERROR(CheckLayer(layer));
  std::vector<HostCopy> copies;
  SectionCopies(layer, section, const_cast<float*>(src), copies);
  for (const HostCopy& c : copies) {
    FLASHKV_RETURN_IF_ERROR(backend_->Write(c.device, c.host, c.bytes));
  }
  return Status::Ok();
}

namespace {
constexpr KvSection kAllSections[] = {KvSection::kRaw,          KvSection::kCompressed,
                                      KvSection::kCompressorKv, KvSection::kCompressorScore,
                                      KvSection::kIndexerRows,  KvSection::kIndexerKv,
                                      KvSection::kIndexerScore};
}  // namespace

size_t KvState::LayerFloats(int layer) const {
  size_t n = 0;
  for (KvSection s : kAllSections) n += SectionFloats(layer, s);
  return n;
}

// A layer's sections in ReadSection's order and layout, as one list of transfers, so a GPU
// backend moves the whole layer in one pipelined pass (pinned staging, one wait).
Status KvState::LayerCopies(int layer, float* host, std::vector<HostCopy>& out) const {
  FLASHKV_RETURN_IF_ERROR(CheckLayer(layer));
  out.clear();
  for (KvSection s : kAllSections) host += SectionCopies(layer, s, host, out);
  return Status::Ok();
}

Status KvState::ReadLayer(int layer, float* dst) const {
  std::vector<HostCopy> copies;
  FLASHKV_RETURN_IF_ERROR(LayerCopies(layer, dst, copies));
  return backend_->ReadMany(copies.data(), copies.size());
}

Status KvState::WriteLayer(int layer, const float* src) {
  std::vector<HostCopy> copies;
  FLASHKV_RETURN_IF_ERROR(LayerCopies(layer, const_cast<float*>(src), copies));
  return backend_->WriteMany(copies.data(), copies.size());
}

}  // namespace flashkv
