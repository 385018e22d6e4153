// The `.kv` snapshot file format, versions 1 and 2: constants, the save-reason enum and the
// parsed header (docs/KV_FORMAT.md is the byte-level spec). Every number is little-endian.
// Must not: do I/O (snapshot_codec.h reads and writes files) or know the model (the
// identity is given by the caller).
//
// Layout, in file order:
//   [0, 256)        fixed header: magic, version, identity (model fingerprint + numerics
//                   name), shape fields, token count, context size, save reason, flags,
//                   created time, section count, file size, header CRC32C; then a small
//                   "stats" block (last-used time, hit count) with its own CRC, the only
//                   bytes ever rewritten in place (a touch never rewrites the payload);
//   [256, ...)      section table: one 32-byte row per section (kind, tag, offset, bytes,
//                   CRC32C of the section bytes);
//   sections        64-byte aligned, in table order: text, tokens, logits, layer table,
//                   one per layer, then optional opaque extension blobs.
// Version 2 (a manifest) has the same container; its layer sections leave out the
// compressed and indexer rows of the first n_chunks · chunk_tokens tokens, which live in
// content-addressed chunk files (snapshot/snapshot_chunks.h) that its 'CHK2' section lists.
// Format strings written here are frozen: a change bumps kSnapshotVersion.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/sha1.h"

namespace flashkv {

inline constexpr char kSnapshotMagic[8] = {'F', 'L', 'A', 'S', 'H', 'K', 'V', '\x1a'};
// Every snapshot written is version 2 (a manifest; with no chunks it holds the whole state).
// Version 1 (whole-state files of earlier builds) is read, never written: docs/KV_FORMAT.md.
inline constexpr uint32_t kSnapshotVersion = 2;
inline constexpr uint32_t kSnapshotVersionV1 = 1;
inline constexpr uint32_t kSnapshotHeaderBytes = 256;
inline constexpr uint32_t kSnapshotSectionRowBytes = 32;
inline constexpr uint32_t kSnapshotSectionAlign = 64;

// Why a snapshot was written (docs/SERVER.md §3.1). Values are stored; never renumber.
enum class SaveReason : uint8_t {
  kUnknown = 0,
  kCold = 1,       // after (or during) a long first prefill, at a stable boundary
  kContinued = 2,  // at an absolute aligned frontier of a growing session
  kEvict = 3,      // before an unrelated request replaced the live session
  kShutdown = 4,   // on clean exit
  kManual = 5,     // asked for explicitly (tools, tests)
};
std::string_view SaveReasonName(SaveReason r);  // "cold", "continued", ...
SaveReason SaveReasonFromByte(uint8_t b);       // unknown values read as kUnknown

enum class SnapshotSectionKind : uint32_t {
  kText = 1,        // rendered prompt bytes of the cached tokens (UTF-8, not terminated)
  kTokens = 2,      // u32[n_tokens]
  kLogits = 3,      // f32[n_vocab], next-token logits after the last token
  kLayerTable = 4,  // per layer: u32 compress_ratio, u8 overlap, u8 indexer, u16 0
  kLayer = 5,       // tag = layer index; the layer's KvSections in enum order, f32
  kExtension = 6,   // tag = caller's id (e.g. 'KTM1'); opaque bytes
};

// Which model and numerics produced a state. Two snapshots are interchangeable only when
// both fields are equal; anything else is "another model" and is never loaded.
struct SnapshotIdentity {
  Sha1Digest model{};    // ModelFingerprint() of the GGUF
  std::string numerics;  // e.g. "official/q8"; at most 15 bytes
  bool operator==(const SnapshotIdentity&) const = default;
};

struct SnapshotSection {
  SnapshotSectionKind kind;
  uint32_t tag = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
};

// Everything the header and the section table say, validated for internal consistency
// (not yet against a model).
struct SnapshotHeader {
  uint32_t version = kSnapshotVersion;
  SnapshotIdentity identity;
  uint32_t n_layer = 0;
  uint32_t head_dim = 0;
  uint32_t n_swa = 0;
  uint32_t indexer_dim = 0;
  uint32_t n_vocab = 0;
  uint32_t n_tokens = 0;
  uint32_t ctx_size = 0;  // of the state it was saved from (informational)
  SaveReason reason = SaveReason::kUnknown;
  uint32_t flags = 0;
  int64_t created_ms = 0;  // Unix time, milliseconds
  uint64_t file_bytes = 0;
  // Version 2: the first n_chunks · chunk_tokens tokens' compressed and indexer rows are
  // in chunk files, not in the layer sections (both 0 in version 1 and in a manifest without
  // chunks).
  uint32_t chunk_tokens = 0;
  uint32_t n_chunks = 0;
  uint64_t chunked_tokens() const { return uint64_t(chunk_tokens) * n_chunks; }
  // The stats block; `stats_ok` false when its CRC failed (then hits 0, last used =
  // created: a torn touch costs the history, never the entry).
  int64_t last_used_ms = 0;
  uint32_t hit_count = 0;
  bool stats_ok = true;
  std::vector<SnapshotSection> sections;

  const SnapshotSection* Find(SnapshotSectionKind kind, uint32_t tag = 0) const;
};

inline constexpr uint32_t kSnapshotFlagHasExtensions = 1u << 0;

// Four ASCII bytes as an extension tag ('KTM1' is the u32 0x314d544b).
constexpr uint32_t SnapshotTag(const char (&s)[5]) {
  return uint32_t(uint8_t(s[0])) | uint32_t(uint8_t(s[1])) << 8 | uint32_t(uint8_t(s[2])) << 16 |
         uint32_t(uint8_t(s[3])) << 24;
}
// The two extension sections kv itself defines (docs/KV_FORMAT.md), written before the
// writer's own extensions and never accepted as one:
// the resume tail — u32 ids the text covers beyond the tokens (kv/resume_point.h);
inline constexpr uint32_t kSnapshotTailTag = SnapshotTag("VKA1");
// the tool replay map — opaque bytes the server's ToolReplayMap encodes;
inline constexpr uint32_t kSnapshotReplayTag = SnapshotTag("KTM1");
// version 2 only, always the first extension: the chunk list (snapshot/snapshot_chunks.h).
inline constexpr uint32_t kSnapshotChunksTag = SnapshotTag("CHK2");

// One chunk a version-2 manifest references (a 32-byte row of its 'CHK2' section):
// the chunk's content name, its file's size and the CRC-32C of its payload.
struct SnapshotChunkRef {
  Sha1Digest name{};
  uint64_t file_bytes = 0;
  uint32_t payload_crc32c = 0;
  bool operator==(const SnapshotChunkRef&) const = default;
};

// Offsets of the stats block inside the header, for in-place touches.
inline constexpr uint32_t kSnapshotStatsOffset = 224;
inline constexpr uint32_t kSnapshotStatsBytes = 32;

}  // namespace flashkv
