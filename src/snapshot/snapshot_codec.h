// Snapshot encode/decode: a KvState plus its token ids, next-token logits, rendered text
// and optional extension blobs ⇄ the bytes of a `.kv` file (snapshot_format.h,
// docs/KV_FORMAT.md). Must not: pick file names, budgets or policy (DiskCache does), or
// run the model.
//
// Saving is split so that decoding is never blocked by the disk: CaptureSnapshot copies
// the state out of the backend (one Backend::Read batch per layer into one host image laid
// out exactly as the file) on the caller's thread; SealSnapshot (CRCs) and
// WriteSnapshotImage run later on an I/O thread. The disk cache goes further and writes
// while it captures: PrepareSnapshot lays the image out, CaptureSnapshotLayers copies the
// layers and reports how much of the image is final, and StreamSnapshotImage on the I/O
// thread CRCs and writes each chunk as soon as it is, so the file is on its way to the
// disk before the copy has finished. Loading streams the file with plain
// large read()s into staging buffers on a reader thread, which also computes the CRCs,
// while the caller's thread writes each layer into the backend: the header, shape and
// identity are validated before any byte reaches the KvState, and a CRC or truncation
// error found mid-payload clears the state (token count 0), so a damaged file can never
// leave a half-loaded state that looks valid.
//
// Restores are bit-exact: each section is stored at the state's own precision (f32) in
// logical order, and the model's forward pass reads nothing else.
//
// Threading: the functions share no state; a KvState must not be used by another thread
// while it is captured or loaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "snapshot/snapshot_format.h"
#include "state/kv_state.h"
#include "util/byte_io.h"
#include "util/file_io.h"
#include "util/status.h"

namespace flashkv {

// An opaque blob stored beside the state. Tags are the writer's (four ASCII bytes,
// SnapshotTag("ABC1")), except kv's own kSnapshotTailTag and kSnapshotReplayTag.
struct SnapshotExtension {
  uint32_t tag = 0;
  std::string bytes;
  bool operator==(const SnapshotExtension&) const = default;
};

// What goes into a snapshot besides the KvState: its resume key (tokens, text, tail;
// kv/resume_point.h) and next-token logits, the tool replay map, the writer's extensions.
struct SnapshotContent {
  std::span<const int32_t> tokens;  // [n_tokens] == state.n_tokens() ids, all >= 0
  std::span<const float> logits;    // [n_vocab] next-token logits after tokens
  std::string_view text;            // rendered bytes the snapshot is filed under
  std::span<const int32_t> tail;    // ids `text` covers beyond tokens, all >= 0
  std::string_view replay;          // tool replay map bytes (empty: none)
  SaveReason reason = SaveReason::kUnknown;
  std::vector<SnapshotExtension> extensions;
};

// The extension sections a snapshot of `content` holds, in file order: its tail and
// replay map (when non-empty) in kv's sections, then the writer's extensions.
std::vector<SnapshotExtension> SnapshotExtensionsOf(const SnapshotContent& content);
// Takes kv's own sections out of `extensions` (as read from a file) into `tail` and
// `replay`; kCorrupt when the tail is not whole u32 ids >= 0.
Status TakeKvSections(std::vector<SnapshotExtension>* extensions, std::vector<int32_t>* tail,
                      std::string* replay);

struct SnapshotWriteOptions {
  size_t chunk_bytes = size_t(16) << 20;  // one pwrite; rounded up to 4 KiB
  int depth = 2;                          // chunks queued ahead of the I/O thread
  bool direct = true;                     // O_DIRECT where the filesystem has it
  // Version 2: stream the chunk files behind the capture, layer by layer, all of them at
  // once (true), or wait for the whole capture and write each chunk file whole, one
  // after another (false: every file's blocks are written in one run).
  bool stream_chunks = true;
};

class SnapshotImage;
// The version-2 manifest of `full` (a captured whole-state image, snapshot/snapshot_manifest.cpp).
Expected<SnapshotImage> MakeManifestImage(const SnapshotImage& full, uint32_t chunk_tokens,
                                          std::span<const SnapshotChunkRef> refs);

// A snapshot in host memory, byte for byte its file. Move-only (it may be gigabytes).
class SnapshotImage {
 public:
  SnapshotImage(SnapshotImage&&) noexcept = default;
  SnapshotImage& operator=(SnapshotImage&&) noexcept = default;

  const SnapshotHeader& header() const { return header_; }
  const uint8_t* data() const { return bytes_.get(); }
  uint64_t size() const { return size_; }
  uint64_t capacity() const { return capacity_; }  // bytes of the buffer (>= size())
  std::span<const int32_t> tokens() const;
  std::string_view text() const;
  // SHA1 of the token ids as little-endian u32: the cache key.
  const Sha1Digest& key() const { return key_; }
  bool sealed() const { return sealed_; }

  // Page-locks the whole buffer through `backend` (Backend::PinHost), so copies between it
  // and the device skip the staging buffers and may run asynchronously. The buffer stays
  // locked while it lives — also when a later image takes it over through `reuse` — and is
  // unpinned just before it is freed, so `backend` must outlive it. A no-op when already
  // pinned; an error leaves the image usable, only copied through staging.
  Status Pin(Backend& backend);
  bool pinned() const { return bytes_.get_deleter().pinned_by != nullptr; }

  // An empty image that only holds a buffer of `capacity` bytes with every page touched,
  // to be handed to PrepareSnapshot as `reuse` (kv/pinned_standby.h makes them ahead of
  // need). kResourceExhausted when the memory is not there.
  static Expected<SnapshotImage> Reserve(uint64_t capacity);

 private:
  friend Expected<SnapshotImage> PrepareSnapshot(const KvState&, const SnapshotIdentity&,
                                                 const SnapshotContent&, int64_t, SnapshotImage*);
  friend Status CaptureSnapshotLayers(const KvState&, SnapshotImage&,
                                      const std::function<void(uint64_t)>&);
  friend Expected<struct PendingCapture> CaptureSnapshotLayersAsync(const KvState&, SnapshotImage&);
  friend void SealSnapshot(SnapshotImage&);
  friend Status StreamSnapshotImage(SnapshotImage&, File&, const std::function<Status(uint64_t)>&,
                                    const SnapshotWriteOptions&);
  friend Expected<SnapshotImage> MakeManifestImage(const SnapshotImage&, uint32_t,
                                                   std::span<const SnapshotChunkRef>);
  SnapshotImage() = default;

  SnapshotHeader header_;
  struct FreeBytes {
    // No member initializer: it would keep the type from being default-constructible
    // inside the still-incomplete SnapshotImage (which unique_ptr requires).
    FreeBytes() noexcept : pinned_by(nullptr) {}
    Backend* pinned_by;  // unpins before freeing
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t[], FreeBytes> bytes_;  // [size_], the whole file, page-aligned
  uint64_t size_ = 0;
  uint64_t capacity_ = 0;  // bytes allocated (>= size_ when a buffer was reused)
  Sha1Digest key_{};
  bool sealed_ = false;
};

// The SHA1 of token ids, each hashed as a little-endian u32 (the file name's key).
Sha1Digest TokensKey(std::span<const int32_t> tokens);

// Copies `state` and `content` into an image (no CRCs yet). Checks the content against
// the state (token count, ids >= 0, text <= 1 GiB, identity.numerics <= 15 bytes).
// `reuse`: an image whose buffer may be taken over when large enough (its pages are
// already mapped, which makes the copy several times faster than into fresh memory).
Expected<SnapshotImage> CaptureSnapshot(const KvState& state, const SnapshotIdentity& identity,
                                        const SnapshotContent& content, int64_t now_ms,
                                        SnapshotImage* reuse = nullptr);
// Computes the section CRCs and writes the section table and header into the image.
void SealSnapshot(SnapshotImage& image);
// Writes a sealed image to `sink` (a file from its current position, a string in memory:
// util/byte_io.h), the one writer of a sealed image's bytes, in one Write.
Status WriteSnapshotImage(const SnapshotImage& image, ByteSink& sink);
inline Status WriteSnapshotImage(const SnapshotImage& image, File& file) {
  FileSink sink(file);
  return WriteSnapshotImage(image, sink);
}

// CaptureSnapshot in two steps, for writing while capturing. PrepareSnapshot checks the
// content as CaptureSnapshot does, lays the image out and fills everything but the layer
// sections; CaptureSnapshotLayers then copies the layers in file order and after each one
// calls on_ready(n): the image's first n bytes are final (n == size() after the last
// layer, and that call is its last touch of the image).
Expected<SnapshotImage> PrepareSnapshot(const KvState& state, const SnapshotIdentity& identity,
                                        const SnapshotContent& content, int64_t now_ms,
                                        SnapshotImage* reuse = nullptr);
Status CaptureSnapshotLayers(const KvState& state, SnapshotImage& image,
                             const std::function<void(uint64_t ready_bytes)>& on_ready = {});

// CaptureSnapshotLayers without making the caller wait for the bulk of the copy: each
// layer's mutable sections (window ring, frontiers) are copied now, and the rows of closed
// compressor windows — which later tokens never rewrite — are queued on the backend's
// asynchronous copy path (Backend::ReadManyAsync) and land in the image while the caller
// goes on decoding. The state holds those copies (KvState::HoldForCopy): anything that
// could rewrite the rows waits for them first. Layer i's bytes, and everything before the
// next section, are final once `layers[i].ticket` completes (Wait). Pin the image first:
// copies into pageable memory are made synchronously (still correct, not overlapped).
struct PendingCapture {
  struct Layer {
    uint64_t start = 0;      // first byte of the layer's section
    uint64_t ready_end = 0;  // bytes [0, ready_end) are final once the ticket completes
    uint64_t ticket = 0;     // of Backend::ReadManyAsync (0: nothing was deferred)
  };
  std::vector<Layer> layers;
  Backend* backend = nullptr;
  uint64_t deferred_bytes = 0;  // bytes left to the asynchronous copies

  // Waits for every layer that starts before byte `end` (all of them by default).
  Status Wait(uint64_t end = UINT64_MAX) const;
};
Expected<PendingCapture> CaptureSnapshotLayersAsync(const KvState& state, SnapshotImage& image);

// Writes a prepared image to `file` (offset 0 on) and seals it, possibly while its layers
// are still being captured on another thread: before touching bytes [0, end) it calls
// wait_ready(end), which blocks until they are final (an error, e.g. a failed capture,
// aborts the write). Chunks are CRC'd on the calling thread while a ChunkedFileWriter
// writes the previous ones (O_DIRECT where possible: no page-cache copy); the first
// chunk, with the header and section table, goes last, so an unfinished file never has a
// valid header. Does not sync: the caller fdatasyncs `file` before the rename.
Status StreamSnapshotImage(SnapshotImage& image, File& file,
                           const std::function<Status(uint64_t end)>& wait_ready,
                           const SnapshotWriteOptions& options = {});

// Bytes of a snapshot file, from the shape alone (budget admission before capture).
uint64_t SnapshotFileBytes(const KvShape& shape, int64_t n_tokens, int64_t n_vocab,
                           size_t text_bytes, std::span<const SnapshotExtension> extensions);
// The same for the version-2 manifest with `chunk_tokens` per chunk (without its chunks).
uint64_t ManifestFileBytes(const KvShape& shape, int64_t n_tokens, int64_t n_vocab,
                           size_t text_bytes, std::span<const SnapshotExtension> extensions,
                           uint32_t chunk_tokens);

// Parses and checks the fixed header and the section table of a file of `file_size`
// bytes: magic, version, header and table CRCs, every section inside the file, in order
// and of the size the shape fields imply, file size as recorded (truncation). Errors are
// kCorrupt or kUnsupported (another version) and name the field or section. The bytes may
// be a file or memory (util/byte_io.h: a fetched value is parsed as its file would be).
Expected<SnapshotHeader> ReadSnapshotHeader(const ByteSource& source);
inline Expected<SnapshotHeader> ReadSnapshotHeader(const File& file) {
  return ReadSnapshotHeader(FileSource(file));
}
// Reads one section whole and checks its CRC.
Expected<std::string> ReadSnapshotSection(const ByteSource& source, const SnapshotSection& section);
inline Expected<std::string> ReadSnapshotSection(const File& file, const SnapshotSection& section) {
  return ReadSnapshotSection(FileSource(file), section);
}
// The token ids of a tokens section's bytes.
std::vector<int32_t> DecodeSnapshotTokens(std::string_view bytes);

// Checks that a snapshot may be restored into a state of `shape`: identity equal,
// head_dim / n_swa / indexer_dim / layer count and every layer's compressor kind equal
// (layer_table: the kLayerTable section's bytes), n_tokens <= shape.ctx_size. The error
// (kFailedPrecondition) names the first mismatch.
Status CheckSnapshotCompatible(const SnapshotHeader& header, std::string_view layer_table,
                               const SnapshotIdentity& identity, const KvShape& shape);

struct SnapshotLoadOptions {
  size_t chunk_bytes = size_t(16) << 20;  // one buffered read() (and staging buffer)
  int staging_buffers = 4;                // read-ahead depth of the reader threads (at least)
  // Reader threads of a version-2 restore (1–8), each streaming a different chunk file
  // with one read() in flight; an unchunked file is one file, one reader. The device
  // host's disk reads files one after another at about half the rate of one file, and
  // 2–4 at once at its full rate (docs/PERFORMANCE.md, "v2 restores on the device host's
  // disk").
  int readers = 4;
  // Chunk files through O_DIRECT where the filesystem has it (kept out of the page cache,
  // as the saves are), in reads of direct_read_bytes; false: through the page cache.
  bool direct = true;
  size_t direct_read_bytes = size_t(1) << 20;
  // n_vocab the caller's logits span must hold; 0: take the file's.
  int64_t expect_vocab = 0;
  // When set, the file and every chunk it names must be owned by this uid (the disk cache
  // sets its effective uid: File::OpenRead); kCorrupt otherwise.
  std::optional<uint32_t> owner_uid;
};

struct LoadedSnapshot {
  SnapshotHeader header;
  std::vector<int32_t> tokens;  // [n_tokens]
  std::vector<float> logits;    // [n_vocab]
  std::string text;
  std::vector<int32_t> tail;                  // kSnapshotTailTag, decoded
  std::string replay;                         // kSnapshotReplayTag
  std::vector<SnapshotExtension> extensions;  // the writer's own
  uint64_t bytes_read = 0;
  uint64_t direct_bytes = 0;  // of bytes_read, read through O_DIRECT
  // Time from the open file to the first streamed read: the header, the small sections,
  // the checks and (version 2) opening and checking every chunk's header.
  double prepare_ms = 0;
};

// Restores the snapshot at `path` into `state` (any context >= its token count; previous
// contents are replaced). On error `state` is cleared and the Status says what was wrong:
// kFailedPrecondition for another model / shape, kCorrupt for damage (CRC, truncation,
// malformed), kIoError for the OS.
Expected<LoadedSnapshot> LoadSnapshot(const std::string& path, const SnapshotIdentity& identity,
                                      KvState& state, const SnapshotLoadOptions& options = {});

// Reads every section of the file and checks every CRC and size without a state.
Expected<SnapshotHeader> VerifySnapshotFile(const std::string& path);

// Rewrites only the header's stats block (last-used time, hit count) in place.
Status WriteSnapshotStats(File& file, int64_t last_used_ms, uint32_t hit_count);

}  // namespace flashkv
