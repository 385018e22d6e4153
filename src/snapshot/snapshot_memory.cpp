#include "snapshot/snapshot_memory.h"

#include <cstring>
#include <string_view>

#include "util/crc32c.h"

namespace flashkv {
namespace {

std::string_view SectionBytes(const SnapshotImage& image, const SnapshotSection& s) {
  return {reinterpret_cast<const char*>(image.data() + s.offset), size_t(s.bytes)};
}

Expected<RestoredSnapshot> RestoreInto(const SnapshotImage& image, const SnapshotIdentity& identity,
                                       KvState& state) {
  const SnapshotHeader& h = image.header();
  const SnapshotSection* table = h.Find(SnapshotSectionKind::kLayerTable);
  const SnapshotSection* logits = h.Find(SnapshotSectionKind::kLogits);
  if (table == nullptr || logits == nullptr) {
    return Corrupt("snapshot image lacks its layer table or logits section");
  }
  // Identity and shape first: another model's image never reaches the state.
  FLASHKV_RETURN_IF_ERROR(
      CheckSnapshotCompatible(h, SectionBytes(image, *table), identity, state.shape()));
  if (image.sealed()) {
    for (const SnapshotSection& s : h.sections) {
      if (Crc32c(0, image.data() + s.offset, s.bytes) != s.crc32c) {
        return Corrupt("snapshot image section {} (kind {}, tag {}) checksum mismatch",
                       &s - h.sections.data(), uint32_t(s.kind), s.tag);
      }
    }
  }

  RestoredSnapshot out;
  out.logits.resize(h.n_vocab);
  std::memcpy(out.logits.data(), image.data() + logits->offset, size_t(h.n_vocab) * sizeof(float));
  FLASHKV_RETURN_IF_ERROR(state.SetTokenCount(h.n_tokens));
  for (const SnapshotSection& s : h.sections) {
    if (s.kind != SnapshotSectionKind::kLayer) continue;
    const int layer = int(s.tag);
    if (state.LayerFloats(layer) * sizeof(float) != s.bytes) {
      return Corrupt("snapshot image layer {} has {} bytes, the state expects {}", layer, s.bytes,
                     state.LayerFloats(layer) * sizeof(float));
    }
    // Sections are 64-byte aligned in a page-aligned image, so the floats are aligned.
    Status st = state.WriteLayer(layer, reinterpret_cast<const float*>(image.data() + s.offset));
    if (!st.ok()) return st.WithContext(fmt::format("restoring layer {}", layer));
    out.layer_bytes += s.bytes;
  }
  return out;
}

}  // namespace

Expected<RestoredSnapshot> RestoreSnapshotImage(const SnapshotImage& image,
                                                const SnapshotIdentity& identity, KvState& state) {
  auto restored = RestoreInto(image, identity, state);
  if (!restored.ok()) (void)state.Clear();
  return restored;
}

}  // namespace flashkv
