#include "snapshot/snapshot_chunks.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "snapshot/snapshot_codec.h"
#include "snapshot/snapshot_codec_internal.h"
#include "util/crc32c.h"
#include "util/file_io_writer.h"

namespace flashkv {

using snapshot_detail::Get;
using snapshot_detail::Put;

namespace {

// Chunk header field offsets (docs/KV_FORMAT.md "Chunk file").
constexpr size_t kCOffMagic = 0;
constexpr size_t kCOffVersion = 8;
constexpr size_t kCOffHeaderBytes = 12;
constexpr size_t kCOffName = 16;
constexpr size_t kCOffIndex = 36;
constexpr size_t kCOffChunkTokens = 40;
constexpr size_t kCOffNLayer = 44;
constexpr size_t kCOffPayloadCrc = 48;
constexpr size_t kCOffPayloadBytes = 52;
constexpr size_t kCOffHeaderCrc = 60;
static_assert(kCOffHeaderCrc + 4 == kChunkHeaderBytes);
constexpr size_t kLayerRowBytes = 8;  // u32 bytes, u32 CRC per layer (version 3)

// The header CRC: bytes [0, 60), then (version 3) the layer table and padding [64, n).
uint32_t HeaderCrc(const uint8_t* b, uint32_t header_bytes) {
  uint32_t crc = Crc32c(0, b, kCOffHeaderCrc);
  if (header_bytes > kChunkHeaderBytes) {
    crc = Crc32c(crc, b + kChunkHeaderBytes, header_bytes - kChunkHeaderBytes);
  }
  return crc;
}

}  // namespace

Status CheckChunkTokens(const KvShape& shape, uint32_t chunk_tokens) {
  if (chunk_tokens == 0) return InvalidArgument("chunk size must be positive");
  for (size_t l = 0; l < shape.layers.size(); ++l) {
    const int m = shape.layers[l].compress_ratio;
    if (m > 0 && chunk_tokens % uint32_t(m) != 0) {
      return InvalidArgument("chunk size {} is not a multiple of layer {}'s compress ratio {}",
                             chunk_tokens, l, m);
    }
  }
  return Status::Ok();
}

uint64_t ChunkLayerBytes(const KvShape& shape, int layer, uint32_t chunk_tokens) {
  const KvLayerShape& l = shape.layers[size_t(layer)];
  if (l.compress_ratio == 0) return 0;
  const uint64_t rows = chunk_tokens / uint32_t(l.compress_ratio);
  uint64_t floats = rows * uint64_t(shape.head_dim);
  if (l.indexer) floats += rows * uint64_t(shape.indexer_dim);
  return floats * sizeof(float);
}

uint64_t ChunkPayloadBytes(const KvShape& shape, uint32_t chunk_tokens) {
  uint64_t bytes = 0;
  for (size_t l = 0; l < shape.layers.size(); ++l) {
    bytes += ChunkLayerBytes(shape, int(l), chunk_tokens);
  }
  return bytes;
}

uint32_t ChunkHeaderBytesFor(uint32_t n_layer) {
  return uint32_t((kChunkHeaderBytes + kLayerRowBytes * n_layer + 63) / 64 * 64);
}

uint64_t ChunkFileBytes(const KvShape& shape, uint32_t chunk_tokens) {
  return ChunkHeaderBytesFor(uint32_t(shape.layers.size())) +
         ChunkPayloadBytes(shape, chunk_tokens);
}

std::vector<ChunkLayerCrc> ChunkLayerCrcs(const KvShape& shape, uint32_t chunk_tokens,
                                          const uint8_t* payload) {
  std::vector<ChunkLayerCrc> out(shape.layers.size());
  uint64_t at = 0;
  for (size_t l = 0; l < shape.layers.size(); ++l) {
    const uint64_t n = ChunkLayerBytes(shape, int(l), chunk_tokens);
    out[l] = {uint32_t(n), Crc32c(0, payload + at, n)};
    at += n;
  }
  return out;
}

std::vector<Sha1Digest> ChunkNames(const SnapshotIdentity& identity, uint32_t chunk_tokens,
                                   std::span<const int32_t> tokens) {
  static constexpr char kDomain[] = "flashkv-chunk-v2";
  std::vector<Sha1Digest> names;
  const uint32_t n = ChunkCount(int64_t(tokens.size()), chunk_tokens);
  char numerics[16] = {};
  std::memcpy(numerics, identity.numerics.data(), std::min<size_t>(identity.numerics.size(), 15));
  Sha1 h;
  for (uint32_t k = 0; k < n; ++k) {
    h.Update(kDomain, sizeof(kDomain) - 1);
    h.Update(identity.model.data(), identity.model.size());
    h.Update(numerics, sizeof(numerics));
    h.Update(&chunk_tokens, sizeof(chunk_tokens));
    if (k > 0) h.Update(names.back().data(), names.back().size());
    // Non-negative int32 ids: their bytes are the little-endian u32 bytes.
    h.Update(tokens.data() + size_t(k) * chunk_tokens, size_t(chunk_tokens) * sizeof(int32_t));
    names.push_back(h.Final());
  }
  return names;
}

Status CheckChunkNames(const SnapshotIdentity& identity, uint32_t chunk_tokens,
                       std::span<const int32_t> tokens, std::span<const SnapshotChunkRef> refs) {
  if (chunk_tokens == 0 || uint64_t(refs.size()) * chunk_tokens > tokens.size()) {
    return Corrupt("{} chunks of {} tokens for {} token ids", refs.size(), chunk_tokens,
                   tokens.size());
  }
  const std::vector<Sha1Digest> names =
      ChunkNames(identity, chunk_tokens, tokens.first(refs.size() * chunk_tokens));
  for (size_t k = 0; k < refs.size(); ++k) {
    if (names[k] != refs[k].name) {
      return Corrupt("chunk {} is named {}, its token ids name {}", k, Sha1Hex(refs[k].name),
                     Sha1Hex(names[k]));
    }
  }
  return Status::Ok();
}

Sha1Digest ChunkName(const SnapshotIdentity& identity, uint32_t chunk_tokens, uint32_t index,
                     std::span<const int32_t> tokens) {
  const size_t end = std::min(tokens.size(), size_t(index + 1) * chunk_tokens);
  const std::vector<Sha1Digest> names = ChunkNames(identity, chunk_tokens, tokens.first(end));
  return index < names.size() ? names[index] : Sha1Digest{};
}

std::string ChunkDirForManifest(const std::string& manifest_path) {
  const size_t slash = manifest_path.find_last_of('/');
  return ChunkDirOf(slash == std::string::npos ? "." : manifest_path.substr(0, slash));
}

LayerRowSpans RowSpansOf(const KvShape& shape, int layer, int64_t n_tokens) {
  LayerRowSpans r;
  const KvLayerShape& ls = shape.layers[size_t(layer)];
  r.ratio = ls.compress_ratio;
  if (ls.compress_ratio == 0) return r;
  auto floats = [&](KvSection s) {
    return uint64_t(KvState::SectionFloatsFor(shape, layer, s, n_tokens));
  };
  r.comp_row = uint64_t(shape.head_dim);
  r.comp_offset = floats(KvSection::kRaw);
  if (ls.indexer) {
    r.index_row = uint64_t(shape.indexer_dim);
    r.index_offset = r.comp_offset + floats(KvSection::kCompressed) +
                     floats(KvSection::kCompressorKv) + floats(KvSection::kCompressorScore);
  }
  return r;
}

namespace {

// Calls fn(layer_floats_offset, payload_byte_offset, bytes) for every row block of chunk
// `index`, in payload order.
template <typename Fn>
void ForEachChunkBlock(const KvShape& shape, int64_t n_tokens, uint32_t chunk_tokens,
                       uint32_t index, Fn&& fn) {
  uint64_t pos = 0;
  for (size_t l = 0; l < shape.layers.size(); ++l) {
    const LayerRowSpans r = RowSpansOf(shape, int(l), n_tokens);
    if (r.ratio == 0) continue;
    const uint64_t rows = chunk_tokens / uint32_t(r.ratio);
    const uint64_t first = uint64_t(index) * rows;
    const uint64_t comp = rows * r.comp_row * sizeof(float);
    fn(l, r.comp_offset + first * r.comp_row, pos, comp);
    pos += comp;
    if (r.index_row > 0) {
      const uint64_t idx = rows * r.index_row * sizeof(float);
      fn(l, r.index_offset + first * r.index_row, pos, idx);
      pos += idx;
    }
  }
}

}  // namespace

void GatherChunkPayload(const KvShape& shape, int64_t n_tokens, uint32_t chunk_tokens,
                        uint32_t index, std::span<const float* const> layers, uint8_t* payload) {
  ForEachChunkBlock(shape, n_tokens, chunk_tokens, index,
                    [&](size_t l, uint64_t float_off, uint64_t pos, uint64_t bytes) {
                      std::memcpy(payload + pos, layers[l] + float_off, bytes);
                    });
}

void ScatterChunkPayload(const KvShape& shape, int64_t n_tokens, uint32_t chunk_tokens,
                         uint32_t index, const uint8_t* payload, std::span<float* const> layers) {
  ForEachChunkBlock(shape, n_tokens, chunk_tokens, index,
                    [&](size_t l, uint64_t float_off, uint64_t pos, uint64_t bytes) {
                      std::memcpy(layers[l] + float_off, payload + pos, bytes);
                    });
}

void EncodeChunkHeader(const ChunkHeader& h, uint8_t* out) {
  const uint32_t header_bytes =
      h.version == kChunkVersionV2 ? kChunkHeaderBytes : ChunkHeaderBytesFor(h.n_layer);
  std::memset(out, 0, header_bytes);
  std::memcpy(out + kCOffMagic, kChunkMagic, sizeof(kChunkMagic));
  Put<uint32_t>(out, kCOffVersion, h.version);
  Put<uint32_t>(out, kCOffHeaderBytes, header_bytes);
  std::memcpy(out + kCOffName, h.name.data(), h.name.size());
  Put<uint32_t>(out, kCOffIndex, h.index);
  Put<uint32_t>(out, kCOffChunkTokens, h.chunk_tokens);
  Put<uint32_t>(out, kCOffNLayer, h.n_layer);
  Put<uint32_t>(out, kCOffPayloadCrc, h.payload_crc32c);
  Put<uint64_t>(out, kCOffPayloadBytes, h.payload_bytes);
  if (h.version != kChunkVersionV2) {
    for (size_t l = 0; l < h.layers.size() && l < h.n_layer; ++l) {
      Put<uint32_t>(out, kChunkHeaderBytes + l * kLayerRowBytes, h.layers[l].bytes);
      Put<uint32_t>(out, kChunkHeaderBytes + l * kLayerRowBytes + 4, h.layers[l].crc32c);
    }
  }
  Put<uint32_t>(out, kCOffHeaderCrc, HeaderCrc(out, header_bytes));
}

Expected<ChunkHeader> ParseChunkHeader(const uint8_t* b, uint64_t available, uint64_t file_size) {
  if (file_size < kChunkHeaderBytes || available < kChunkHeaderBytes) {
    return Corrupt("chunk truncated: {} bytes, shorter than its {}-byte header", file_size,
                   kChunkHeaderBytes);
  }
  if (std::memcmp(b + kCOffMagic, kChunkMagic, sizeof(kChunkMagic)) != 0) {
    return Corrupt("not a flashkv chunk (bad magic)");
  }
  const uint32_t version = Get<uint32_t>(b, kCOffVersion);
  if (version != kChunkVersion && version != kChunkVersionV2) {
    return Unsupported("chunk format version {} (this build reads {} and {})", version,
                       kChunkVersionV2, kChunkVersion);
  }
  // The size fields are checked against each other before the CRC can be computed over
  // the header they describe.
  const uint32_t header_bytes = Get<uint32_t>(b, kCOffHeaderBytes);
  const uint32_t n_layer = Get<uint32_t>(b, kCOffNLayer);
  const uint32_t want_header = version == kChunkVersionV2
                                   ? kChunkHeaderBytes
                                   : ChunkHeaderBytesFor(std::min(n_layer, 4096u));
  if (n_layer > 4096 || header_bytes != want_header) {
    return Corrupt("chunk header size {} does not fit version {} of {} layers", header_bytes,
                   version, n_layer);
  }
  if (file_size < header_bytes || available < header_bytes) {
    return Corrupt("chunk truncated: {} bytes, shorter than its {}-byte header", file_size,
                   header_bytes);
  }
  if (Get<uint32_t>(b, kCOffHeaderCrc) != HeaderCrc(b, header_bytes)) {
    return Corrupt("chunk header checksum mismatch");
  }
  ChunkHeader h;
  h.version = version;
  h.header_bytes = header_bytes;
  std::memcpy(h.name.data(), b + kCOffName, h.name.size());
  h.index = Get<uint32_t>(b, kCOffIndex);
  h.chunk_tokens = Get<uint32_t>(b, kCOffChunkTokens);
  h.n_layer = n_layer;
  h.payload_crc32c = Get<uint32_t>(b, kCOffPayloadCrc);
  h.payload_bytes = Get<uint64_t>(b, kCOffPayloadBytes);
  if (file_size - header_bytes != h.payload_bytes) {
    return Corrupt("chunk truncated or extended: {} payload bytes, header says {}",
                   file_size - header_bytes, h.payload_bytes);
  }
  if (version != kChunkVersionV2) {
    h.layers.resize(n_layer);
    uint64_t sum = 0;
    for (uint32_t l = 0; l < n_layer; ++l) {
      h.layers[l].bytes = Get<uint32_t>(b, kChunkHeaderBytes + l * kLayerRowBytes);
      h.layers[l].crc32c = Get<uint32_t>(b, kChunkHeaderBytes + l * kLayerRowBytes + 4);
      sum += h.layers[l].bytes;
    }
    if (sum != h.payload_bytes) {
      return Corrupt("chunk layer table sums to {} bytes, the payload is {}", sum, h.payload_bytes);
    }
  }
  return h;
}

Expected<ChunkHeader> ReadChunkHeader(const File& file) {
  FLASHKV_ASSIGN_OR_RETURN(uint64_t size, file.Size());
  // One read covers every header of up to 504 layers (a restore opens every chunk first).
  std::vector<uint8_t> head(size_t(std::min<uint64_t>(size, File::kDirectAlign)));
  if (!head.empty()) FLASHKV_RETURN_IF_ERROR(file.ReadAt(0, head.data(), head.size()));
  Expected<ChunkHeader> h = ParseChunkHeader(head.data(), head.size(), size);
  if (h.ok() || head.size() < kChunkHeaderBytes ||
      Get<uint32_t>(head.data(), kCOffVersion) != kChunkVersion) {
    return h;
  }
  // A longer version-3 header: read it whole and parse again.
  const uint32_t header_bytes = Get<uint32_t>(head.data(), kCOffHeaderBytes);
  if (header_bytes <= head.size() || header_bytes > ChunkHeaderBytesFor(4096) ||
      header_bytes > size) {
    return h;
  }
  head.resize(header_bytes);
  FLASHKV_RETURN_IF_ERROR(file.ReadAt(0, head.data(), head.size()));
  return ParseChunkHeader(head.data(), head.size(), size);
}

Expected<ChunkHeader> OpenChunkHeader(const File& file, const SnapshotChunkRef& ref,
                                      uint64_t expect_payload) {
  FLASHKV_ASSIGN_OR_RETURN(uint64_t size, file.Size());
  Expected<ChunkHeader> parsed = ReadChunkHeader(file);
  // A version-2 manifest names chunks of versions 2 and 3 only: any other is damage here.
  if (!parsed.ok() && parsed.status().code() == StatusCode::kUnsupported) {
    return Corrupt("{}", parsed.status().message());
  }
  if (!parsed.ok()) return parsed.status();
  const ChunkHeader& h = *parsed;
  if (h.name != ref.name) return Corrupt("chunk header names another chunk");
  if (size != ref.file_bytes || h.payload_crc32c != ref.payload_crc32c) {
    return Corrupt(
        "chunk ({} bytes, payload CRC {:08x}) is not the one the manifest names "
        "({} bytes, CRC {:08x})",
        size, h.payload_crc32c, ref.file_bytes, ref.payload_crc32c);
  }
  if (h.payload_bytes != expect_payload) {
    return Corrupt("chunk payload of {} bytes, the shape implies {}", h.payload_bytes,
                   expect_payload);
  }
  return h;
}

Expected<ChunkHeader> VerifyChunkBytes(std::string_view bytes, std::string_view file_name) {
  const auto* b = reinterpret_cast<const uint8_t*>(bytes.data());
  FLASHKV_ASSIGN_OR_RETURN(ChunkHeader h, ParseChunkHeader(b, bytes.size()));
  const uint8_t* payload = b + h.header_bytes;
  if (Crc32c(0, payload, h.payload_bytes) != h.payload_crc32c) {
    return Corrupt("chunk payload checksum mismatch");
  }
  uint64_t at = 0;
  for (size_t l = 0; l < h.layers.size(); ++l) {
    if (Crc32c(0, payload + at, h.layers[l].bytes) != h.layers[l].crc32c) {
      return Corrupt("chunk layer {} checksum mismatch", l);
    }
    at += h.layers[l].bytes;
  }
  Sha1Digest from_name;
  if (ParseChunkFileName(file_name, &from_name) && from_name != h.name) {
    return Corrupt("chunk file name does not match the name in its header");
  }
  return h;
}

Expected<ChunkHeader> VerifyChunkFile(const std::string& path) {
  auto run = [&]() -> Expected<ChunkHeader> {
    FLASHKV_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path, kMaxChunkFileBytes));
    const size_t slash = path.find_last_of('/');
    return VerifyChunkBytes(
        bytes, std::string_view(path).substr(slash == std::string::npos ? 0 : slash + 1));
  };
  auto r = run();
  if (!r.ok()) return r.status().WithContext(path);
  return r;
}

std::string EncodeChunkRefs(std::span<const SnapshotChunkRef> refs) {
  std::string out(refs.size() * kChunkRefBytes, '\0');
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  for (size_t i = 0; i < refs.size(); ++i) {
    uint8_t* row = p + i * kChunkRefBytes;
    std::memcpy(row, refs[i].name.data(), refs[i].name.size());
    Put<uint32_t>(row, 20, refs[i].payload_crc32c);
    Put<uint64_t>(row, 24, refs[i].file_bytes);
  }
  return out;
}

Expected<std::vector<SnapshotChunkRef>> DecodeChunkRefs(std::string_view bytes, uint32_t count) {
  if (bytes.size() != size_t(count) * kChunkRefBytes) {
    return Corrupt("chunk list of {} bytes does not hold {} rows of {}", bytes.size(), count,
                   kChunkRefBytes);
  }
  std::vector<SnapshotChunkRef> refs(count);
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* row = p + size_t(i) * kChunkRefBytes;
    std::memcpy(refs[i].name.data(), row, refs[i].name.size());
    refs[i].payload_crc32c = Get<uint32_t>(row, 20);
    refs[i].file_bytes = Get<uint64_t>(row, 24);
    if (refs[i].file_bytes < kChunkHeaderBytes) {
      return Corrupt("chunk list row {} gives a chunk of {} bytes", i, refs[i].file_bytes);
    }
  }
  return refs;
}

Expected<std::vector<SnapshotChunkRef>> ReadSnapshotChunkRefs(const ByteSource& source,
                                                              const SnapshotHeader& h) {
  const SnapshotSection* first_ext = nullptr;
  for (const SnapshotSection& s : h.sections) {
    if (s.kind == SnapshotSectionKind::kExtension) {
      first_ext = &s;
      break;
    }
  }
  const bool has = first_ext != nullptr && first_ext->tag == kSnapshotChunksTag;
  if (h.version == kSnapshotVersionV1 || h.n_chunks == 0) {
    if (has) return Corrupt("chunk list in a snapshot without chunks");
    return std::vector<SnapshotChunkRef>{};
  }
  if (!has) return Corrupt("{} chunks but no chunk list section first", h.n_chunks);
  FLASHKV_ASSIGN_OR_RETURN(std::string bytes, ReadSnapshotSection(source, *first_ext));
  return DecodeChunkRefs(bytes, h.n_chunks);
}

Expected<ScannedSnapshot> ScanSnapshot(const ByteSource& source) {
  ScannedSnapshot out;
  FLASHKV_ASSIGN_OR_RETURN(out.header, ReadSnapshotHeader(source));
  const SnapshotHeader& h = out.header;
  FLASHKV_ASSIGN_OR_RETURN(std::string table,
                           ReadSnapshotSection(source, *h.Find(SnapshotSectionKind::kLayerTable)));
  FLASHKV_ASSIGN_OR_RETURN(KvShape shape, snapshot_detail::ShapeOf(h, table));
  FLASHKV_RETURN_IF_ERROR(snapshot_detail::CheckLayerSizes(h, shape));
  FLASHKV_ASSIGN_OR_RETURN(out.text,
                           ReadSnapshotSection(source, *h.Find(SnapshotSectionKind::kText)));
  FLASHKV_ASSIGN_OR_RETURN(std::string tokens,
                           ReadSnapshotSection(source, *h.Find(SnapshotSectionKind::kTokens)));
  out.tokens = DecodeSnapshotTokens(tokens);
  FLASHKV_ASSIGN_OR_RETURN(out.chunks, ReadSnapshotChunkRefs(source, h));
  return out;
}

Status WriteChunkFile(const std::string& chunk_dir, const ChunkHeader& header, uint8_t* file,
                      const std::string& tmp_tag, bool direct) {
  const std::string final_path = JoinPath(chunk_dir, ChunkFileName(header.name));
  const std::string tmp = TempPathFor(final_path, tmp_tag);
  Status st = [&]() -> Status {
    FLASHKV_RETURN_IF_ERROR(WriteFileSynced(tmp, [&](File& f) -> Status {
      const size_t n = size_t(header.header_bytes + header.payload_bytes);
      // The block(s) holding the header, written last.
      const size_t first = std::min<size_t>(n, (header.header_bytes + File::kDirectAlign - 1) /
                                                   File::kDirectAlign * File::kDirectAlign);
      ChunkedFileWriter out(f, 2, direct);
      // Payload first, the block with the header last: a torn temp file never has a
      // valid header.
      if (n > first) FLASHKV_RETURN_IF_ERROR(out.Write(first, file + first, n - first));
      FLASHKV_RETURN_IF_ERROR(out.Finish());
      EncodeChunkHeader(header, file);
      FLASHKV_RETURN_IF_ERROR(out.Write(0, file, first));
      return out.Finish();
    }));
    // Renamed without a directory sync: the directory is synced once for all chunks of a
    // save (WriteImageChunks).
    if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
      return IoError("rename {} -> {}: {}", tmp, final_path, std::strerror(errno));
    }
    return Status::Ok();
  }();
  if (!st.ok()) (void)RemoveFile(tmp);
  return st;
}

namespace {

// One chunk file being streamed (WriteChunksStreaming).
struct StreamedChunk {
  uint32_t index = 0;
  std::string tmp, final_path;
  std::optional<File> file;
  ChunkHeader header;
  uint64_t at = 0;  // next payload byte's file offset
};

// Writes the chunk files `todo` (indices into `names`) layer by layer as the capture makes
// each layer of `full` final (`ready`): layer l's rows of every chunk go to their files
// (ordinary positioned writes, writeback started as they go) while the capture of the next
// layers proceeds, each layer's CRC and the running payload CRC computed on the way. Then
// per file: fdatasync, the header, fdatasync, rename — a torn temp file never has a valid
// header, and no chunk is renamed before its bytes are durable. Appends the refs in `todo`
// order.
Status WriteChunksStreaming(const SnapshotImage& full, const KvShape& shape, uint32_t chunk_tokens,
                            const std::vector<Sha1Digest>& names, const std::vector<uint32_t>& todo,
                            const ChunkSink& sink, std::vector<SnapshotChunkRef>* written) {
  const SnapshotHeader& h = full.header();
  const uint32_t header_bytes = ChunkHeaderBytesFor(h.n_layer);
  const uint64_t payload_bytes = ChunkPayloadBytes(shape, chunk_tokens);
  std::vector<StreamedChunk> files(todo.size());
  auto cleanup = [&] {
    for (StreamedChunk& c : files) {
      if (c.file) (void)c.file->Close();
      if (!c.tmp.empty()) (void)RemoveFile(c.tmp);
    }
  };
  Status st = [&]() -> Status {
    for (size_t i = 0; i < todo.size(); ++i) {
      StreamedChunk& c = files[i];
      c.index = todo[i];
      c.final_path = JoinPath(sink.chunk_dir, ChunkFileName(names[c.index]));
      const std::string tmp =
          TempPathFor(c.final_path, fmt::format("{}.{}", sink.tmp_tag, c.index));
      FLASHKV_ASSIGN_OR_RETURN(File f, File::Create(tmp, /*exclusive=*/true));
      c.tmp = tmp;
      // Reserved whole: the files are written a layer at a time, all at once, and would
      // otherwise interleave their extents (best effort; a restore reads each in order).
      (void)::fallocate(f.fd(), 0, 0, off_t(header_bytes + payload_bytes));
      c.file.emplace(std::move(f));
      c.at = header_bytes;
      ChunkHeader& ch = c.header;
      ch.header_bytes = header_bytes;
      ch.name = names[c.index];
      ch.index = c.index;
      ch.chunk_tokens = chunk_tokens;
      ch.n_layer = h.n_layer;
      ch.payload_bytes = payload_bytes;
      ch.layers.resize(h.n_layer);
    }
    for (uint32_t l = 0; l < h.n_layer; ++l) {
      const SnapshotSection* s = h.Find(SnapshotSectionKind::kLayer, l);
      if (s == nullptr) return Internal("image without layer {}", l);
      const LayerRowSpans r = RowSpansOf(shape, int(l), h.n_tokens);
      if (r.ratio == 0) continue;
      if (sink.ready) FLASHKV_RETURN_IF_ERROR(sink.ready(s->offset + s->bytes));
      const auto* base = reinterpret_cast<const float*>(full.data() + s->offset);
      const uint64_t rows = chunk_tokens / uint32_t(r.ratio);
      for (StreamedChunk& c : files) {
        const uint64_t first = uint64_t(c.index) * rows;
        const float* comp = base + r.comp_offset + first * r.comp_row;
        const size_t comp_n = size_t(rows * r.comp_row * sizeof(float));
        FLASHKV_RETURN_IF_ERROR(c.file->WriteAt(c.at, comp, comp_n));
        uint32_t lcrc = Crc32c(0, comp, comp_n);
        c.header.payload_crc32c = Crc32c(c.header.payload_crc32c, comp, comp_n);
        size_t n = comp_n;
        if (r.index_row > 0) {
          const float* idx = base + r.index_offset + first * r.index_row;
          const size_t idx_n = size_t(rows * r.index_row * sizeof(float));
          FLASHKV_RETURN_IF_ERROR(c.file->WriteAt(c.at + comp_n, idx, idx_n));
          lcrc = Crc32c(lcrc, idx, idx_n);
          c.header.payload_crc32c = Crc32c(c.header.payload_crc32c, idx, idx_n);
          n += idx_n;
        }
        c.header.layers[l] = {uint32_t(n), lcrc};
        c.file->StartWriteback(c.at, n);
        c.at += n;
      }
    }
    std::vector<uint8_t> head(header_bytes);
    for (StreamedChunk& c : files) {
      if (c.at != header_bytes + payload_bytes) {
        return Internal("chunk {}: {} payload bytes streamed, {} planned", c.index,
                        c.at - header_bytes, payload_bytes);
      }
      FLASHKV_RETURN_IF_ERROR(c.file->SyncData());
      EncodeChunkHeader(c.header, head.data());
      FLASHKV_RETURN_IF_ERROR(c.file->WriteAt(0, head.data(), head.size()));
      FLASHKV_RETURN_IF_ERROR(c.file->SyncData());
      c.file->DropCache();  // restores read it cold; keep the page cache for others
      FLASHKV_RETURN_IF_ERROR(c.file->Close());
      c.file.reset();
      if (::rename(c.tmp.c_str(), c.final_path.c_str()) != 0) {
        return IoError("rename {} -> {}: {}", c.tmp, c.final_path, std::strerror(errno));
      }
      c.tmp.clear();
      SnapshotChunkRef ref{c.header.name, header_bytes + payload_bytes, c.header.payload_crc32c};
      if (sink.written) sink.written(ref);
      written->push_back(ref);
    }
    return Status::Ok();
  }();
  cleanup();
  return st;
}

}  // namespace

Expected<std::vector<SnapshotChunkRef>> WriteImageChunks(const SnapshotImage& full,
                                                         uint32_t chunk_tokens,
                                                         const ChunkSink& sink) {
  const SnapshotHeader& h = full.header();
  const SnapshotSection* table = h.Find(SnapshotSectionKind::kLayerTable);
  if (table == nullptr) return Internal("image without a layer table");
  const std::string_view table_bytes(reinterpret_cast<const char*>(full.data()) + table->offset,
                                     table->bytes);
  FLASHKV_ASSIGN_OR_RETURN(KvShape shape, snapshot_detail::ShapeOf(h, table_bytes));
  FLASHKV_RETURN_IF_ERROR(CheckChunkTokens(shape, chunk_tokens));
  std::vector<const float*> layers(h.n_layer);
  for (uint32_t l = 0; l < h.n_layer; ++l) {
    const SnapshotSection* s = h.Find(SnapshotSectionKind::kLayer, l);
    if (s == nullptr) return Internal("image without layer {}", l);
    layers[l] = reinterpret_cast<const float*>(full.data() + s->offset);
  }
  const uint32_t n = ChunkCount(h.n_tokens, chunk_tokens);
  const uint64_t payload_bytes = ChunkPayloadBytes(shape, chunk_tokens);
  const uint32_t header_bytes = ChunkHeaderBytesFor(h.n_layer);
  std::unique_ptr<snapshot_detail::AlignedBuffer> buffer;  // header + payload, aligned
  std::vector<SnapshotChunkRef> refs;
  bool wrote = false;
  const std::vector<Sha1Digest> names = ChunkNames(h.identity, chunk_tokens, full.tokens());
  if (sink.ready) {
    // Streamed behind the capture: which chunks are stored decides first, then every
    // missing one is written layer by layer.
    std::vector<std::optional<SnapshotChunkRef>> have(n);
    std::vector<uint32_t> todo;
    for (uint32_t k = 0; k < n; ++k) {
      if (sink.existing) have[k] = sink.existing(names[k]);
      if (!have[k]) todo.push_back(k);
    }
    if (!todo.empty()) {
      FLASHKV_RETURN_IF_ERROR(CreateDirectories(sink.chunk_dir, 0700));
      std::vector<SnapshotChunkRef> fresh;
      FLASHKV_RETURN_IF_ERROR(
          WriteChunksStreaming(full, shape, chunk_tokens, names, todo, sink, &fresh));
      for (size_t i = 0; i < todo.size(); ++i) have[todo[i]] = fresh[i];
      // Every chunk's rename is durable before the manifest that names them is written.
      FLASHKV_RETURN_IF_ERROR(SyncDirectory(sink.chunk_dir));
    }
    for (uint32_t k = 0; k < n; ++k) refs.push_back(*have[k]);
    return refs;
  }
  for (uint32_t k = 0; k < n; ++k) {
    const Sha1Digest& name = names[k];
    if (sink.existing) {
      if (std::optional<SnapshotChunkRef> have = sink.existing(name)) {
        refs.push_back(*have);
        continue;
      }
    }
    if (!buffer) {
      FLASHKV_RETURN_IF_ERROR(CreateDirectories(sink.chunk_dir, 0700));
      buffer = std::make_unique<snapshot_detail::AlignedBuffer>(header_bytes + payload_bytes);
      if (buffer->p == nullptr) {
        return ResourceExhausted("cannot allocate a chunk of {} bytes", payload_bytes);
      }
    }
    uint8_t* payload = buffer->p + header_bytes;
    GatherChunkPayload(shape, h.n_tokens, chunk_tokens, k, layers, payload);
    ChunkHeader ch;
    ch.header_bytes = header_bytes;
    ch.name = name;
    ch.index = k;
    ch.chunk_tokens = chunk_tokens;
    ch.n_layer = h.n_layer;
    ch.payload_bytes = payload_bytes;
    ch.payload_crc32c = Crc32c(0, payload, payload_bytes);
    ch.layers = ChunkLayerCrcs(shape, chunk_tokens, payload);
    FLASHKV_RETURN_IF_ERROR(WriteChunkFile(sink.chunk_dir, ch, buffer->p,
                                           fmt::format("{}.{}", sink.tmp_tag, k), sink.direct));
    wrote = true;
    SnapshotChunkRef ref{name, header_bytes + payload_bytes, ch.payload_crc32c};
    if (sink.written) sink.written(ref);
    refs.push_back(ref);
  }
  // Every chunk's rename is durable before the manifest that names them is written.
  if (wrote) FLASHKV_RETURN_IF_ERROR(SyncDirectory(sink.chunk_dir));
  return refs;
}

}  // namespace flashkv
