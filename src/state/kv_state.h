// KvState: the complete incremental state of one sequence (docs/DS4_MODEL.md §7), held in backend
// buffers: per layer the raw sliding-window ring, the compressed rows, the compressor
// frontier, and for ratio-4 layers the indexer rows and indexer frontier; plus the token
// count. Every count is derived from the token count, so the state is fully described by
// it and the buffers. Must not: run the model (the forward pass in model/ fills it).
//
// Layouts (all f32, values already rounded to the model's stored precision):
// - raw ring [n_swa, head_dim]: position p lives in slot p % n_swa. This mapping is the
//   only ring convention; readers that want logical order use ReadSection(kRaw).
// - compressed rows [cap, head_dim]: row w pools window w (tokens w·m … w·m+m−1).
// - compressor frontier kv/score [c·m, c·head_dim] in ds4's layout (c = 2 when the layer
//   overlaps windows): with overlap, rows 0..m−1 hold the last closed window and
//   m..2m−1 the open one; without, rows 0..m−1 are the open window. Scores include the
//   position bias; unused slots hold kv 0 / score −inf.
// - indexer rows [cap, indexer_dim] and indexer frontier [2m, 2·indexer_dim] likewise.
// The snapshot codec (snapshot/snapshot_codec.h) moves these sections through ReadLayer /
// WriteLayer without knowing physical placement.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "util/status.h"

namespace flashkv {

// What a KvState must hold, from the model shape; built by the model (state/ does not
// depend on model/).
struct KvLayerShape {
  int compress_ratio = 0;  // 0: sliding only
  bool overlap = false;    // c = 2
  bool indexer = false;
};

struct KvShape {
  int head_dim = 0;
  int n_swa = 0;
  int indexer_dim = 0;
  int ctx_size = 0;  // most tokens the state can hold
  std::vector<KvLayerShape> layers;
};

enum class KvSection {
  kRaw,              // [min(T, n_swa), head_dim], logical (oldest first) order
  kCompressed,       // [T / m, head_dim]
  kCompressorKv,     // [c·m, c·head_dim]
  kCompressorScore,  // [c·m, c·head_dim]
  kIndexerRows,      // [T / m, indexer_dim]
  kIndexerKv,        // [2m, 2·indexer_dim]
  kIndexerScore,     // [2m, 2·indexer_dim]
};

class KvState {
 public:
  // Device views of one layer's buffers, for the forward pass.
  struct Layer {
    DevPtr<float> ring;               // [n_swa, head_dim]
    DevPtr<float> comp_rows;          // [comp_cap, head_dim]
    DevPtr<float> comp_state_kv;      // [c·m, c·head_dim]
    DevPtr<float> comp_state_score;   // [c·m, c·head_dim]
    DevPtr<float> index_rows;         // [comp_cap, indexer_dim]
    DevPtr<float> index_state_kv;     // [2m, 2·indexer_dim]
    DevPtr<float> index_state_score;  // [2m, 2·indexer_dim]
    int comp_cap = 0;
  };

  // Allocates every buffer on `backend` and clears it. The backend must outlive this.
  // ResourceExhausted, before allocating, when the buffers would exceed physical memory.
  static Expected<KvState> Create(Backend& backend, const KvShape& shape);
  // Bytes Create allocates for `shape` (before the backend's rounding): what one live
  // session of that context costs in device memory.
  static uint64_t AllocatedBytes(const KvShape& shape);

  KvState(KvState&&) noexcept = default;
  // Both wait for the copies this state holds (HoldForCopy) before its buffers go.
  KvState& operator=(KvState&& other) noexcept;
  ~KvState();
  KvState(const KvState&) = delete;
  KvState& operator=(const KvState&) = delete;

  const KvShape& shape() const { return shape_; }
  Backend& backend() const { return *backend_; }
  int64_t n_tokens() const { return n_tokens_; }
  int ctx_size() const { return shape_.ctx_size; }
  const Layer& layer(int l) const { return layers_[l]; }
  // The device buffer that holds a section of a layer (the whole ring for kRaw; null where
  // the layer lacks the section).
  DevPtr<float> SectionPtr(int layer, KvSection section) const;

  // Called by the forward pass after a chunk has been written.
  void Advance(int n) { n_tokens_ += n; }
  // Forgets everything: token count 0, frontiers reset.
  Status Clear();

  // Snapshot support. Floats in a section for the current token count (0 when the layer
  // lacks it). SetTokenCount is for restoring: set it first, then write every section.
  size_t SectionFloats(int layer, KvSection section) const {
    return SectionFloatsFor(shape_, layer, section, n_tokens_);
  }
  // The same for any shape and token count (snapshot size checks without a state).
  static size_t SectionFloatsFor(const KvShape& shape, int layer, KvSection section,
                                 int64_t n_tokens);
  Status ReadSection(int layer, KvSection section, float* dst) const;
  Status WriteSection(int layer, KvSection section, const float* src);
  Status SetTokenCount(int64_t n_tokens);
  // Batched section I/O for the snapshot codec: every section of a layer back to back in
  // KvSection order, [LayerFloats(layer)] floats, one host span per layer.
  size_t LayerFloats(int layer) const;
  Status ReadLayer(int layer, float* dst) const;
  Status WriteLayer(int layer, const float* src);
  // Layer-by-layer restores of chunked snapshots (snapshot/snapshot_load.cpp): rows
  // [first_row, first_row + rows) of a layer's compressed rows (kCompressed) or indexer
  // rows (kIndexerRows) from `src`, all in one backend transfer list; and WriteLayer for a
  // layer whose first `skip_rows` compressed and indexer rows come that way, `src` in
  // ReadLayer's layout without those rows. Both check the ranges against the token count.
  struct RowWrite {
    int layer = 0;
    KvSection section = KvSection::kCompressed;
    int64_t first_row = 0;
    int64_t rows = 0;
    const float* src = nullptr;
  };
  Status WriteRows(const RowWrite* writes, size_t n);
  Status WriteLayerTail(int layer, int64_t skip_rows, const float* src);
  // ReadLayer's transfers split in two: `closed` gets the compressed and indexer rows of
  // closed windows, which later tokens never rewrite (so they may be copied while decoding
  // goes on), `rest` everything else (the window ring and the frontiers, rewritten by the
  // next token). Both fill `dst` in ReadLayer's layout.
  Status SplitLayerCopies(int layer, float* dst, std::vector<HostCopy>* rest,
                          std::vector<HostCopy>* closed) const;
  // Registers an asynchronous copy out of this state (Backend::ReadManyAsync of `closed`
  // rows): Clear, SetTokenCount, WriteSection, WriteLayer, the destructor and a move
  // assignment onto this state wait for it first, since they can rewrite those rows.
  void HoldForCopy(uint64_t ticket) const { held_.push_back(ticket); }

 private:
  KvState() = default;
  Status CheckLayer(int layer) const;
  // Appends the transfers that move one section to or from `host` in ReadSection's
  // layout (the raw ring as one or two ranges); returns the section's float count.
  size_t SectionCopies(int layer, KvSection section, float* host, std::vector<HostCopy>& out) const;
  // The transfers that move layer `layer` to or from `host` in ReadLayer's layout.
  Status LayerCopies(int layer, float* host, std::vector<HostCopy>& out) const;
  Status ResetFrontiers();

  // Waits for and forgets the held copies.
  Status WaitForCopies() const;

  Backend* backend_ = nullptr;
  mutable std::vector<uint64_t> held_;  // tickets of copies still reading the buffers
  KvShape shape_;
  int64_t n_tokens_ = 0;
  std::vector<DeviceBuffer> buffers_;
  std::vector<Layer> layers_;
};

}  // namespace flashkv
