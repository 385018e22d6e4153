// Internals of the snapshot codec shared by its files (snapshot_codec.cpp: layout,
// encode, header parsing; snapshot_load.cpp: streamed loads and verification;
// snapshot_manifest.cpp: version-2 manifests). Must not: be included outside snapshot/.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "snapshot/snapshot_codec.h"
#include "snapshot/snapshot_format.h"
#include "state/kv_state.h"
#include "util/status.h"

namespace flashkv::snapshot_detail {

// Fixed header field offsets (docs/KV_FORMAT.md).
inline constexpr size_t kOffMagic = 0;
inline constexpr size_t kOffVersion = 8;
inline constexpr size_t kOffHeaderBytes = 12;
inline constexpr size_t kOffModel = 16;
inline constexpr size_t kOffNumerics = 36;
inline constexpr size_t kNumericsBytes = 16;
inline constexpr size_t kOffNLayer = 52;
inline constexpr size_t kOffHeadDim = 56;
inline constexpr size_t kOffNSwa = 60;
inline constexpr size_t kOffIndexerDim = 64;
inline constexpr size_t kOffNVocab = 68;
inline constexpr size_t kOffNTokens = 72;
inline constexpr size_t kOffCtx = 76;
inline constexpr size_t kOffReason = 80;
inline constexpr size_t kOffFlags = 84;
inline constexpr size_t kOffCreated = 88;
inline constexpr size_t kOffSectionCount = 96;
inline constexpr size_t kOffTableCrc = 100;
inline constexpr size_t kOffFileBytes = 104;
inline constexpr size_t kOffChunkTokens = 112;  // version 2
inline constexpr size_t kOffChunkCount = 116;   // version 2
inline constexpr size_t kOffHeaderCrc = 220;
inline constexpr size_t kOffStatsLastUsed = kSnapshotStatsOffset;  // 224
inline constexpr size_t kOffStatsHits = kSnapshotStatsOffset + 8;  // 232
inline constexpr size_t kOffStatsCrc = kSnapshotStatsOffset + 28;  // 252
static_assert(kOffStatsCrc + 4 == kSnapshotHeaderBytes);

// Sanity limits that keep a hostile header from asking for absurd allocations.
inline constexpr uint32_t kMaxLayers = 4096;
inline constexpr uint32_t kMaxExtensions = 64;
inline constexpr uint64_t kMaxTextBytes = uint64_t(1) << 30;
inline constexpr uint64_t kMaxExtensionBytes = uint64_t(1) << 30;
inline constexpr uint32_t kMaxVocab = 1u << 24;
inline constexpr uint32_t kLayerTableRowBytes = 8;

template <typename T>
void Put(uint8_t* base, size_t off, T v) {
  std::memcpy(base + off, &v, sizeof(T));
}
template <typename T>
T Get(const uint8_t* base, size_t off) {
  T v;
  std::memcpy(&v, base + off, sizeof(T));
  return v;
}

inline uint64_t AlignUp(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

// Byte size of each section of a snapshot, in file order.
struct SectionPlan {
  SnapshotSectionKind kind;
  uint32_t tag;
  uint64_t bytes;
};

// Bytes of layer `layer`'s section for `n_tokens`, without the compressed and indexer
// rows of the first `chunked_tokens` tokens (version 2: those are in chunk files).
uint64_t LayerBytes(const KvShape& shape, int layer, int64_t n_tokens, int64_t chunked_tokens = 0);
// Rows of a compressor of ratio `ratio` whose windows lie in the first `tokens` tokens.
inline uint64_t ChunkedRows(int ratio, int64_t tokens) {
  return ratio > 0 ? uint64_t(tokens / ratio) : 0;
}
std::vector<SectionPlan> PlanSections(const KvShape& shape, int64_t n_tokens, int64_t n_vocab,
                                      size_t text_bytes,
                                      std::span<const SnapshotExtension> extensions,
                                      int64_t chunked_tokens = 0);
// Assigns offsets: table right after the header, sections 64-byte aligned after it;
// returns the file size.
uint64_t AssignOffsets(const std::vector<SectionPlan>& plan, std::vector<SnapshotSection>* out);
const char* KindName(SnapshotSectionKind k);
std::string SectionName(const SnapshotSection& s);
std::string LayerKind(const KvLayerShape& l);
// The KvShape a header + layer table describe (ctx = its token count).
Expected<KvShape> ShapeOf(const SnapshotHeader& h, std::string_view layer_table);
// Checks every layer section has the size the layer table (and chunking) implies.
Status CheckLayerSizes(const SnapshotHeader& h, const KvShape& shape);
// The byte ranges of a whole layer (ReadLayer layout, `layer_bytes` long) that a manifest
// with `chunked` tokens in chunks keeps in its layer section, in order.
std::vector<std::pair<uint64_t, uint64_t>> ManifestLayerRanges(const KvShape& shape, int layer,
                                                               int64_t n_tokens, int64_t chunked,
                                                               uint64_t layer_bytes);
// Host buffers of snapshot size (2 MiB aligned, transparent huge pages); free with free().
uint8_t* AllocHostBytes(uint64_t n);
// Writes the header and the section table (with the sections' CRCs as set in `h`) into
// the first bytes of an image.
void EncodeHeaderAndTable(const SnapshotHeader& h, uint8_t* base);

struct AlignedBuffer {
  uint8_t* p = nullptr;
  explicit AlignedBuffer(size_t n) { p = AllocHostBytes(n); }
  ~AlignedBuffer() { std::free(p); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
};

}  // namespace flashkv::snapshot_detail
