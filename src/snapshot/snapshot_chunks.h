// Content-addressed snapshot chunks (format version 2, docs/KV_FORMAT.md "Chunks"): the
// compressed and indexer rows of one fixed token range [k·C, (k+1)·C), every layer, in a
// file of their own, named by a hash of (model fingerprint, numerics, C, token ids
// [0, (k+1)·C)). Those rows never change once their windows close, and they depend on
// nothing but the ids before the range's end, so every snapshot of a sequence with that
// prefix — a continued save, another session with the same system prompt, the cold
// anchor — references the same chunk file instead of writing its bytes again.
//
// Geometry, names, the chunk file (64-byte header + payload), the manifest's chunk list
// ('CHK2' section) and durable chunk writes live here. Must not: decide which chunks to
// keep (DiskCache's index counts references) or touch a KvState (the codec does).
// Above the codec: chunks build on its container (a manifest is a snapshot_codec.h image
// with a chunk list), and the codec includes nothing of chunks, so the scan of an entry
// file, which reads that list, is declared here (ScanSnapshot).
//
// Chunk file: the header (64 fixed bytes, then, from chunk version 3 on, each layer's
// byte count and CRC-32C, padded to a multiple of 64), then the payload: for every layer with a
// compressor, in layer order, its C/m compressed rows (f32, head_dim each) and, for
// indexer layers, its C/m indexer rows (f32, indexer_dim each) — the rows the manifest's
// layer sections leave out. The per-layer CRCs let a restore check and upload one layer's
// rows of a chunk before the rest of the chunk has been read.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "snapshot/cache_names.h"
#include "snapshot/snapshot_codec.h"
#include "snapshot/snapshot_format.h"
#include "state/kv_state.h"
#include "util/file_io.h"
#include "util/sha1.h"
#include "util/status.h"

namespace flashkv {

inline constexpr char kChunkMagic[8] = {'F', 'L', 'K', 'V', 'C', 'H', 'N', 'K'};
// Version 3 (written) adds the per-layer CRCs; version 2 (one payload CRC) is still read.
inline constexpr uint32_t kChunkVersion = 3;
inline constexpr uint32_t kChunkVersionV2 = 2;
// The fixed part of every chunk header (all of a version-2 header).
inline constexpr uint32_t kChunkHeaderBytes = 64;
inline constexpr uint32_t kChunkRefBytes = 32;  // one row of the 'CHK2' section
// Tokens per chunk of a default save: 2,048 tokens of DS4 Flash are ~27 MiB of rows,
// large enough that a restore reads at the disk's rate, small enough that a continued
// save rewrites little.
inline constexpr uint32_t kDefaultChunkTokens = 2048;

// chunk_tokens fits `shape` when it is > 0 and a multiple of every compress ratio (so a
// chunk holds whole windows of every layer); kInvalidArgument otherwise.
Status CheckChunkTokens(const KvShape& shape, uint32_t chunk_tokens);
// Payload bytes of one chunk of `shape`.
uint64_t ChunkPayloadBytes(const KvShape& shape, uint32_t chunk_tokens);
// Header bytes of a version-3 chunk of n_layer layers (64 + 8·n_layer, rounded up to 64),
// and the whole file a save writes for one chunk of `shape`.
uint32_t ChunkHeaderBytesFor(uint32_t n_layer);
uint64_t ChunkFileBytes(const KvShape& shape, uint32_t chunk_tokens);
// Bytes of layer `layer`'s rows in one chunk's payload (0 for a layer without compressor).
uint64_t ChunkLayerBytes(const KvShape& shape, int layer, uint32_t chunk_tokens);
// Chunks a snapshot of n_tokens holds: only whole ranges (⌊n_tokens / C⌋).
inline uint32_t ChunkCount(int64_t n_tokens, uint32_t chunk_tokens) {
  return chunk_tokens == 0 ? 0 : uint32_t(n_tokens / chunk_tokens);
}

// The content names of the whole chunks of `tokens`, a hash chain: name 0 = SHA-1 of
// ("flashkv-chunk-v2", model fingerprint, numerics (16 bytes, NUL-padded), C as u32, the
// ids [0, C) as u32), name k = SHA-1 of (the same prefix fields, name k−1, ids
// [kC, (k+1)C)). Each name commits to every id before its chunk's end, in O(n) for all.
std::vector<Sha1Digest> ChunkNames(const SnapshotIdentity& identity, uint32_t chunk_tokens,
                                   std::span<const int32_t> tokens);
// Checks that `refs` are the names ChunkNames gives `tokens` (a manifest's own ids): a
// manifest naming another sequence's chunk — forged with valid CRCs, which detect damage
// and not forgery — is kCorrupt before any chunk is read.
Status CheckChunkNames(const SnapshotIdentity& identity, uint32_t chunk_tokens,
                       std::span<const int32_t> tokens, std::span<const SnapshotChunkRef> refs);
// The name of chunk `index` of `tokens` (which must hold (index+1)·C ids or more).
Sha1Digest ChunkName(const SnapshotIdentity& identity, uint32_t chunk_tokens, uint32_t index,
                     std::span<const int32_t> tokens);
// The chunk directory of the manifest at `manifest_path` (file names: snapshot/cache_names.h).
std::string ChunkDirForManifest(const std::string& manifest_path);

// Where chunk rows sit inside a layer in KvState::ReadLayer's layout (floats).
struct LayerRowSpans {
  uint64_t comp_offset = 0;   // first compressed row
  uint64_t index_offset = 0;  // first indexer row (indexer layers)
  uint64_t comp_row = 0;      // floats of one compressed row (head_dim), 0: no compressor
  uint64_t index_row = 0;     // floats of one indexer row, 0: no indexer
  int ratio = 0;
};
LayerRowSpans RowSpansOf(const KvShape& shape, int layer, int64_t n_tokens);

// Copies chunk `index`'s rows out of whole layers (ReadLayer layout for n_tokens) into
// `payload` [ChunkPayloadBytes], or back.
void GatherChunkPayload(const KvShape& shape, int64_t n_tokens, uint32_t chunk_tokens,
                        uint32_t index, std::span<const float* const> layers, uint8_t* payload);
void ScatterChunkPayload(const KvShape& shape, int64_t n_tokens, uint32_t chunk_tokens,
                         uint32_t index, const uint8_t* payload, std::span<float* const> layers);
// One row of a version-3 chunk header's layer table: layer l's rows in the payload.
struct ChunkLayerCrc {
  uint32_t bytes = 0;  // ChunkLayerBytes (0: a layer without compressor)
  uint32_t crc32c = 0;
  bool operator==(const ChunkLayerCrc&) const = default;
};
// The layer table of `payload` (ChunkPayloadBytes of shape, chunk_tokens).
std::vector<ChunkLayerCrc> ChunkLayerCrcs(const KvShape& shape, uint32_t chunk_tokens,
                                          const uint8_t* payload);

// The parsed header of a chunk file.
struct ChunkHeader {
  uint32_t version = kChunkVersion;
  uint32_t header_bytes = 0;  // where the payload starts (set by Encode / Parse)
  Sha1Digest name{};
  uint32_t index = 0;
  uint32_t chunk_tokens = 0;
  uint32_t n_layer = 0;
  uint32_t payload_crc32c = 0;
  uint64_t payload_bytes = 0;
  std::vector<ChunkLayerCrc> layers;  // version 3: [n_layer], summing to payload_bytes
};
// Writes a header of h.version (3: `layers` must hold n_layer rows) into `out`,
// which holds ChunkHeaderBytesFor(n_layer) bytes (64 for version 2).
void EncodeChunkHeader(const ChunkHeader& h, uint8_t* out);
// Checks magic, version, header CRC and that the file of `file_size` bytes is exactly
// header + payload; `bytes` holds the file's first `available` bytes (the whole header
// is needed: kCorrupt when shorter). kCorrupt (kUnsupported for another version) naming
// the field. The two-argument form: the whole file is in `bytes`.
Expected<ChunkHeader> ParseChunkHeader(const uint8_t* bytes, uint64_t available,
                                       uint64_t file_size);
inline Expected<ChunkHeader> ParseChunkHeader(const uint8_t* bytes, uint64_t file_size) {
  return ParseChunkHeader(bytes, file_size, file_size);
}
// Reads and parses the header of the chunk file `file` (two reads for version 3).
Expected<ChunkHeader> ReadChunkHeader(const File& file);
// Reads and checks the header of the chunk file `file`, and that it is the chunk `ref`
// names (name, size, payload CRC as recorded by the manifest) and `expect_payload` bytes.
Expected<ChunkHeader> OpenChunkHeader(const File& file, const SnapshotChunkRef& ref,
                                      uint64_t expect_payload);
// Checks a whole chunk file's bytes (header, payload CRC, every layer's CRC) and, when
// `file_name` is a chunk file name, that it names the chunk in the header.
Expected<ChunkHeader> VerifyChunkBytes(std::string_view bytes, std::string_view file_name);
// The largest chunk file anyone reads whole (a chunk of DS4 Flash's default 2,048 tokens
// is ~27 MiB; 65,536 tokens would be ~0.9 GiB): a larger file is damaged, not read.
inline constexpr uint64_t kMaxChunkFileBytes = uint64_t(4) << 30;
// Reads a whole chunk file (at most kMaxChunkFileBytes) and checks it (VerifyChunkBytes).
Expected<ChunkHeader> VerifyChunkFile(const std::string& path);

// The 'CHK2' section bytes of `refs`, and back (kCorrupt unless whole rows, `count` of
// them).
std::string EncodeChunkRefs(std::span<const SnapshotChunkRef> refs);
Expected<std::vector<SnapshotChunkRef>> DecodeChunkRefs(std::string_view bytes, uint32_t count);
// The chunk list of a parsed manifest header (empty for version 1 or no chunks): the
// 'CHK2' section must be its first extension, CRC-checked, with n_chunks rows.
Expected<std::vector<SnapshotChunkRef>> ReadSnapshotChunkRefs(const ByteSource& source,
                                                              const SnapshotHeader& header);
inline Expected<std::vector<SnapshotChunkRef>> ReadSnapshotChunkRefs(const File& file,
                                                                     const SnapshotHeader& header) {
  return ReadSnapshotChunkRefs(FileSource(file), header);
}

// What a cache scan needs of a file without reading its payload: the header, the text
// and the token ids (both CRC-checked), and the layer table checked against the layer
// section sizes. Errors as ReadSnapshotHeader.
// Here, not in snapshot_codec.h: it reads the chunk list, and the codec knows no chunks.
struct ScannedSnapshot {
  SnapshotHeader header;
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<SnapshotChunkRef> chunks;  // version 2: the chunks it references, in order
};
Expected<ScannedSnapshot> ScanSnapshot(const ByteSource& source);
inline Expected<ScannedSnapshot> ScanSnapshotFile(const File& file) {
  return ScanSnapshot(FileSource(file));
}

// Writes one chunk file durably enough to be named by a manifest: a temp file beside it
// (the payload first, the header's 4 KiB last, through O_DIRECT where the filesystem has
// it and `direct`), fdatasync, rename. `file` is the whole file, header bytes included
// (written here; the payload at header.header_bytes), 4 KiB-aligned. The caller fsyncs the chunk
// directory once before writing the manifest. `tmp_tag` makes the temp name unique
// ("<name>.kvc.tmp.<tag>").
Status WriteChunkFile(const std::string& chunk_dir, const ChunkHeader& header, uint8_t* file,
                      const std::string& tmp_tag, bool direct);

// Splits a captured whole-state image (no chunks) into chunk files and returns its
// manifest's chunk list: for each whole chunk, `existing(name)` says whether a chunk of
// that name is already stored (then it is referenced, not written; its ref says the
// stored file's size and CRC) — otherwise it is written into `chunk_dir` and
// `written(ref)` is told. One fsync of chunk_dir at the end when anything was written.
// Without `ready` the image's layers must be final, and each chunk is gathered and
// written whole (WriteChunkFile); with it, the image is still being captured
// (`ready(end)` blocks until bytes [0, end) are final) and the chunk files are streamed
// layer by layer behind the capture, all of them at once (ordinary writes).
struct ChunkSink {
  std::string chunk_dir;
  std::string tmp_tag;
  bool direct = true;  // O_DIRECT writes where possible (kept out of the page cache)
  std::function<Status(uint64_t end)> ready;
  std::function<std::optional<SnapshotChunkRef>(const Sha1Digest&)> existing;
  std::function<void(const SnapshotChunkRef&)> written;
};
Expected<std::vector<SnapshotChunkRef>> WriteImageChunks(const SnapshotImage& full,
                                                         uint32_t chunk_tokens,
                                                         const ChunkSink& sink);

// A version-2 save of a captured whole-state image in one call, so that a writer walks
// the format once: its chunks (WriteImageChunks through `sink`, durable before anything
// names them), then — once the whole image is final (sink.ready) — the manifest cut from
// it (MakeManifestImage), for the caller to write where it wants (a file: StreamSnapshotImage).
struct ChunkedSnapshot {
  std::vector<SnapshotChunkRef> chunks;  // the manifest's chunk list, in order
  SnapshotImage manifest;                // sealed when written (StreamSnapshotImage seals)
};
Expected<ChunkedSnapshot> WriteChunkedSnapshot(const SnapshotImage& full, uint32_t chunk_tokens,
                                               const ChunkSink& sink);

}  // namespace flashkv
