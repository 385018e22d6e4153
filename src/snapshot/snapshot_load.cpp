// Loading snapshots (versions 1 and 2) and verifying them: the streamed restore into a
// KvState (snapshot/snapshot_codec.h LoadSnapshot) and the full CRC pass (VerifySnapshotFile).
#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "snapshot/snapshot_chunks.h"
#include "snapshot/snapshot_codec.h"
#include "snapshot/snapshot_codec_internal.h"
#include "util/crc32c.h"

namespace flashkv {

using namespace snapshot_detail;

namespace {

// A checked part of a piece: one layer's rows of a version-3 chunk, or (layer −1) a
// version-2 chunk's whole payload.
struct StreamBlock {
  uint64_t at = 0;  // offset inside the piece
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
  int layer = -1;
};

// One byte range the streamer reads: a layer section of the snapshot file, or layers of
// a chunk file's payload (or, read through O_DIRECT, a whole chunk file), with the
// CRC(s) it must have.
struct StreamPiece {
  const File* file = nullptr;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  uint32_t crc32c = 0;  // of the whole piece, when `blocks` is empty
  std::string what;     // for the error message ("layer 3 section", "chunk 2 (ab12…)")
  int64_t chunk = -1;   // chunk index, −1 for a layer section
  int layer = -1;       // the layer of a layer section
  std::vector<StreamBlock> blocks;
  // The file's reader: every piece of one group (one file) is read by the same reader
  // thread, in order, so R readers stream R different files at once.
  size_t group = 0;
  // `file` is in O_DIRECT mode: the piece is a whole chunk file from offset 0, read in
  // aligned reads of SnapshotLoadOptions::direct_read_bytes, the last one rounded up to a
  // block (false: through the page cache).
  bool direct = false;
  // Asked of the kernel (readahead) as this piece is read: the next chunk file, so a new
  // file's reads need not ramp up from a cold readahead window (one reader only).
  const File* prefetch = nullptr;
  uint64_t prefetch_offset = 0, prefetch_bytes = 0;
};

// Streams the pieces through staging buffers: reader threads only issue the read()s (so
// the disk always has requests in flight), reader r the pieces of every group g with
// g mod R = r, in order; the calling thread takes the filled buffers as they come — in
// any order, so no reader waits for a slow file ahead of it — checks each piece's CRC (or
// each block's, handing a block on as soon as its own CRC holds) and hands it on (to
// KvState::WriteLayer, or the chunk rows to KvState::WriteRows; every piece writes rows
// no other piece writes). Buffers are sized for the largest piece (one layer section
// must be contiguous on the host); R + 2 of them (at least staging_buffers) let every
// reader fill one while the consumer works on another.
//
// Why several files at once: the device host's disk (docs/PERFORMANCE.md, "v2 restores
// on the device host's disk") reads a run of separate files one after another at about
// half the rate of one file of the same bytes, and at the rate of one file when 2–4 are
// read at once.
class LayerStreamer {
 public:
  LayerStreamer(const std::vector<StreamPiece>& layers, const SnapshotLoadOptions& options)
      : layers_(layers),
        chunk_(std::max<size_t>(options.chunk_bytes, 4096)),
        direct_step_(
            size_t(AlignUp(std::max<size_t>(options.direct_read_bytes, 1), File::kDirectAlign))) {
    uint64_t biggest = 0;
    size_t groups = 0;
    for (size_t i = 0; i < layers_.size(); ++i) {
      const StreamPiece& s = layers_[i];
      biggest = std::max(biggest, s.direct ? AlignUp(s.bytes, File::kDirectAlign) : s.bytes);
      if (i == 0 || layers_[i - 1].group != s.group) ++groups;
    }
    readers_ = std::clamp(std::min<int>(options.readers, int(std::max<size_t>(groups, 1))), 1, 8);
    const int n = std::clamp(std::max(options.staging_buffers, readers_ + 2), 1, 16);
    for (int i = 0; i < n; ++i) {
      bufs_.push_back(std::make_unique<AlignedBuffer>(biggest));
      free_.push_back(bufs_.back()->p);
    }
  }

  ~LayerStreamer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : readers_threads_) t.join();
  }

  // Calls consume(piece_index, block (nullptr for a whole piece), bytes) for every piece
  // (every block of it), pieces in the order their reads complete; stops at the first
  // error.
  template <typename Fn>
  Status Run(Fn&& consume) {
    for (const auto& b : bufs_) {
      if (b->p == nullptr) return ResourceExhausted("cannot allocate the snapshot staging buffers");
    }
    for (int r = 0; r < readers_; ++r) readers_threads_.emplace_back([this, r] { ReaderLoop(r); });
    for (size_t done = 0; done < layers_.size(); ++done) {
      Filled f;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !filled_.empty() || !reader_status_.ok(); });
        if (!reader_status_.ok()) return reader_status_;
        f = filled_.front();
        filled_.pop_front();
      }
      // The CRC runs here, not on the reader, so the next read() is already in flight.
      const StreamPiece& sec = layers_[f.piece];
      const uint8_t* p = f.buf;
      Status st;
      if (sec.blocks.empty()) {
        if (Crc32c(0, p, sec.bytes) != sec.crc32c) {
          return Corrupt("{} checksum mismatch", sec.what);
        }
        st = consume(f.piece, static_cast<const StreamBlock*>(nullptr), p);
      } else {
        for (const StreamBlock& b : sec.blocks) {
          if (Crc32c(0, p + b.at, b.bytes) != b.crc32c) {
            return b.layer < 0 ? Corrupt("{} checksum mismatch", sec.what)
                               : Corrupt("{} layer {} checksum mismatch", sec.what, b.layer);
          }
          st = consume(f.piece, &b, p + b.at);
          if (!st.ok()) break;
        }
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        free_.push_back(f.buf);
      }
      cv_.notify_all();
      if (!st.ok()) return st;
    }
    return Status::Ok();
  }

  uint64_t bytes_read() const { return bytes_read_; }
  uint64_t direct_bytes() const { return direct_bytes_; }

 private:
  struct Filled {
    size_t piece = 0;
    uint8_t* buf = nullptr;
  };

  // Reads piece s through its O_DIRECT descriptor in reads of direct_step_ (one at a
  // time: the readers on the other files keep the disk's queue filled).
  Status ReadDirect(const StreamPiece& s, uint8_t* dst) const {
    const uint64_t want = AlignUp(s.bytes, File::kDirectAlign);
    uint64_t done = 0;
    while (done < want) {
      const size_t n = size_t(std::min<uint64_t>(direct_step_, want - done));
      FLASHKV_ASSIGN_OR_RETURN(size_t got, s.file->ReadDirectAt(s.offset + done, dst + done, n));
      done += got;
      if (got < n) break;
    }
    if (done < s.bytes) {
      return Corrupt("{}: truncated: wanted {} bytes at offset {}, the file ends at {}",
                     s.file->path(), s.bytes, s.offset, s.offset + done);
    }
    return Status::Ok();
  }

  // Reader r reads the pieces of groups r, r + R, r + 2R, …: R files in flight.
  void ReaderLoop(int r) {
    for (size_t i = 0; i < layers_.size(); ++i) {
      const StreamPiece& s = layers_[i];
      if (s.group % size_t(readers_) != size_t(r)) continue;
      uint8_t* dst = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !free_.empty(); });
        if (stop_) return;
        dst = free_.back();
        free_.pop_back();
      }
      if (s.prefetch != nullptr && readers_ == 1) {
        ::posix_fadvise(s.prefetch->fd(), off_t(s.prefetch_offset), off_t(s.prefetch_bytes),
                        POSIX_FADV_WILLNEED);
      }
      Status st;
      if (s.direct) {
        st = ReadDirect(s, dst);
      } else {
        for (uint64_t done = 0; done < s.bytes && st.ok();) {
          const size_t n = size_t(std::min<uint64_t>(chunk_, s.bytes - done));
          st = s.file->ReadAt(s.offset + done, dst + done, n);
          done += n;
        }
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!st.ok()) {
          if (reader_status_.ok()) reader_status_ = st;
        } else {
          filled_.push_back({i, dst});
          bytes_read_ += s.bytes;
          if (s.direct) direct_bytes_ += s.bytes;
        }
      }
      cv_.notify_all();
      if (!st.ok()) return;
    }
  }

  const std::vector<StreamPiece>& layers_;
  const size_t chunk_;
  const size_t direct_step_;
  int readers_ = 1;
  std::vector<std::unique_ptr<AlignedBuffer>> bufs_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint8_t*> free_;  // buffers no piece holds
  std::deque<Filled> filled_;   // read, CRC not yet checked, in the order reads completed
  Status reader_status_;
  bool stop_ = false;
  uint64_t bytes_read_ = 0;
  uint64_t direct_bytes_ = 0;
  std::vector<std::thread> readers_threads_;
};

// Chunk files read through O_DIRECT are one piece each, so up to this size (a default
// 2,048-token chunk of DS4 Flash is ~27.5 MB); larger ones are read in layer pieces
// through the page cache.
constexpr uint64_t kMaxDirectPiece = uint64_t(64) << 20;

// The reads of chunk k. Through O_DIRECT (`direct`, the file small enough): the whole
// file, header included, as one piece read from offset 0 — every layer a block with its
// own CRC. Otherwise the payload: version 3 in pieces of whole layers of at most
// `piece_bytes` (SnapshotLoadOptions::chunk_bytes, one read(); a layer larger than that is
// a piece of its own) — large sequential reads, while the upload of one piece's layers
// overlaps the next read — each layer a block with its own CRC; version 2 as one piece,
// one block over every layer. All of them group k (one reader).
void AddChunkPieces(const File& file, bool direct, const ChunkHeader& ch, size_t k,
                    const std::string& what, uint64_t piece_bytes, std::vector<StreamPiece>* out) {
  auto piece = [&](uint64_t offset) {
    StreamPiece p{&file, offset, 0, 0, what, int64_t(k), -1, {}};
    p.group = k;
    return p;
  };
  const uint64_t file_bytes = ch.header_bytes + ch.payload_bytes;
  if (direct) {
    StreamPiece p = piece(0);
    p.direct = direct;
    p.bytes = file_bytes;
    if (ch.layers.empty()) {
      p.blocks.push_back({ch.header_bytes, ch.payload_bytes, ch.payload_crc32c, -1});
    } else {
      uint64_t at = ch.header_bytes;
      for (size_t l = 0; l < ch.layers.size(); ++l) {
        if (ch.layers[l].bytes == 0) continue;
        p.blocks.push_back({at, ch.layers[l].bytes, ch.layers[l].crc32c, int(l)});
        at += ch.layers[l].bytes;
      }
    }
    out->push_back(std::move(p));
    return;
  }
  if (ch.layers.empty()) {
    StreamPiece p = piece(ch.header_bytes);
    p.bytes = ch.payload_bytes;
    p.blocks.push_back({0, ch.payload_bytes, ch.payload_crc32c, -1});
    out->push_back(std::move(p));
    return;
  }
  StreamPiece p = piece(ch.header_bytes);
  for (size_t l = 0; l < ch.layers.size(); ++l) {
    const ChunkLayerCrc& lc = ch.layers[l];
    if (lc.bytes == 0) continue;
    if (p.bytes > 0 && p.bytes + lc.bytes > piece_bytes) {
      const uint64_t next = p.offset + p.bytes;
      out->push_back(std::move(p));
      p = piece(next);
    }
    p.blocks.push_back({p.bytes, lc.bytes, lc.crc32c, int(l)});
    p.bytes += lc.bytes;
  }
  if (p.bytes > 0) out->push_back(std::move(p));
}

// The row writes of layer `layer`'s block of chunk k (`bytes`: its compressed rows, then
// its indexer rows).
void AddChunkRowWrites(const KvShape& shape, uint32_t chunk_tokens, uint32_t k, int layer,
                       const uint8_t* bytes, std::vector<KvState::RowWrite>* out) {
  const KvLayerShape& ls = shape.layers[size_t(layer)];
  if (ls.compress_ratio == 0) return;
  const int64_t rows = int64_t(chunk_tokens / uint32_t(ls.compress_ratio));
  const auto* f = reinterpret_cast<const float*>(bytes);
  out->push_back({layer, KvSection::kCompressed, int64_t(k) * rows, rows, f});
  if (ls.indexer) {
    out->push_back({layer, KvSection::kIndexerRows, int64_t(k) * rows, rows,
                    f + rows * int64_t(shape.head_dim)});
  }
}

// Version 2: every chunk the manifest names is opened and its header checked before the
// state is touched; then the chunk payloads and the manifest's layer sections stream
// through the staging buffers straight into the state: each layer's rows of a chunk go to
// KvState::WriteRows as soon as their CRC holds (no whole-state host buffer), the rest of
// each layer (the ring, the frontiers, the unchunked rows) to KvState::WriteLayerTail.
// Adds the bytes read to out->bytes_read (and those read through O_DIRECT to
// out->direct_bytes).
Status LoadChunkedLayers(const std::string& chunk_dir, const SnapshotHeader& h,
                         const KvShape& shape, const std::vector<SnapshotChunkRef>& refs,
                         std::vector<StreamPiece> layer_pieces, KvState& state,
                         const SnapshotLoadOptions& options, LoadedSnapshot* out,
                         const std::function<void()>& prepared) {
  const uint64_t payload = ChunkPayloadBytes(shape, h.chunk_tokens);
  std::vector<File> chunks;
  chunks.reserve(refs.size());
  std::vector<ChunkHeader> headers;
  uint64_t header_bytes = 0;
  for (size_t k = 0; k < refs.size(); ++k) {
    const std::string path = JoinPath(chunk_dir, ChunkFileName(refs[k].name));
    Expected<File> f = File::OpenRead(path, options.owner_uid);
    if (!f.ok()) {
      // A chunk gone makes the manifest unloadable: damage, not a vanished entry.
      return Corrupt("chunk {} ({}) is missing: {}", k, path, f.status().message());
    }
    ::posix_fadvise(f->fd(), 0, 0, POSIX_FADV_SEQUENTIAL);
    Expected<ChunkHeader> ch = OpenChunkHeader(*f, refs[k], payload);
    if (!ch.ok()) return ch.status().WithContext(fmt::format("chunk {} ({})", k, path));
    if (ch->index != k || ch->chunk_tokens != h.chunk_tokens || ch->n_layer != h.n_layer) {
      return Corrupt("chunk {} ({}) is chunk {} of {} tokens of {} layers", k, path, ch->index,
                     ch->chunk_tokens, ch->n_layer);
    }
    for (size_t l = 0; l < ch->layers.size(); ++l) {
      if (ch->layers[l].bytes != ChunkLayerBytes(shape, int(l), h.chunk_tokens)) {
        return Corrupt("chunk {} ({}) holds {} bytes of layer {}, the shape implies {}", k, path,
                       ch->layers[l].bytes, l, ChunkLayerBytes(shape, int(l), h.chunk_tokens));
      }
    }
    chunks.push_back(std::move(*f));
    headers.push_back(std::move(*ch));
  }
  std::vector<StreamPiece> pieces;
  for (size_t k = 0; k < refs.size(); ++k) {
    const size_t first = pieces.size();
    // After the header checks, the rest of the file through O_DIRECT where the
    // filesystem has it: like the saves (DiskCacheOptions::write), restores stay out of
    // the page cache, where they would push out the model's mapped pages.
    const bool d = options.direct &&
                   headers[k].header_bytes + headers[k].payload_bytes <= kMaxDirectPiece &&
                   chunks[k].SetDirectIo(true).ok();
    // A whole-file piece counts its header among its bytes (each byte once).
    if (!d) header_bytes += headers[k].header_bytes;
    AddChunkPieces(chunks[k], d, headers[k], k,
                   fmt::format("chunk {} ({})", k, Sha1Hex(refs[k].name)),
                   std::max<uint64_t>(options.chunk_bytes, 4096), &pieces);
    if (k + 1 < refs.size() && first < pieces.size() && !pieces[first].direct) {
      pieces[first].prefetch = &chunks[k + 1];
      pieces[first].prefetch_offset = headers[k + 1].header_bytes;
      pieces[first].prefetch_bytes = headers[k + 1].payload_bytes;
    }
  }
  for (StreamPiece& p : layer_pieces) {
    p.group = refs.size();  // the manifest: one reader
    pieces.push_back(std::move(p));
  }
  FLASHKV_RETURN_IF_ERROR(state.SetTokenCount(h.n_tokens));
  const int64_t chunked = int64_t(h.chunked_tokens());
  std::vector<KvState::RowWrite> writes;
  prepared();
  LayerStreamer streamer(pieces, options);
  FLASHKV_RETURN_IF_ERROR(streamer.Run([&](size_t i, const StreamBlock* block,
                                           const uint8_t* bytes) -> Status {
    const StreamPiece& piece = pieces[i];
    if (piece.chunk < 0) {
      const int l = piece.layer;
      const int64_t skip = int64_t(ChunkedRows(shape.layers[size_t(l)].compress_ratio, chunked));
      return state.WriteLayerTail(l, skip, reinterpret_cast<const float*>(bytes));
    }
    writes.clear();
    const uint32_t k = uint32_t(piece.chunk);
    if (block->layer >= 0) {
      AddChunkRowWrites(shape, h.chunk_tokens, k, block->layer, bytes, &writes);
    } else {
      uint64_t at = 0;
      for (size_t l = 0; l < shape.layers.size(); ++l) {
        AddChunkRowWrites(shape, h.chunk_tokens, k, int(l), bytes + at, &writes);
        at += ChunkLayerBytes(shape, int(l), h.chunk_tokens);
      }
    }
    return state.WriteRows(writes.data(), writes.size());
  }));
  out->bytes_read += streamer.bytes_read() + header_bytes;
  out->direct_bytes += streamer.direct_bytes();
  return Status::Ok();
}

Expected<LoadedSnapshot> LoadInto(const File& file, const std::string& chunk_dir,
                                  const SnapshotIdentity& identity, KvState& state,
                                  const SnapshotLoadOptions& options) {
  LoadedSnapshot out;
  const auto started = std::chrono::steady_clock::now();
  auto prepared = [&] {
    out.prepare_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
  };
  FLASHKV_ASSIGN_OR_RETURN(out.header, ReadSnapshotHeader(file));
  const SnapshotHeader& h = out.header;
  FLASHKV_ASSIGN_OR_RETURN(std::string table,
                           ReadSnapshotSection(file, *h.Find(SnapshotSectionKind::kLayerTable)));
  // Identity and shape first: another model's file never reaches the state.
  FLASHKV_RETURN_IF_ERROR(CheckSnapshotCompatible(h, table, identity, state.shape()));
  if (options.expect_vocab > 0 && int64_t(h.n_vocab) != options.expect_vocab) {
    return FailedPrecondition("snapshot has {} logits, this model's vocabulary is {}", h.n_vocab,
                              options.expect_vocab);
  }
  FLASHKV_ASSIGN_OR_RETURN(KvShape file_shape, ShapeOf(h, table));
  FLASHKV_RETURN_IF_ERROR(CheckLayerSizes(h, file_shape));
  FLASHKV_ASSIGN_OR_RETURN(out.text,
                           ReadSnapshotSection(file, *h.Find(SnapshotSectionKind::kText)));
  FLASHKV_ASSIGN_OR_RETURN(std::string tokens,
                           ReadSnapshotSection(file, *h.Find(SnapshotSectionKind::kTokens)));
  out.tokens = DecodeSnapshotTokens(tokens);
  for (size_t i = 0; i < out.tokens.size(); ++i) {
    if (out.tokens[i] < 0 || uint32_t(out.tokens[i]) >= h.n_vocab) {
      return Corrupt("token {} at index {} is outside the vocabulary of {}", out.tokens[i], i,
                     h.n_vocab);
    }
  }
  FLASHKV_ASSIGN_OR_RETURN(std::string logits,
                           ReadSnapshotSection(file, *h.Find(SnapshotSectionKind::kLogits)));
  out.logits.resize(h.n_vocab);
  std::memcpy(out.logits.data(), logits.data(), logits.size());
  // Extensions before the payload too: everything small is verified before the state is
  // touched.
  for (const SnapshotSection& s : h.sections) {
    if (s.kind != SnapshotSectionKind::kExtension) continue;
    FLASHKV_ASSIGN_OR_RETURN(std::string bytes, ReadSnapshotSection(file, s));
    out.extensions.push_back(SnapshotExtension{s.tag, std::move(bytes)});
  }
  out.bytes_read = kSnapshotHeaderBytes + h.sections.size() * kSnapshotSectionRowBytes +
                   table.size() + out.text.size() + tokens.size() + logits.size();
  for (const SnapshotExtension& e : out.extensions) out.bytes_read += e.bytes.size();
  std::vector<SnapshotChunkRef> refs;
  if (h.version == kSnapshotVersion && h.n_chunks > 0) {
    // The chunk list is kv's own first extension (ReadSnapshotChunkRefs checked its place
    // in a scan; here it is taken out of what the caller sees).
    if (out.extensions.empty() || out.extensions.front().tag != kSnapshotChunksTag) {
      return Corrupt("{} chunks but no chunk list section first", h.n_chunks);
    }
    FLASHKV_ASSIGN_OR_RETURN(refs, DecodeChunkRefs(out.extensions.front().bytes, h.n_chunks));
    FLASHKV_RETURN_IF_ERROR(CheckChunkNames(h.identity, h.chunk_tokens, out.tokens, refs));
    out.extensions.erase(out.extensions.begin());
  }
  FLASHKV_RETURN_IF_ERROR(TakeKvSections(&out.extensions, &out.tail, &out.replay));

  std::vector<StreamPiece> pieces;
  for (const SnapshotSection& s : h.sections) {
    if (s.kind == SnapshotSectionKind::kLayer) {
      StreamPiece p;
      p.file = &file;
      p.offset = s.offset;
      p.bytes = s.bytes;
      p.crc32c = s.crc32c;
      p.what = SectionName(s);
      p.layer = int(s.tag);
      pieces.push_back(std::move(p));
    }
  }
  if (refs.empty()) {
    FLASHKV_RETURN_IF_ERROR(state.SetTokenCount(h.n_tokens));
    prepared();
    LayerStreamer streamer(pieces, options);
    FLASHKV_RETURN_IF_ERROR(
        streamer.Run([&](size_t layer, const StreamBlock*, const uint8_t* bytes) {
          return state.WriteLayer(int(layer), reinterpret_cast<const float*>(bytes));
        }));
    out.bytes_read += streamer.bytes_read();
    return out;
  }
  FLASHKV_RETURN_IF_ERROR(LoadChunkedLayers(chunk_dir, h, file_shape, refs, std::move(pieces),
                                            state, options, &out, prepared));
  return out;
}

}  // namespace

Expected<LoadedSnapshot> LoadSnapshot(const std::string& path, const SnapshotIdentity& identity,
                                      KvState& state, const SnapshotLoadOptions& options) {
  auto file = File::OpenRead(path, options.owner_uid);
  if (!file.ok()) return file.status();
  ::posix_fadvise(file->fd(), 0, 0, POSIX_FADV_SEQUENTIAL);
  auto loaded = LoadInto(*file, ChunkDirForManifest(path), identity, state, options);
  if (!loaded.ok()) {
    (void)state.Clear();
    return loaded.status().WithContext(path);
  }
  return loaded;
}

Expected<SnapshotHeader> VerifySnapshotFile(const std::string& path) {
  auto run = [&]() -> Expected<SnapshotHeader> {
    FLASHKV_ASSIGN_OR_RETURN(File file, File::OpenRead(path));
    FLASHKV_ASSIGN_OR_RETURN(SnapshotHeader h, ReadSnapshotHeader(file));
    FLASHKV_ASSIGN_OR_RETURN(std::string table,
                             ReadSnapshotSection(file, *h.Find(SnapshotSectionKind::kLayerTable)));
    FLASHKV_ASSIGN_OR_RETURN(KvShape shape, ShapeOf(h, table));
    FLASHKV_RETURN_IF_ERROR(CheckLayerSizes(h, shape));
    uint64_t biggest = 0;
    for (const SnapshotSection& s : h.sections) biggest = std::max(biggest, s.bytes);
    const size_t kChunk = size_t(std::min<uint64_t>(biggest, uint64_t(16) << 20));
    AlignedBuffer buf(kChunk);
    for (const SnapshotSection& s : h.sections) {
      uint32_t crc = 0;
      for (uint64_t done = 0; done < s.bytes;) {
        const size_t n = size_t(std::min<uint64_t>(kChunk, s.bytes - done));
        FLASHKV_RETURN_IF_ERROR(file.ReadAt(s.offset + done, buf.p, n));
        crc = Crc32c(crc, buf.p, n);
        done += n;
      }
      if (crc != s.crc32c) return Corrupt("{} checksum mismatch", SectionName(s));
    }
    // Version 2: every chunk it names, whole (a restore needs all of them).
    FLASHKV_ASSIGN_OR_RETURN(std::vector<SnapshotChunkRef> refs, ReadSnapshotChunkRefs(file, h));
    if (!refs.empty()) {
      FLASHKV_ASSIGN_OR_RETURN(std::string ids,
                               ReadSnapshotSection(file, *h.Find(SnapshotSectionKind::kTokens)));
      FLASHKV_RETURN_IF_ERROR(
          CheckChunkNames(h.identity, h.chunk_tokens, DecodeSnapshotTokens(ids), refs));
    }
    const std::string chunk_dir = ChunkDirForManifest(path);
    for (size_t k = 0; k < refs.size(); ++k) {
      const std::string cpath = JoinPath(chunk_dir, ChunkFileName(refs[k].name));
      Expected<ChunkHeader> ch = VerifyChunkFile(cpath);
      if (!ch.ok()) {
        if (ch.status().code() == StatusCode::kNotFound) {
          return Corrupt("chunk {} ({}) is missing", k, cpath);
        }
        return ch.status();
      }
      if (ch->payload_crc32c != refs[k].payload_crc32c ||
          ch->payload_bytes + ch->header_bytes != refs[k].file_bytes ||
          ch->payload_bytes != ChunkPayloadBytes(shape, h.chunk_tokens) || ch->index != k) {
        return Corrupt("chunk {} ({}) is not the one the manifest names", k, cpath);
      }
    }
    return h;
  };
  auto r = run();
  if (!r.ok()) return r.status().WithContext(path);
  return r;
}

}  // namespace flashkv
