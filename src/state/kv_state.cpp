#include "state/kv_state.h"

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

// Floats of each buffer one layer allocates (0: the layer has none).
struct LayerBuffers {
  size_t ring = 0, comp_rows = 0, comp_state = 0, index_rows = 0, index_state = 0;
  int comp_cap = 0;
};

LayerBuffers LayerBuffersFor(const KvShape& shape, const KvLayerShape& ls) {
  LayerBuffers b;
  b.ring = size_t(shape.n_swa) * shape.head_dim;
  if (ls.compress_ratio == 0) return b;
  b.comp_cap = shape.ctx_size / ls.compress_ratio + 2;
  b.comp_rows = size_t(b.comp_cap) * shape.head_dim;
  b.comp_state = FrontierFloats(ls, shape.head_dim);
  if (!ls.indexer) return b;
  b.index_rows = size_t(b.comp_cap) * shape.indexer_dim;
  b.index_state = IndexerFrontierFloats(ls, shape.indexer_dim);
  return b;
}

// What Create allocates, summed with overflow checks first: a shape from a hostile model
// file or a huge context is refused with its numbers before any buffer exists.
ByteCount StateBytes(const KvShape& shape) {
  ByteCount total;
  for (const KvLayerShape& ls : shape.layers) {
    const LayerBuffers b = LayerBuffersFor(shape, ls);
    total.Add(b.ring + b.comp_rows + b.index_rows, sizeof(float));
    total.Add(2, b.comp_state + b.index_state, sizeof(float));
  }
  return total;
}

}  // namespace

uint64_t KvState::AllocatedBytes(const KvShape& shape) {
  return StateBytes(shape).bytes();
}

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
    const LayerBuffers b = LayerBuffersFor(shape, ls);
    Layer& L = s.layers_[l];
    FLASHKV_ASSIGN_OR_RETURN(L.ring, alloc(b.ring));
    if (ls.compress_ratio == 0) continue;
    L.comp_cap = b.comp_cap;
    FLASHKV_ASSIGN_OR_RETURN(L.comp_rows, alloc(b.comp_rows));
    FLASHKV_ASSIGN_OR_RETURN(L.comp_state_kv, alloc(b.comp_state));
    FLASHKV_ASSIGN_OR_RETURN(L.comp_state_score, alloc(b.comp_state));
    if (!ls.indexer) continue;
    FLASHKV_ASSIGN_OR_RETURN(L.index_rows, alloc(b.index_rows));
    FLASHKV_ASSIGN_OR_RETURN(L.index_state_kv, alloc(b.index_state));
    FLASHKV_ASSIGN_OR_RETURN(L.index_state_score, alloc(b.index_state));
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

KvState& KvState::operator=(KvState&& other) noexcept {
  if (this != &other) {
    (void)WaitForCopies();
    backend_ = other.backend_;
    held_ = std::move(other.held_);
    other.held_.clear();
    shape_ = std::move(other.shape_);
    n_tokens_ = other.n_tokens_;
    buffers_ = std::move(other.buffers_);
    layers_ = std::move(other.layers_);
  }
  return *this;
}

KvState::~KvState() {
  (void)WaitForCopies();
}

Status KvState::WaitForCopies() const {
  Status first;
  for (uint64_t t : held_) {
    Status st = backend_->WaitCopies(t);
    if (first.ok() && !st.ok()) first = st;
  }
  held_.clear();
  return first;
}

Status KvState::Clear() {
  FLASHKV_RETURN_IF_ERROR(WaitForCopies());
  n_tokens_ = 0;
  return ResetFrontiers();
}

Status KvState::SetTokenCount(int64_t n_tokens) {
  FLASHKV_RETURN_IF_ERROR(WaitForCopies());
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
  FLASHKV_RETURN_IF_ERROR(WaitForCopies());
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
  FLASHKV_RETURN_IF_ERROR(WaitForCopies());
  std::vector<HostCopy> copies;
  FLASHKV_RETURN_IF_ERROR(LayerCopies(layer, const_cast<float*>(src), copies));
  return backend_->WriteMany(copies.data(), copies.size());
}

Status KvState::WriteRows(const RowWrite* writes, size_t n) {
  FLASHKV_RETURN_IF_ERROR(WaitForCopies());
  std::vector<HostCopy> copies;
  copies.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const RowWrite& w = writes[i];
    FLASHKV_RETURN_IF_ERROR(CheckLayer(w.layer));
    if (w.section != KvSection::kCompressed && w.section != KvSection::kIndexerRows) {
      return InvalidArgument("row writes go to compressed or indexer rows only");
    }
    const int64_t row = w.section == KvSection::kCompressed ? shape_.head_dim : shape_.indexer_dim;
    const int64_t have = row > 0 ? int64_t(SectionFloats(w.layer, w.section)) / row : 0;
    if (w.rows == 0) continue;
    if (w.first_row < 0 || w.rows < 0 || w.first_row + w.rows > have) {
      return OutOfRange("layer {} rows [{}, {}) outside the {} it holds", w.layer, w.first_row,
                        w.first_row + w.rows, have);
    }
    copies.push_back({DevPtr<void>((SectionPtr(w.layer, w.section) + w.first_row * row).get()),
                      const_cast<float*>(w.src), size_t(w.rows * row) * sizeof(float)});
  }
  return backend_->WriteMany(copies.data(), copies.size());
}

Status KvState::WriteLayerTail(int layer, int64_t skip_rows, const float* src) {
  FLASHKV_RETURN_IF_ERROR(CheckLayer(layer));
  FLASHKV_RETURN_IF_ERROR(WaitForCopies());
  std::vector<HostCopy> copies;
  float* host = const_cast<float*>(src);
  for (KvSection s : kAllSections) {
    if (s != KvSection::kCompressed && s != KvSection::kIndexerRows) {
      host += SectionCopies(layer, s, host, copies);
      continue;
    }
    const size_t n = SectionFloats(layer, s);
    const size_t row = size_t(s == KvSection::kCompressed ? shape_.head_dim : shape_.indexer_dim);
    const size_t skip = size_t(skip_rows) * row;
    if (n == 0) continue;
    if (skip_rows < 0 || skip > n) {
      return OutOfRange("layer {}: {} rows skipped of {}", layer, skip_rows, n / row);
    }
    if (n == skip) continue;
    copies.push_back({DevPtr<void>((SectionPtr(layer, s) + int64_t(skip)).get()), host,
                      (n - skip) * sizeof(float)});
    host += n - skip;
  }
  return backend_->WriteMany(copies.data(), copies.size());
}

Status KvState::SplitLayerCopies(int layer, float* dst, std::vector<HostCopy>* rest,
                                 std::vector<HostCopy>* closed) const {
  FLASHKV_RETURN_IF_ERROR(CheckLayer(layer));
  for (KvSection s : kAllSections) {
    const bool is_closed = s == KvSection::kCompressed || s == KvSection::kIndexerRows;
    dst += SectionCopies(layer, s, dst, is_closed ? *closed : *rest);
  }
  return Status::Ok();
}

}  // namespace flashkv
