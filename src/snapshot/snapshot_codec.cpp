#include "snapshot/snapshot_codec.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <algorithm>
#include <bit>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

#include "snapshot/snapshot_codec_internal.h"
#include "util/crc32c.h"
#include "util/file_io_writer.h"

namespace flashkv {

static_assert(std::endian::native == std::endian::little,
              "the snapshot format is little-endian; big-endian hosts need byte swaps");

namespace snapshot_detail {

uint64_t LayerBytes(const KvShape& shape, int layer, int64_t n_tokens, int64_t chunked_tokens) {
  size_t floats = 0;
  for (KvSection s : {KvSection::kRaw, KvSection::kCompressed, KvSection::kCompressorKv,
                      KvSection::kCompressorScore, KvSection::kIndexerRows, KvSection::kIndexerKv,
                      KvSection::kIndexerScore}) {
    floats += KvState::SectionFloatsFor(shape, layer, s, n_tokens);
  }
  const KvLayerShape& ls = shape.layers[size_t(layer)];
  const uint64_t rows = ChunkedRows(ls.compress_ratio, chunked_tokens);
  const uint64_t row_floats =
      uint64_t(shape.head_dim) + (ls.indexer ? uint64_t(shape.indexer_dim) : 0);
  return uint64_t(floats) * sizeof(float) - rows * row_floats * sizeof(float);
}

std::vector<SectionPlan> PlanSections(const KvShape& shape, int64_t n_tokens, int64_t n_vocab,
                                      size_t text_bytes,
                                      std::span<const SnapshotExtension> extensions,
                                      int64_t chunked_tokens) {
  std::vector<SectionPlan> plan;
  plan.push_back({SnapshotSectionKind::kText, 0, text_bytes});
  plan.push_back({SnapshotSectionKind::kTokens, 0, uint64_t(n_tokens) * 4});
  plan.push_back({SnapshotSectionKind::kLogits, 0, uint64_t(n_vocab) * 4});
  plan.push_back({SnapshotSectionKind::kLayerTable, 0, shape.layers.size() * kLayerTableRowBytes});
  for (size_t l = 0; l < shape.layers.size(); ++l) {
    plan.push_back({SnapshotSectionKind::kLayer, uint32_t(l),
                    LayerBytes(shape, int(l), n_tokens, chunked_tokens)});
  }
  for (const SnapshotExtension& e : extensions) {
    plan.push_back({SnapshotSectionKind::kExtension, e.tag, e.bytes.size()});
  }
  return plan;
}

// Assigns offsets: table right after the header, sections 64-byte aligned after it.
uint64_t AssignOffsets(const std::vector<SectionPlan>& plan, std::vector<SnapshotSection>* out) {
  uint64_t off =
      AlignUp(kSnapshotHeaderBytes + plan.size() * kSnapshotSectionRowBytes, kSnapshotSectionAlign);
  out->clear();
  for (const SectionPlan& p : plan) {
    out->push_back(SnapshotSection{p.kind, p.tag, off, p.bytes, 0});
    off = AlignUp(off + p.bytes, kSnapshotSectionAlign);
  }
  // The file ends at the last section's end (no trailing padding).
  return out->empty() ? off : out->back().offset + out->back().bytes;
}

const char* KindName(SnapshotSectionKind k) {
  switch (k) {
    case SnapshotSectionKind::kText:
      return "text";
    case SnapshotSectionKind::kTokens:
      return "tokens";
    case SnapshotSectionKind::kLogits:
      return "logits";
    case SnapshotSectionKind::kLayerTable:
      return "layer table";
    case SnapshotSectionKind::kLayer:
      return "layer";
    case SnapshotSectionKind::kExtension:
      return "extension";
  }
  return "unknown";
}

std::string SectionName(const SnapshotSection& s) {
  if (s.kind == SnapshotSectionKind::kLayer) return fmt::format("layer {} section", s.tag);
  if (s.kind == SnapshotSectionKind::kExtension) {
    return fmt::format("extension section (tag 0x{:08x})", s.tag);
  }
  return fmt::format("{} section", KindName(s.kind));
}

std::string LayerKind(const KvLayerShape& l) {
  if (l.compress_ratio == 0) return "sliding only";
  return fmt::format("ratio {}{}{}", l.compress_ratio, l.overlap ? " overlap" : "",
                     l.indexer ? " indexer" : "");
}

// The KvShape a header + layer table describe (ctx = its token count).
Expected<KvShape> ShapeOf(const SnapshotHeader& h, std::string_view layer_table) {
  if (layer_table.size() != size_t(h.n_layer) * kLayerTableRowBytes) {
    return Corrupt("layer table has {} bytes, expected {} for {} layers", layer_table.size(),
                   size_t(h.n_layer) * kLayerTableRowBytes, h.n_layer);
  }
  KvShape s;
  s.head_dim = int(h.head_dim);
  s.n_swa = int(h.n_swa);
  s.indexer_dim = int(h.indexer_dim);
  s.ctx_size = int(h.n_tokens);
  const auto* p = reinterpret_cast<const uint8_t*>(layer_table.data());
  for (uint32_t l = 0; l < h.n_layer; ++l) {
    const uint32_t ratio = Get<uint32_t>(p, l * kLayerTableRowBytes);
    const uint8_t overlap = p[l * kLayerTableRowBytes + 4];
    const uint8_t indexer = p[l * kLayerTableRowBytes + 5];
    if (ratio > (1u << 20) || overlap > 1 || indexer > 1 || ((overlap || indexer) && ratio == 0)) {
      return Corrupt("layer table row {} is malformed (ratio {}, overlap {}, indexer {})", l, ratio,
                     overlap, indexer);
    }
    s.layers.push_back(KvLayerShape{int(ratio), overlap == 1, indexer == 1});
  }
  return s;
}

// Checks every layer section has the size the layer table implies.
Status CheckLayerSizes(const SnapshotHeader& h, const KvShape& shape) {
  for (const SnapshotSection& s : h.sections) {
    if (s.kind != SnapshotSectionKind::kLayer) continue;
    const uint64_t want = LayerBytes(shape, int(s.tag), h.n_tokens, int64_t(h.chunked_tokens()));
    if (s.bytes != want) {
      return Corrupt("layer {} section has {} bytes, the shape implies {}", s.tag, s.bytes, want);
    }
  }
  return Status::Ok();
}

// Host buffers of snapshot size: 2 MiB aligned and marked for transparent huge pages, so
// first touch costs one fault per 2 MiB instead of per 4 KiB (a 25k-token Flash snapshot
// is ~370 MB; 4 KiB faults alone took ~0.4 s of the host copy).
uint8_t* AllocHostBytes(uint64_t n) {
  constexpr uint64_t kAlign = uint64_t(2) << 20;
  const uint64_t size = AlignUp(std::max<uint64_t>(n, 1), n >= kAlign ? kAlign : 4096);
  void* p = std::aligned_alloc(n >= kAlign ? kAlign : 4096, size);
  if (p != nullptr && n >= kAlign) ::madvise(p, size, MADV_HUGEPAGE);
  return static_cast<uint8_t*>(p);
}

// Writes the header and the section table (with the sections' CRCs as set in `h`) into
// the first bytes of the image.
void EncodeHeaderAndTable(const SnapshotHeader& h, uint8_t* base) {
  for (size_t i = 0; i < h.sections.size(); ++i) {
    const SnapshotSection& s = h.sections[i];
    uint8_t* row = base + kSnapshotHeaderBytes + i * kSnapshotSectionRowBytes;
    Put<uint32_t>(row, 0, uint32_t(s.kind));
    Put<uint32_t>(row, 4, s.tag);
    Put<uint64_t>(row, 8, s.offset);
    Put<uint64_t>(row, 16, s.bytes);
    Put<uint32_t>(row, 24, s.crc32c);
    Put<uint32_t>(row, 28, 0);
  }
  const uint32_t table_crc =
      Crc32c(0, base + kSnapshotHeaderBytes, h.sections.size() * kSnapshotSectionRowBytes);
  std::memset(base, 0, kSnapshotHeaderBytes);
  std::memcpy(base + kOffMagic, kSnapshotMagic, sizeof(kSnapshotMagic));
  Put<uint32_t>(base, kOffVersion, h.version);
  Put<uint32_t>(base, kOffHeaderBytes, kSnapshotHeaderBytes);
  std::memcpy(base + kOffModel, h.identity.model.data(), h.identity.model.size());
  std::memcpy(base + kOffNumerics, h.identity.numerics.data(), h.identity.numerics.size());
  Put<uint32_t>(base, kOffNLayer, h.n_layer);
  Put<uint32_t>(base, kOffHeadDim, h.head_dim);
  Put<uint32_t>(base, kOffNSwa, h.n_swa);
  Put<uint32_t>(base, kOffIndexerDim, h.indexer_dim);
  Put<uint32_t>(base, kOffNVocab, h.n_vocab);
  Put<uint32_t>(base, kOffNTokens, h.n_tokens);
  Put<uint32_t>(base, kOffCtx, h.ctx_size);
  base[kOffReason] = uint8_t(h.reason);
  Put<uint32_t>(base, kOffFlags, h.flags);
  Put<int64_t>(base, kOffCreated, h.created_ms);
  Put<uint32_t>(base, kOffSectionCount, uint32_t(h.sections.size()));
  Put<uint32_t>(base, kOffTableCrc, table_crc);
  Put<uint64_t>(base, kOffFileBytes, h.file_bytes);
  Put<uint32_t>(base, kOffChunkTokens, h.chunk_tokens);
  Put<uint32_t>(base, kOffChunkCount, h.n_chunks);
  Put<uint32_t>(base, kOffHeaderCrc, Crc32c(0, base, kOffHeaderCrc));
  Put<int64_t>(base, kOffStatsLastUsed, h.last_used_ms);
  Put<uint32_t>(base, kOffStatsHits, h.hit_count);
  Put<uint32_t>(base, kOffStatsCrc,
                Crc32c(0, base + kSnapshotStatsOffset, kOffStatsCrc - kSnapshotStatsOffset));
}

}  // namespace snapshot_detail

using namespace snapshot_detail;

void SnapshotImage::FreeBytes::operator()(uint8_t* p) const {
  if (pinned_by != nullptr) pinned_by->UnpinHost(p);
  std::free(p);
}

Expected<SnapshotImage> SnapshotImage::Reserve(uint64_t capacity) {
  SnapshotImage img;
  img.bytes_.reset(AllocHostBytes(capacity));
  if (!img.bytes_) return ResourceExhausted("cannot allocate {} bytes for a snapshot", capacity);
  std::memset(img.bytes_.get(), 0, capacity);  // the page faults happen here, not in a capture
  img.capacity_ = capacity;
  return img;
}

Status SnapshotImage::Pin(Backend& backend) {
  if (!bytes_ || pinned()) return Status::Ok();
  FLASHKV_RETURN_IF_ERROR(backend.PinHost(bytes_.get(), size_t(capacity_)));
  bytes_.get_deleter().pinned_by = &backend;
  return Status::Ok();
}

std::string_view SaveReasonName(SaveReason r) {
  switch (r) {
    case SaveReason::kUnknown:
      return "unknown";
    case SaveReason::kCold:
      return "cold";
    case SaveReason::kContinued:
      return "continued";
    case SaveReason::kEvict:
      return "evict";
    case SaveReason::kShutdown:
      return "shutdown";
    case SaveReason::kManual:
      return "manual";
  }
  return "unknown";
}

SaveReason SaveReasonFromByte(uint8_t b) {
  return b <= uint8_t(SaveReason::kManual) ? SaveReason(b) : SaveReason::kUnknown;
}

const SnapshotSection* SnapshotHeader::Find(SnapshotSectionKind kind, uint32_t tag) const {
  for (const SnapshotSection& s : sections) {
    if (s.kind == kind && s.tag == tag) return &s;
  }
  return nullptr;
}

std::span<const int32_t> SnapshotImage::tokens() const {
  const SnapshotSection* s = header_.Find(SnapshotSectionKind::kTokens);
  return {reinterpret_cast<const int32_t*>(bytes_.get() + s->offset), size_t(s->bytes / 4)};
}

std::string_view SnapshotImage::text() const {
  const SnapshotSection* s = header_.Find(SnapshotSectionKind::kText);
  return {reinterpret_cast<const char*>(bytes_.get() + s->offset), size_t(s->bytes)};
}

Sha1Digest TokensKey(std::span<const int32_t> tokens) {
  // Token ids are non-negative int32, so their bytes are the little-endian u32 bytes.
  Sha1 h;
  h.Update(tokens.data(), tokens.size() * sizeof(int32_t));
  return h.Final();
}

uint64_t SnapshotFileBytes(const KvShape& shape, int64_t n_tokens, int64_t n_vocab,
                           size_t text_bytes, std::span<const SnapshotExtension> extensions) {
  std::vector<SnapshotSection> sections;
  return AssignOffsets(PlanSections(shape, n_tokens, n_vocab, text_bytes, extensions), &sections);
}

Expected<SnapshotImage> PrepareSnapshot(const KvState& state, const SnapshotIdentity& identity,
                                        const SnapshotContent& content, int64_t now_ms,
                                        SnapshotImage* reuse) {
  const KvShape& shape = state.shape();
  const int64_t n_tokens = state.n_tokens();
  if (n_tokens <= 0) return InvalidArgument("cannot snapshot an empty state");
  if (int64_t(content.tokens.size()) != n_tokens) {
    return InvalidArgument("snapshot has {} token ids but the state holds {} tokens",
                           content.tokens.size(), n_tokens);
  }
  for (size_t i = 0; i < content.tokens.size(); ++i) {
    if (content.tokens[i] < 0) {
      return InvalidArgument("token id {} at index {} is negative", content.tokens[i], i);
    }
  }
  if (content.logits.empty() || content.logits.size() > kMaxVocab) {
    return InvalidArgument("snapshot logits must hold 1..{} floats, got {}", kMaxVocab,
                           content.logits.size());
  }
  if (content.text.size() > kMaxTextBytes) {
    return InvalidArgument("snapshot text of {} bytes exceeds {}", content.text.size(),
                           kMaxTextBytes);
  }
  if (identity.numerics.size() >= kNumericsBytes) {
    return InvalidArgument("numerics name '{}' is longer than {} bytes", identity.numerics,
                           kNumericsBytes - 1);
  }
  if (shape.layers.size() > kMaxLayers) return InvalidArgument("too many layers");
  for (size_t i = 0; i < content.tail.size(); ++i) {
    if (content.tail[i] < 0) {
      return InvalidArgument("tail id {} at index {} is negative", content.tail[i], i);
    }
  }
  for (const SnapshotExtension& e : content.extensions) {
    if (e.tag == kSnapshotTailTag || e.tag == kSnapshotReplayTag || e.tag == kSnapshotChunksTag) {
      return InvalidArgument(
          "extension tag 0x{:08x} is kv's own section (tail, replay map or chunk list)", e.tag);
    }
  }
  const std::vector<SnapshotExtension> extensions = SnapshotExtensionsOf(content);
  if (extensions.size() > kMaxExtensions) {
    return InvalidArgument("at most {} extensions, got {}", kMaxExtensions, extensions.size());
  }
  for (const SnapshotExtension& e : extensions) {
    if (e.bytes.size() > kMaxExtensionBytes) {
      return InvalidArgument("extension 0x{:08x} of {} bytes is too large", e.tag, e.bytes.size());
    }
  }

  SnapshotImage img;
  SnapshotHeader& h = img.header_;
  h.identity = identity;
  h.n_layer = uint32_t(shape.layers.size());
  h.head_dim = uint32_t(shape.head_dim);
  h.n_swa = uint32_t(shape.n_swa);
  h.indexer_dim = uint32_t(shape.indexer_dim);
  h.n_vocab = uint32_t(content.logits.size());
  h.n_tokens = uint32_t(n_tokens);
  h.ctx_size = uint32_t(shape.ctx_size);
  h.reason = content.reason;
  h.flags = extensions.empty() ? 0 : kSnapshotFlagHasExtensions;
  h.created_ms = now_ms;
  h.last_used_ms = now_ms;
  h.hit_count = 0;
  h.file_bytes = AssignOffsets(PlanSections(shape, n_tokens, int64_t(content.logits.size()),
                                            content.text.size(), extensions),
                               &h.sections);
  img.size_ = h.file_bytes;
  if (reuse != nullptr && reuse->bytes_ && reuse->capacity_ >= img.size_) {
    img.bytes_ = std::move(reuse->bytes_);
    img.capacity_ = reuse->capacity_;
    reuse->size_ = reuse->capacity_ = 0;
    reuse->sealed_ = false;
  } else {
    img.bytes_.reset(AllocHostBytes(img.size_));
    img.capacity_ = img.size_;
  }
  if (!img.bytes_) {
    return ResourceExhausted("cannot allocate {} bytes for a snapshot image", img.size_);
  }
  uint8_t* base = img.bytes_.get();

  // Zero everything that is not section payload (header, table, alignment padding) so
  // that equal states give equal files.
  uint64_t prev_end = 0;
  for (const SnapshotSection& s : h.sections) {
    std::memset(base + prev_end, 0, s.offset - prev_end);
    prev_end = s.offset + s.bytes;
  }

  for (size_t i = 0; i < h.sections.size(); ++i) {
    const SnapshotSection& s = h.sections[i];
    uint8_t* dst = base + s.offset;
    switch (s.kind) {
      case SnapshotSectionKind::kText:
        if (!content.text.empty()) std::memcpy(dst, content.text.data(), content.text.size());
        break;
      case SnapshotSectionKind::kTokens:
        std::memcpy(dst, content.tokens.data(), s.bytes);
        break;
      case SnapshotSectionKind::kLogits:
        std::memcpy(dst, content.logits.data(), s.bytes);
        break;
      case SnapshotSectionKind::kLayerTable:
        for (size_t l = 0; l < shape.layers.size(); ++l) {
          const KvLayerShape& ls = shape.layers[l];
          Put<uint32_t>(dst, l * kLayerTableRowBytes, uint32_t(ls.compress_ratio));
          dst[l * kLayerTableRowBytes + 4] = ls.overlap ? 1 : 0;
          dst[l * kLayerTableRowBytes + 5] = ls.indexer ? 1 : 0;
          Put<uint16_t>(dst, l * kLayerTableRowBytes + 6, 0);
        }
        break;
      case SnapshotSectionKind::kLayer:  // CaptureSnapshotLayers
        if (state.LayerFloats(int(s.tag)) * sizeof(float) != s.bytes) {
          return Internal("layer {}: state holds {} floats, the format expects {} bytes", s.tag,
                          state.LayerFloats(int(s.tag)), s.bytes);
        }
        break;
      case SnapshotSectionKind::kExtension: {
        const size_t e = i - (4 + shape.layers.size());
        std::memcpy(dst, extensions[e].bytes.data(), s.bytes);
        break;
      }
    }
  }
  img.key_ = TokensKey(content.tokens);
  return img;
}

Status CaptureSnapshotLayers(const KvState& state, SnapshotImage& img,
                             const std::function<void(uint64_t)>& on_ready) {
  const SnapshotHeader& h = img.header_;
  if (state.shape().layers.size() != h.n_layer || state.n_tokens() != int64_t(h.n_tokens)) {
    return Internal("capturing layers of another state than the image was prepared for");
  }
  uint8_t* base = img.bytes_.get();
  const uint64_t size = img.size_;
  for (size_t i = 0; i < h.sections.size(); ++i) {
    const SnapshotSection& s = h.sections[i];
    if (s.kind != SnapshotSectionKind::kLayer) continue;
    Status st = state.ReadLayer(int(s.tag), reinterpret_cast<float*>(base + s.offset));
    if (!st.ok()) return st.WithContext(fmt::format("capturing layer {}", s.tag));
    // Everything before the next layer is final (the small sections, the extensions and
    // the padding were written by PrepareSnapshot). The last call must be the last touch
    // of `img`: the consumer may release it as soon as it sees `size`.
    const bool last = s.tag + 1 == h.n_layer;
    if (on_ready) on_ready(last ? size : h.sections[i + 1].offset);
  }
  if (h.n_layer == 0 && on_ready) on_ready(size);
  return Status::Ok();
}

Status PendingCapture::Wait(uint64_t end) const {
  for (const Layer& l : layers) {
    if (l.start >= end) break;
    if (l.ticket != 0) FLASHKV_RETURN_IF_ERROR(backend->WaitCopies(l.ticket));
  }
  return Status::Ok();
}

Expected<PendingCapture> CaptureSnapshotLayersAsync(const KvState& state, SnapshotImage& img) {
  const SnapshotHeader& h = img.header_;
  if (state.shape().layers.size() != h.n_layer || state.n_tokens() != int64_t(h.n_tokens)) {
    return Internal("capturing layers of another state than the image was prepared for");
  }
  PendingCapture out;
  out.backend = &state.backend();
  uint8_t* base = img.bytes_.get();
  // The mutable sections of every layer in one synchronous pass, then the closed rows of
  // each layer as its own asynchronous copy, so the writer can start on the first layers
  // while the last are still in flight.
  std::vector<HostCopy> now;
  std::vector<std::vector<HostCopy>> closed;
  for (size_t i = 0; i < h.sections.size(); ++i) {
    const SnapshotSection& s = h.sections[i];
    if (s.kind != SnapshotSectionKind::kLayer) continue;
    PendingCapture::Layer layer;
    layer.start = s.offset;
    layer.ready_end = s.tag + 1 == h.n_layer ? img.size_ : h.sections[i + 1].offset;
    out.layers.push_back(layer);
    Status st = state.SplitLayerCopies(int(s.tag), reinterpret_cast<float*>(base + s.offset), &now,
                                       &closed.emplace_back());
    if (!st.ok()) return st.WithContext(fmt::format("capturing layer {}", s.tag));
  }
  FLASHKV_RETURN_IF_ERROR(out.backend->ReadMany(now.data(), now.size()));
  for (size_t l = 0; l < closed.size(); ++l) {
    if (closed[l].empty()) continue;
    Expected<uint64_t> ticket = out.backend->ReadManyAsync(closed[l].data(), closed[l].size());
    if (!ticket.ok()) {
      (void)out.Wait();  // copies already queued write into the image
      return ticket.status().WithContext(fmt::format("capturing layer {}", l));
    }
    out.layers[l].ticket = *ticket;
    state.HoldForCopy(*ticket);
    for (const HostCopy& c : closed[l]) out.deferred_bytes += c.bytes;
  }
  return out;
}

Expected<SnapshotImage> CaptureSnapshot(const KvState& state, const SnapshotIdentity& identity,
                                        const SnapshotContent& content, int64_t now_ms,
                                        SnapshotImage* reuse) {
  FLASHKV_ASSIGN_OR_RETURN(SnapshotImage img,
                           PrepareSnapshot(state, identity, content, now_ms, reuse));
  FLASHKV_RETURN_IF_ERROR(CaptureSnapshotLayers(state, img));
  return img;
}

void SealSnapshot(SnapshotImage& img) {
  SnapshotHeader& h = img.header_;
  uint8_t* base = img.bytes_.get();
  for (SnapshotSection& s : h.sections) s.crc32c = Crc32c(0, base + s.offset, s.bytes);
  EncodeHeaderAndTable(h, base);
  img.sealed_ = true;
}

Status WriteSnapshotImage(const SnapshotImage& image, ByteSink& sink) {
  if (!image.sealed()) return Internal("writing an unsealed snapshot image");
  return sink.Write(image.data(), image.size());
}

Status StreamSnapshotImage(SnapshotImage& img, File& file,
                           const std::function<Status(uint64_t)>& wait_ready,
                           const SnapshotWriteOptions& options) {
  SnapshotHeader& h = img.header_;
  uint8_t* base = img.bytes_.get();
  const uint64_t size = img.size_;
  // Whole multiples of the direct-I/O block, so every chunk but the file's tail can go
  // through O_DIRECT (the image is page-aligned).
  const uint64_t chunk = AlignUp(std::max<uint64_t>(options.chunk_bytes, 1), File::kDirectAlign);
  std::vector<uint32_t> crcs(h.sections.size(), 0);
  size_t first = 0;  // first section not yet wholly CRC'd
  // Declared after everything it reads: on an early return it waits for its queued
  // writes before the image can be released.
  ChunkedFileWriter out(file, options.depth, options.direct);
  for (uint64_t pos = 0; pos < size;) {
    const uint64_t end = std::min(size, pos + chunk);
    if (wait_ready) FLASHKV_RETURN_IF_ERROR(wait_ready(end));
    // The CRC pass runs here while the I/O thread writes the previous chunk.
    for (size_t i = first; i < h.sections.size(); ++i) {
      const SnapshotSection& s = h.sections[i];
      if (s.offset >= end) break;
      const uint64_t a = std::max(pos, s.offset), b = std::min(end, s.offset + s.bytes);
      if (a < b) crcs[i] = Crc32c(crcs[i], base + a, size_t(b - a));
      if (s.offset + s.bytes <= end) first = i + 1;
    }
    // The first chunk holds the header and the section table, which hold the CRCs: it is
    // written last, so until the file is complete it has no valid header and a torn
    // temp file can never pass for a snapshot.
    if (pos > 0) FLASHKV_RETURN_IF_ERROR(out.Write(pos, base + pos, size_t(end - pos)));
    pos = end;
  }
  if (wait_ready) FLASHKV_RETURN_IF_ERROR(wait_ready(size));
  FLASHKV_RETURN_IF_ERROR(out.Finish());
  for (size_t i = 0; i < h.sections.size(); ++i) h.sections[i].crc32c = crcs[i];
  EncodeHeaderAndTable(h, base);
  img.sealed_ = true;
  FLASHKV_RETURN_IF_ERROR(out.Write(0, base, size_t(std::min(size, chunk))));
  return out.Finish();
}

Status WriteSnapshotStats(File& file, int64_t last_used_ms, uint32_t hit_count) {
  uint8_t block[kSnapshotStatsBytes] = {};
  Put<int64_t>(block, 0, last_used_ms);
  Put<uint32_t>(block, 8, hit_count);
  Put<uint32_t>(block, 28, Crc32c(0, block, 28));
  return file.WriteAt(kSnapshotStatsOffset, block, sizeof(block));
}

Expected<SnapshotHeader> ReadSnapshotHeader(const ByteSource& source) {
  FLASHKV_ASSIGN_OR_RETURN(uint64_t size, source.Size());
  if (size < kSnapshotHeaderBytes) {
    return Corrupt("truncated: {} bytes, shorter than the {}-byte header", size,
                   kSnapshotHeaderBytes);
  }
  uint8_t b[kSnapshotHeaderBytes];
  FLASHKV_RETURN_IF_ERROR(source.ReadAt(0, b, sizeof(b)));
  if (std::memcmp(b + kOffMagic, kSnapshotMagic, sizeof(kSnapshotMagic)) != 0) {
    return Corrupt("not a flashkv snapshot (bad magic)");
  }
  const uint32_t version = Get<uint32_t>(b, kOffVersion);
  if (version != kSnapshotVersion && version != kSnapshotVersionV1) {
    return Unsupported("snapshot format version {} (this build reads versions {} and {})", version,
                       kSnapshotVersionV1, kSnapshotVersion);
  }
  if (Get<uint32_t>(b, kOffHeaderCrc) != Crc32c(0, b, kOffHeaderCrc)) {
    return Corrupt("header checksum mismatch");
  }
  if (Get<uint32_t>(b, kOffHeaderBytes) != kSnapshotHeaderBytes) {
    return Corrupt("header size {} is not {}", Get<uint32_t>(b, kOffHeaderBytes),
                   kSnapshotHeaderBytes);
  }
  SnapshotHeader h;
  h.version = version;
  h.chunk_tokens = Get<uint32_t>(b, kOffChunkTokens);
  h.n_chunks = Get<uint32_t>(b, kOffChunkCount);
  std::memcpy(h.identity.model.data(), b + kOffModel, h.identity.model.size());
  const char* num = reinterpret_cast<const char*>(b + kOffNumerics);
  h.identity.numerics.assign(num, strnlen(num, kNumericsBytes - 1));
  h.n_layer = Get<uint32_t>(b, kOffNLayer);
  h.head_dim = Get<uint32_t>(b, kOffHeadDim);
  h.n_swa = Get<uint32_t>(b, kOffNSwa);
  h.indexer_dim = Get<uint32_t>(b, kOffIndexerDim);
  h.n_vocab = Get<uint32_t>(b, kOffNVocab);
  h.n_tokens = Get<uint32_t>(b, kOffNTokens);
  h.ctx_size = Get<uint32_t>(b, kOffCtx);
  h.reason = SaveReasonFromByte(b[kOffReason]);
  h.flags = Get<uint32_t>(b, kOffFlags);
  h.created_ms = Get<int64_t>(b, kOffCreated);
  h.file_bytes = Get<uint64_t>(b, kOffFileBytes);
  const uint32_t n_sections = Get<uint32_t>(b, kOffSectionCount);
  if (h.n_layer == 0 || h.n_layer > kMaxLayers || h.n_tokens == 0 || h.n_vocab == 0 ||
      h.n_vocab > kMaxVocab || h.head_dim == 0 || h.head_dim > (1u << 16) || h.n_swa == 0 ||
      h.n_swa > (1u << 24) || h.indexer_dim > (1u << 16) || h.n_tokens > (1u << 31)) {
    return Corrupt(
        "header shape fields are out of range (layers {}, tokens {}, vocab {}, "
        "head_dim {}, window {})",
        h.n_layer, h.n_tokens, h.n_vocab, h.head_dim, h.n_swa);
  }
  if (version == kSnapshotVersionV1
          ? (h.chunk_tokens != 0 || h.n_chunks != 0)
          : (h.n_chunks > 0 && h.chunk_tokens == 0) || h.chunked_tokens() > h.n_tokens) {
    return Corrupt("chunk fields ({} chunks of {} tokens) do not fit {} tokens", h.n_chunks,
                   h.chunk_tokens, h.n_tokens);
  }
  if (n_sections < 4 + h.n_layer || n_sections > 4 + h.n_layer + kMaxExtensions) {
    return Corrupt("section count {} does not fit {} layers", n_sections, h.n_layer);
  }
  if (size != h.file_bytes) {
    return Corrupt("truncated or extended: file has {} bytes, header says {}", size, h.file_bytes);
  }
  const uint64_t table_end = kSnapshotHeaderBytes + uint64_t(n_sections) * kSnapshotSectionRowBytes;
  if (table_end > size) return Corrupt("truncated inside the section table");
  std::vector<uint8_t> table(table_end - kSnapshotHeaderBytes);
  FLASHKV_RETURN_IF_ERROR(source.ReadAt(kSnapshotHeaderBytes, table.data(), table.size()));
  if (Crc32c(0, table.data(), table.size()) != Get<uint32_t>(b, kOffTableCrc)) {
    return Corrupt("section table checksum mismatch");
  }
  uint64_t prev_end = table_end;
  for (uint32_t i = 0; i < n_sections; ++i) {
    const uint8_t* row = table.data() + size_t(i) * kSnapshotSectionRowBytes;
    SnapshotSection s;
    s.kind = SnapshotSectionKind(Get<uint32_t>(row, 0));
    s.tag = Get<uint32_t>(row, 4);
    s.offset = Get<uint64_t>(row, 8);
    s.bytes = Get<uint64_t>(row, 16);
    s.crc32c = Get<uint32_t>(row, 24);
    // Fixed order: text, tokens, logits, layer table, layers 0..n-1, extensions.
    SnapshotSectionKind want_kind;
    uint32_t want_tag = s.tag;
    if (i < 4) {
      want_kind = SnapshotSectionKind(i + 1);
      want_tag = 0;
    } else if (i < 4 + h.n_layer) {
      want_kind = SnapshotSectionKind::kLayer;
      want_tag = i - 4;
    } else {
      want_kind = SnapshotSectionKind::kExtension;
    }
    if (s.kind != want_kind || s.tag != want_tag) {
      return Corrupt("section {} is kind {} tag {}, expected {} tag {}", i, uint32_t(s.kind), s.tag,
                     KindName(want_kind), want_tag);
    }
    if (s.offset % kSnapshotSectionAlign != 0 || s.offset < prev_end || s.offset > size ||
        s.bytes > size - s.offset) {
      return Corrupt("{} at offset {} ({} bytes) lies outside the file of {} bytes or overlaps",
                     SectionName(s), s.offset, s.bytes, size);
    }
    prev_end = s.offset + s.bytes;
    h.sections.push_back(s);
  }
  if (h.sections[1].bytes != uint64_t(h.n_tokens) * 4 ||
      h.sections[2].bytes != uint64_t(h.n_vocab) * 4 ||
      h.sections[3].bytes != uint64_t(h.n_layer) * kLayerTableRowBytes ||
      h.sections[0].bytes > kMaxTextBytes) {
    return Corrupt("text/tokens/logits/layer-table section sizes do not match the header");
  }
  if (prev_end != size) return Corrupt("{} bytes after the last section", size - prev_end);
  if ((h.flags & kSnapshotFlagHasExtensions) != 0 && n_sections == 4 + h.n_layer) {
    return Corrupt("extension flag set but no extension sections");
  }
  // The stats block: a failed CRC (a torn touch) resets the history, not the entry.
  const uint32_t stats_crc = Get<uint32_t>(b, kOffStatsCrc);
  if (stats_crc == Crc32c(0, b + kSnapshotStatsOffset, kOffStatsCrc - kSnapshotStatsOffset)) {
    h.last_used_ms = Get<int64_t>(b, kOffStatsLastUsed);
    h.hit_count = Get<uint32_t>(b, kOffStatsHits);
  } else {
    h.stats_ok = false;
    h.last_used_ms = h.created_ms;
    h.hit_count = 0;
  }
  return h;
}

Expected<std::string> ReadSnapshotSection(const ByteSource& source,
                                          const SnapshotSection& section) {
  std::string out(section.bytes, '\0');
  FLASHKV_RETURN_IF_ERROR(source.ReadAt(section.offset, out.data(), out.size()));
  if (Crc32c(0, out.data(), out.size()) != section.crc32c) {
    return Corrupt("{} checksum mismatch", SectionName(section));
  }
  return out;
}

std::vector<int32_t> DecodeSnapshotTokens(std::string_view bytes) {
  std::vector<int32_t> t(bytes.size() / 4);
  if (!t.empty()) std::memcpy(t.data(), bytes.data(), t.size() * 4);
  return t;
}

Status CheckSnapshotCompatible(const SnapshotHeader& h, std::string_view layer_table,
                               const SnapshotIdentity& identity, const KvShape& shape) {
  if (h.identity.model != identity.model) {
    return FailedPrecondition("snapshot is for another model (fingerprint {}, this model {})",
                              Sha1Hex(h.identity.model), Sha1Hex(identity.model));
  }
  if (h.identity.numerics != identity.numerics) {
    return FailedPrecondition("snapshot numerics '{}' differ from this run's '{}'",
                              h.identity.numerics, identity.numerics);
  }
  auto mismatch = [](const char* what, uint64_t file, uint64_t state) {
    return FailedPrecondition("snapshot {} {} differs from the state's {}", what, file, state);
  };
  if (h.n_layer != shape.layers.size())
    return mismatch("layer count", h.n_layer, shape.layers.size());
  if (int(h.head_dim) != shape.head_dim) return mismatch("head_dim", h.head_dim, shape.head_dim);
  if (int(h.n_swa) != shape.n_swa) return mismatch("window", h.n_swa, shape.n_swa);
  if (int(h.indexer_dim) != shape.indexer_dim) {
    return mismatch("indexer_dim", h.indexer_dim, shape.indexer_dim);
  }
  FLASHKV_ASSIGN_OR_RETURN(KvShape file_shape, ShapeOf(h, layer_table));
  for (size_t l = 0; l < shape.layers.size(); ++l) {
    const KvLayerShape& a = file_shape.layers[l];
    const KvLayerShape& b = shape.layers[l];
    if (a.compress_ratio != b.compress_ratio || a.overlap != b.overlap || a.indexer != b.indexer) {
      return FailedPrecondition("snapshot layer {} is {}, the state's is {}", l, LayerKind(a),
                                LayerKind(b));
    }
  }
  if (int64_t(h.n_tokens) > shape.ctx_size) {
    return FailedPrecondition("snapshot holds {} tokens, more than the state's context of {}",
                              h.n_tokens, shape.ctx_size);
  }
  return Status::Ok();
}

}  // namespace flashkv
