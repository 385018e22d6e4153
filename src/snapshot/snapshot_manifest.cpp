// Version-2 manifests with chunks (docs/KV_FORMAT.md "Version 2"): the whole-state
// container whose layer sections leave out the rows its chunks hold, with the chunk list as
// the first extension. Built from a captured whole-state image (itself a manifest without
// chunks), so the capture path (and its asynchronous copies) is the same for every save.
#include <cstring>

#include "snapshot/snapshot_chunks.h"
#include "snapshot/snapshot_codec.h"
#include "snapshot/snapshot_codec_internal.h"
#include "util/crc32c.h"

namespace flashkv {

using namespace snapshot_detail;

namespace snapshot_detail {

std::vector<std::pair<uint64_t, uint64_t>> ManifestLayerRanges(const KvShape& shape, int layer,
                                                               int64_t n_tokens, int64_t chunked,
                                                               uint64_t layer_bytes) {
  const LayerRowSpans r = RowSpansOf(shape, layer, n_tokens);
  const uint64_t rows = ChunkedRows(r.ratio, chunked);
  if (rows == 0) return {{0, layer_bytes}};
  // [raw][compressed rows][frontiers][indexer rows][indexer frontiers]: the first `rows`
  // compressed and indexer rows are the chunks'.
  const uint64_t comp_a = r.comp_offset * 4, comp_b = comp_a + rows * r.comp_row * 4;
  if (r.index_row == 0) return {{0, comp_a}, {comp_b, layer_bytes}};
  const uint64_t idx_a = r.index_offset * 4, idx_b = idx_a + rows * r.index_row * 4;
  return {{0, comp_a}, {comp_b, idx_a}, {idx_b, layer_bytes}};
}

}  // namespace snapshot_detail

uint64_t ManifestFileBytes(const KvShape& shape, int64_t n_tokens, int64_t n_vocab,
                           size_t text_bytes, std::span<const SnapshotExtension> extensions,
                           uint32_t chunk_tokens) {
  const uint32_t n_chunks = ChunkCount(n_tokens, chunk_tokens);
  std::vector<SnapshotExtension> all;
  if (n_chunks > 0) {
    all.push_back({kSnapshotChunksTag, std::string(size_t(n_chunks) * kChunkRefBytes, '\0')});
  }
  all.insert(all.end(), extensions.begin(), extensions.end());
  std::vector<SnapshotSection> sections;
  return AssignOffsets(
      PlanSections(shape, n_tokens, n_vocab, text_bytes, all, int64_t(n_chunks) * chunk_tokens),
      &sections);
}

Expected<SnapshotImage> MakeManifestImage(const SnapshotImage& full, uint32_t chunk_tokens,
                                          std::span<const SnapshotChunkRef> refs) {
  const SnapshotHeader& fh = full.header();
  if (fh.n_chunks != 0) return Internal("a manifest is made from a whole-state image");
  const SnapshotSection* table = fh.Find(SnapshotSectionKind::kLayerTable);
  if (table == nullptr) return Internal("image without a layer table");
  const std::string_view table_bytes(reinterpret_cast<const char*>(full.data()) + table->offset,
                                     table->bytes);
  FLASHKV_ASSIGN_OR_RETURN(KvShape shape, ShapeOf(fh, table_bytes));
  FLASHKV_RETURN_IF_ERROR(CheckChunkTokens(shape, chunk_tokens));
  const uint32_t n_chunks = ChunkCount(fh.n_tokens, chunk_tokens);
  if (refs.size() != n_chunks) {
    return Internal("{} chunk refs for a snapshot of {} chunks", refs.size(), n_chunks);
  }
  const int64_t chunked = int64_t(n_chunks) * chunk_tokens;

  // The full image's extensions (kv's own and the writer's), after the chunk list.
  std::vector<SnapshotExtension> extensions;
  if (n_chunks > 0) extensions.push_back({kSnapshotChunksTag, EncodeChunkRefs(refs)});
  for (const SnapshotSection& s : fh.sections) {
    if (s.kind != SnapshotSectionKind::kExtension) continue;
    extensions.push_back(
        {s.tag, std::string(reinterpret_cast<const char*>(full.data()) + s.offset, s.bytes)});
  }
  if (extensions.size() > kMaxExtensions) {
    return InvalidArgument("at most {} extensions with the chunk list, got {}", kMaxExtensions,
                           extensions.size());
  }
  const SnapshotSection* text = fh.Find(SnapshotSectionKind::kText);
  SnapshotImage img;
  SnapshotHeader& h = img.header_;
  h = fh;
  h.version = kSnapshotVersion;
  h.chunk_tokens = n_chunks > 0 ? chunk_tokens : 0;
  h.n_chunks = n_chunks;
  h.flags = extensions.empty() ? 0 : kSnapshotFlagHasExtensions;
  h.file_bytes = AssignOffsets(
      PlanSections(shape, fh.n_tokens, fh.n_vocab, text->bytes, extensions, chunked), &h.sections);
  img.size_ = h.file_bytes;
  img.capacity_ = img.size_;
  img.bytes_.reset(AllocHostBytes(img.size_));
  if (!img.bytes_) return ResourceExhausted("cannot allocate {} bytes for a manifest", img.size_);
  uint8_t* base = img.bytes_.get();
  std::memset(base, 0, img.size_);
  size_t ext = 0;
  for (const SnapshotSection& s : h.sections) {
    uint8_t* dst = base + s.offset;
    if (s.kind == SnapshotSectionKind::kExtension) {
      std::memcpy(dst, extensions[ext++].bytes.data(), s.bytes);
      continue;
    }
    const SnapshotSection* src = fh.Find(s.kind, s.tag);
    if (src == nullptr) return Internal("{} missing from the image", SectionName(s));
    if (s.kind != SnapshotSectionKind::kLayer) {
      std::memcpy(dst, full.data() + src->offset, s.bytes);
      continue;
    }
    uint64_t out = 0;
    for (const auto& [a, b] :
         ManifestLayerRanges(shape, int(s.tag), fh.n_tokens, chunked, src->bytes)) {
      std::memcpy(dst + out, full.data() + src->offset + a, b - a);
      out += b - a;
    }
    if (out != s.bytes) {
      return Internal("layer {} manifest section: {} bytes copied, {} planned", s.tag, out,
                      s.bytes);
    }
  }
  for (SnapshotSection& s : h.sections) s.crc32c = Crc32c(0, base + s.offset, s.bytes);
  EncodeHeaderAndTable(h, base);
  img.key_ = full.key();
  img.sealed_ = true;
  return img;
}

Expected<ChunkedSnapshot> WriteChunkedSnapshot(const SnapshotImage& full, uint32_t chunk_tokens,
                                               const ChunkSink& sink) {
  FLASHKV_ASSIGN_OR_RETURN(std::vector<SnapshotChunkRef> refs,
                           WriteImageChunks(full, chunk_tokens, sink));
  // The manifest is cut from the whole captured state.
  if (sink.ready) FLASHKV_RETURN_IF_ERROR(sink.ready(UINT64_MAX));
  FLASHKV_ASSIGN_OR_RETURN(SnapshotImage manifest, MakeManifestImage(full, chunk_tokens, refs));
  return ChunkedSnapshot{std::move(refs), std::move(manifest)};
}

}  // namespace flashkv
