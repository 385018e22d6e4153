#include "kv_disk/disk_cache.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kv_disk/disk_cache_impl.h"
#include "kv_disk/disk_scan.h"
#include "util/file_io.h"

namespace flashkv {
double DiskCacheEntry::Value(int64_t now_ms, double half_life_hours) const {
  return ValueFor(now_ms, half_life_hours, double(file_bytes));
}

double DiskCacheEntry::ValueFor(int64_t now_ms, double half_life_hours, double bytes) const {
  const int64_t last = last_used_ms > 0 ? last_used_ms : created_ms;
  const double age_h = std::max<double>(0.0, double(now_ms - last)) / 3.6e6;
  double hits = double(hit_count) * std::exp2(-age_h / std::max(half_life_hours, 1e-9));
  if (hits < 0.01) hits = 0;
  return (hits + 1.0) * double(n_tokens) / std::max(bytes, 1.0);
}

namespace {

// The options with the owner every cache file must have settled (the effective uid unless
// a test names another), for the scan and for every load.
DiskCacheOptions WithOwner(DiskCacheOptions o) {
  if (!o.owner_uid) o.owner_uid = uint32_t(::geteuid());
  o.load.owner_uid = o.owner_uid;
  return o;
}

}  // namespace

DiskCache::Impl::Impl(DiskCacheOptions o)
    : opt_(WithOwner(std::move(o))),
      dir_(opt_.dir, JoinPath(opt_.dir, kQuarantineDirName)),
      index_(opt_.hit_half_life_hours),
      writer_(opt_.dir, opt_.write, opt_.reuse_host_buffer, opt_.max_pending_bytes, *this) {}

Status DiskCache::Impl::Open() {
  FLASHKV_RETURN_IF_ERROR(dir_.Open());
  LoadWindow();
  FLASHKV_RETURN_IF_ERROR(Scan());
  SweepChunks();
  if (!dir_.read_only()) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<DiskVictim> victims;
    Status st = index_.Plan(0, 0, opt_.budget_bytes, CacheNowMs(), &victims);
    if (!st.ok()) spdlog::warn("kv cache: {}", st.message());
    SettleLocked(victims, DeleteVictims(victims));
  }
  writer_.Start();
  const DiskCacheStats s = stats();
  if (opt_.identity) {
    spdlog::info("kv cache: {} ({} entries, {} of other models, {:.1f} / {:.1f} MiB)", opt_.dir,
                 s.entries, s.foreign_entries, CacheMib(s.used_bytes), CacheMib(s.budget_bytes));
  } else {
    spdlog::info("kv cache: {} opened for maintenance ({} entries, {:.1f} MiB)", opt_.dir,
                 s.foreign_entries, CacheMib(s.used_bytes));
  }
  return Status::Ok();
}

Status DiskCache::Impl::CheckDirectory() {
  FLASHKV_ASSIGN_OR_RETURN(CacheDirectory::State state, dir_.Check());
  if (state == CacheDirectory::State::kSame) return Status::Ok();
  size_t lost = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    lost = index_.Clear();
    window_file_bytes_ = 0;  // counted again if the scan finds the file
  }
  if (lost > 0) spdlog::warn("kv cache: {} entries went with the old directory", lost);
  FLASHKV_RETURN_IF_ERROR(Scan());
  SweepChunks();
  return Status::Ok();
}

void DiskCache::Impl::ScanChunks() {
  const std::string cdir = ChunkDirOf(opt_.dir);
  auto files = ListDirectory(cdir);
  if (!files.ok()) return;  // no chunks yet
  for (const DirEntry& f : *files) {
    const std::string path = JoinPath(cdir, f.name);
    Sha1Digest name;
    if (f.is_regular && f.name.find(kChunkTempMarker) != std::string::npos) {
      if (dir_.read_only()) continue;
      spdlog::info("kv cache: removing stale temp file {}", path);
      (void)RemoveFile(path);
    } else if (f.is_regular && ParseChunkFileName(f.name, &name)) {
      // The header only: name, size and payload CRC, which a manifest's ref must agree
      // with; a load checks the payload.
      Expected<ChunkHeader> h = [&]() -> Expected<ChunkHeader> {
        FLASHKV_ASSIGN_OR_RETURN(File file, File::OpenRead(path, opt_.owner_uid));
        FLASHKV_ASSIGN_OR_RETURN(ChunkHeader ch, ReadChunkHeader(file));
        if (ch.name != name) return Corrupt("chunk file name does not match its header");
        return ch;
      }();
      std::lock_guard<std::mutex> lock(mu_);
      if (h.ok()) {
        index_.AddChunk(Sha1Hex(name), path, SnapshotChunkRef{name, f.size, h->payload_crc32c});
      } else if (h.status().code() == StatusCode::kUnsupported) {
        index_.AddOtherBytes(f.size);  // a later format's; its manifests are kept too
      } else {
        QuarantineLocked(path, f.size, h.status());
      }
    } else if (f.is_regular) {
      std::lock_guard<std::mutex> lock(mu_);
      index_.AddOtherBytes(f.size);
    } else if (f.is_dir || !f.is_regular) {
      dir_.SetAside(path);
    }
  }
}

void DiskCache::Impl::SweepChunks() {
  std::vector<DiskVictim> orphans;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dir_.read_only()) return;
    orphans = index_.TakeOrphans();
  }
  if (orphans.empty()) return;
  // A crash between a save's chunks and its manifest leaves exactly these. The writer
  // deletes them (the first job it runs when this is the start-up scan).
  spdlog::info("kv cache: removing {} unreferenced chunks", orphans.size());
  writer_.Submit(DiskWriteJob::DeleteOnly(std::move(orphans)));
}

void DiskCache::Impl::QuarantineChunkLocked(const std::string& hex, const Status& why) {
  const DiskChunk* c = index_.FindChunk(hex);
  if (c == nullptr) return;
  const std::string path = c->path;
  const uint64_t bytes = c->bytes;
  index_.DropChunk(hex);
  QuarantineLocked(path, bytes, why);
  NoteRemoved(path, bytes);
}

void DiskCache::Impl::CheckChunksOf(const DiskCacheEntry& entry) {
  std::vector<SnapshotChunkRef> refs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const DiskRecord* r = index_.Find(entry.key);
    if (r != nullptr) refs = r->chunks;
  }
  const std::string cdir = ChunkDirOf(opt_.dir);
  for (const SnapshotChunkRef& ref : refs) {
    const std::string path = JoinPath(cdir, ChunkFileName(ref.name));
    Expected<ChunkHeader> h = VerifyChunkFile(path);
    Status bad = h.status();
    if (h.ok() && (h->payload_crc32c != ref.payload_crc32c ||
                   h->payload_bytes + h->header_bytes != ref.file_bytes)) {
      bad = Corrupt("{}: not the chunk {} names", path, entry.path);
    }
    if (bad.ok() || bad.code() == StatusCode::kNotFound) continue;
    std::lock_guard<std::mutex> lock(mu_);
    QuarantineChunkLocked(Sha1Hex(ref.name), bad);
  }
}

void DiskCache::Impl::NoteWritten(const std::string& path, uint64_t bytes) const {
  if (!opt_.on_object) return;
  DiskObjectEvent e;
  e.kind = path.ends_with(kChunkSuffix) ? DiskObjectEvent::Kind::kChunk
                                        : DiskObjectEvent::Kind::kManifest;
  const std::string base = path.substr(path.find_last_of('/') + 1);
  e.name = e.kind == DiskObjectEvent::Kind::kChunk ? JoinPath(kChunkDirName, base) : base;
  e.path = path;
  e.bytes = bytes;
  opt_.on_object(e);
}

void DiskCache::Impl::NoteRemoved(const std::string& path, uint64_t bytes) const {
  if (!opt_.on_object) return;
  const std::string base = path.substr(path.find_last_of('/') + 1);
  DiskObjectEvent e;
  Sha1Digest d;
  if (ParseChunkFileName(base, &d)) {
    e.kind = DiskObjectEvent::Kind::kChunk;
    e.name = JoinPath(kChunkDirName, base);
  } else if (ParseSnapshotFileName(base, &d)) {
    e.name = base;
  } else {
    return;  // quarantined files and temp files are no objects
  }
  e.removed = true;
  e.path = path;
  e.bytes = bytes;
  opt_.on_object(e);
}

Status DiskCache::Impl::Scan() {
  // Chunks first, so that each manifest's references can be checked as it is indexed.
  ScanChunks();
  FLASHKV_ASSIGN_OR_RETURN(std::vector<DirEntry> files, ListDirectory(opt_.dir));
  std::sort(files.begin(), files.end(),
            [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  for (const DirEntry& f : files) {
    const std::string path = JoinPath(opt_.dir, f.name);
    Sha1Digest key;
    if (f.is_dir && f.name == kChunkDirName) continue;  // ScanChunks
    if (f.is_dir && f.name == kQuarantineDirName) {
      auto q = ListDirectory(path);
      if (!q.ok()) return q.status();
      std::lock_guard<std::mutex> lock(mu_);
      for (const DirEntry& qf : *q) {
        if (!qf.is_regular) continue;  // set aside (not a file): never evicted
        index_.AddQuarantined(JoinPath(path, qf.name), qf.size);
      }
    } else if (f.is_regular && (f.name.find(kSnapshotTempMarker) != std::string::npos ||
                                f.name.starts_with(kWriteWindowTempPrefix))) {
      if (dir_.read_only()) continue;
      spdlog::info("kv cache: removing stale temp file {}", path);
      FLASHKV_RETURN_IF_ERROR(RemoveFile(path));
    } else if (f.is_regular && f.name == kWriteWindowFileName) {
      std::lock_guard<std::mutex> lock(mu_);
      index_.AddOtherBytes(f.size);
      window_file_bytes_ = f.size;
    } else if (f.is_regular && ParseSnapshotFileName(f.name, &key)) {
      ScanEntry(path, key, f.size);
    } else if (ParseSnapshotFileName(f.name, &key)) {
      dir_.SetAside(path);
    } else if (f.is_regular) {
      std::lock_guard<std::mutex> lock(mu_);
      index_.AddOtherBytes(f.size);
    }
  }
  return Status::Ok();
}

void DiskCache::Impl::ScanEntry(const std::string& path, const Sha1Digest& key, uint64_t size) {
  Expected<ScannedSnapshot> scan = ScanEntryFile(path, key, opt_.owner_uid);
  std::lock_guard<std::mutex> lock(mu_);
  if (scan.ok()) {
    // Every chunk it names must be there, of the size it records (a missing one makes it
    // unloadable: damage, as a truncated file would be).
    for (const SnapshotChunkRef& c : scan->chunks) {
      const DiskChunk* have = index_.FindChunk(Sha1Hex(c.name));
      if (have == nullptr || have->bytes != c.file_bytes ||
          have->payload_crc32c != c.payload_crc32c) {
        scan = Corrupt("chunk {} it names is {}", Sha1Hex(c.name),
                       have == nullptr ? "missing" : "another chunk (size or CRC)");
        break;
      }
    }
  }
  if (scan.ok()) {
    index_.Add(RecordOf(std::move(*scan), key, path, size, opt_.identity));
  } else if (scan.status().code() == StatusCode::kUnsupported) {
    spdlog::warn("kv cache: ignoring {}: {}", path, scan.status().message());
    index_.AddOtherBytes(size);
    // A later format may name chunks this build cannot see references to.
    index_.KeepUnreferencedChunks();
  } else {
    QuarantineLocked(path, size, scan.status());
  }
}

void DiskCache::Impl::QuarantineLocked(const std::string& path, uint64_t size, const Status& why) {
  if (dir_.read_only()) {
    spdlog::warn("kv cache: ignoring damaged {}: {}", path, why.message());
    return;
  }
  ++stats_.quarantined;
  if (!opt_.quarantine) {
    spdlog::warn("kv cache: deleting damaged {}: {}", path, why.message());
    Status st = RemoveFile(path);
    if (!st.ok()) spdlog::warn("kv cache: {}", st.message());
    return;
  }
  const std::string qdir = JoinPath(opt_.dir, kQuarantineDirName);
  const std::string name = path.substr(path.find_last_of('/') + 1);
  const std::string dst = JoinPath(qdir, fmt::format("{}.{}", name, CacheNowMs()));
  Status st = CreateDirectories(qdir, 0700);
  if (st.ok()) st = RenameDurably(path, dst);
  if (!st.ok()) {
    spdlog::warn("kv cache: cannot quarantine {} ({}); deleting it", path, st.message());
    (void)RemoveFile(path);
    return;
  }
  spdlog::warn("kv cache: quarantined {} -> {}: {}", path, dst, why.message());
  index_.AddQuarantined(dst, size);
}

namespace {
bool IsChunkPath(const std::string& path) {
  return path.ends_with(kChunkSuffix);
}
}  // namespace

int DiskCache::Impl::Unlink(const std::vector<DiskVictim>& victims, bool chunks) {
  int n = 0;
  for (const DiskVictim& v : victims) {
    const bool chunk = IsChunkPath(v.path);
    if (chunk && !chunks) continue;
    Status st;
    if (chunk) {
      // Written again since it was doomed (a queued save needed it, or an import put it
      // in place: Import renames and indexes under mu_, so checking and unlinking under it
      // too never deletes a chunk the index holds).
      std::lock_guard<std::mutex> lock(mu_);
      const std::string base = v.path.substr(v.path.find_last_of('/') + 1);
      if (index_.FindChunk(base.substr(0, 40)) != nullptr) continue;
      st = RemoveFile(v.path);
    } else {
      st = RemoveFile(v.path);
    }
    if (!st.ok()) {
      spdlog::warn("kv cache: eviction failed: {}", st.message());
      continue;
    }
    NoteRemoved(v.path, v.bytes);
    if (chunk) {
      spdlog::debug("kv cache: removed {} size={:.1f} MiB file={}", v.what, CacheMib(v.bytes),
                    v.path);
      continue;
    }
    spdlog::info("kv cache: evicted reason=disk-cache-full {} size={:.1f} MiB file={}", v.what,
                 CacheMib(v.bytes), v.path);
    ++n;
  }
  return n;
}

int DiskCache::Impl::DeleteVictims(const std::vector<DiskVictim>& victims) {
  std::vector<DiskVictim> chunks;
  for (const DiskVictim& v : victims) {
    if (IsChunkPath(v.path)) chunks.push_back(v);
  }
  // The writer is the one thread that writes chunks, so it alone deletes them.
  if (!chunks.empty()) writer_.Submit(DiskWriteJob::DeleteOnly(std::move(chunks)));
  return Unlink(victims, /*chunks=*/false);
}

void DiskCache::Impl::SettleLocked(const std::vector<DiskVictim>& victims, int deleted) {
  std::vector<DiskVictim> files;
  for (const DiskVictim& v : victims) {
    if (!IsChunkPath(v.path)) files.push_back(v);  // chunks settle on the writer
  }
  index_.Settle(files);
  stats_.evictions += uint64_t(deleted);
}

void DiskCache::Impl::RemoveVictims(const std::vector<DiskVictim>& victims) {
  const int deleted = Unlink(victims, /*chunks=*/true);
  std::lock_guard<std::mutex> lock(mu_);
  index_.Settle(victims);
  stats_.evictions += uint64_t(deleted);
}

void DiskCache::Impl::SetAside(const std::string& path) {
  dir_.SetAside(path);
}

std::optional<SnapshotChunkRef> DiskCache::Impl::UseChunk(const Sha1Digest& name) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string hex = Sha1Hex(name);
  const DiskChunk* c = index_.FindChunk(hex);
  if (c == nullptr || !index_.PinChunk(hex)) return std::nullopt;
  ++stats_.chunks_reused;
  return SnapshotChunkRef{name, c->bytes, c->payload_crc32c};
}

void DiskCache::Impl::ChunkWritten(const SnapshotChunkRef& ref) {
  const std::string path = JoinPath(ChunkDirOf(opt_.dir), ChunkFileName(ref.name));
  {
    std::lock_guard<std::mutex> lock(mu_);
    index_.AddChunk(Sha1Hex(ref.name), path, ref);
    index_.PinChunk(Sha1Hex(ref.name));
    ++stats_.chunks_written;
  }
  NoteWritten(path, ref.file_bytes);
}

void DiskCache::Impl::Finished(const DiskWriteJob& job, DiskWriteResult result) {
  // The entry in place: indexed first, so its references hold its chunks before the
  // job's pins go.
  if (result.stored) {
    DiskRecord& r = *result.stored;
    const std::string path = r.entry.path;
    const uint64_t bytes = r.entry.file_bytes;
    // A second server needs the manifest and every chunk it names (docs/KV_FORMAT.md).
    DiskStoredEntry stored{r.entry.key, r.entry.n_tokens, {path}};
    for (const SnapshotChunkRef& c : r.chunks) {
      stored.paths.push_back(JoinPath(ChunkDirOf(opt_.dir), ChunkFileName(c.name)));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      index_.Add(std::move(r));
    }
    NoteWritten(path, bytes);
    {
      std::lock_guard<std::mutex> lock(hook_mu_);
      if (stored_hook_) stored_hook_(stored);
    }
  }
  // The job's pins go (indexed: its references hold the chunks; failed: the chunks it
  // wrote are orphans and go with them).
  if (result.chunked) {
    std::vector<DiskVictim> orphans;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const Sha1Digest& n : result.pinned_chunks) index_.UnpinChunk(Sha1Hex(n));
      orphans = index_.TakeOrphans();
    }
    (void)Unlink(orphans, /*chunks=*/true);
    std::lock_guard<std::mutex> lock(mu_);
    index_.Settle(orphans);
  }
  WindowImage window;
  {
    std::lock_guard<std::mutex> lock(mu_);
    index_.Unreserve(job.reserved);
    queued_write_bytes_ -= std::min(queued_write_bytes_, job.reserved);
    if (result.written_bytes > 0) window = ChargeWritesLocked(result.written_bytes);
    pending_keys_.erase(job.key);
    ++(result.status.ok() ? stats_.saves : stats_.save_failures);
    stats_.bytes_written += result.written_bytes;
    const uint8_t reason = uint8_t(job.image->header().reason);
    if (reason < std::size(stats_.bytes_written_by_reason)) {
      stats_.bytes_written_by_reason[reason] += result.written_bytes;
    }
  }
  PersistWindow(window);
}

PinnedStandby& DiskCache::Impl::Standby(Backend& backend) {
  std::lock_guard<std::mutex> lock(standby_mu_);
  if (!standby_) standby_ = std::make_unique<PinnedStandby>(&backend);
  return *standby_;
}

void DiskCache::Impl::PrepareHostBuffer(Backend& backend, uint64_t bytes) {
  Standby(backend).Prepare(bytes);
}

Status DiskCache::Impl::Flush() {
  return writer_.Flush();
}

Status DiskCache::Impl::Touch(std::string_view key) {
  std::string path;
  uint32_t hits;
  const int64_t now = CacheNowMs();
  {
    std::lock_guard<std::mutex> lock(mu_);
    DiskRecord* r = index_.Find(std::string(key));
    if (r == nullptr) return NotFound("no kv cache entry {}", key);
    r->entry.hit_count += 1;
    r->entry.last_used_ms = now;
    path = r->entry.path;
    hits = r->entry.hit_count;
  }
  if (dir_.read_only()) return Status::Ok();  // counted in memory only
  FLASHKV_ASSIGN_OR_RETURN(File f, File::OpenReadWrite(path));
  return WriteSnapshotStats(f, now, hits);
}

std::vector<DiskCacheEntry> DiskCache::Impl::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  return index_.List();
}

Status DiskCache::Impl::Remove(std::string_view prefix) {
  if (prefix.size() < 4) return InvalidArgument("give at least 4 hex digits of the key");
  std::string path, key;
  std::vector<DiskVictim> orphans;
  {
    std::lock_guard<std::mutex> lock(mu_);
    int matches = 0;
    for (const auto& [k, r] : index_.records()) {
      if (k.starts_with(prefix)) {
        ++matches;
        key = k;
        path = r.entry.path;
      }
    }
    if (matches == 0) return NotFound("no kv cache entry starts with {}", prefix);
    if (matches > 1) return InvalidArgument("{} entries start with {}", matches, prefix);
    if (pending_keys_.count(key)) return FailedPrecondition("{} is being written", key);
    index_.Drop(key);
    orphans = index_.TakeOrphans();
  }
  Status st = RemoveFile(path);
  if (st.ok()) NoteRemoved(path, 0);
  if (!orphans.empty()) writer_.Submit(DiskWriteJob::DeleteOnly(std::move(orphans)));
  return st;
}

Expected<int> DiskCache::Impl::Collect(std::optional<uint64_t> budget) {
  if (dir_.read_only()) return FailedPrecondition("kv cache {} is read-only", opt_.dir);
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<DiskVictim> victims;
  FLASHKV_RETURN_IF_ERROR(
      index_.Plan(0, 0, budget.value_or(opt_.budget_bytes), CacheNowMs(), &victims));
  const int n = DeleteVictims(victims);
  SettleLocked(victims, n);
  return n;
}

DiskCacheStats DiskCache::Impl::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  DiskCacheStats s = stats_;
  s.bytes_written_24h = window_.InWindow(BudgetNowMs());
  s.budget_bytes = opt_.budget_bytes;
  s.used_bytes = index_.used();
  index_.Count(&s.entries, &s.foreign_entries);
  s.pending_writes = pending_keys_.size();
  s.chunks = index_.chunk_count();
  s.chunk_bytes = index_.chunk_bytes();
  for (const auto& [k, r] : index_.records()) s.logical_bytes += index_.LogicalBytes(r);
  return s;
}

bool DiskCache::Impl::Contains(std::span<const int32_t> tokens) const {
  const std::string key = Sha1Hex(TokensKey(tokens));
  std::lock_guard<std::mutex> lock(mu_);
  const DiskRecord* r = index_.Find(key);
  return pending_keys_.count(key) > 0 || (r != nullptr && r->entry.loadable);
}

std::vector<DiskCacheEntry> DiskCache::Impl::Candidates(const DiskLookup& lookup) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<DiskCacheEntry> out;
  for (const DiskIndex::Candidate& c : index_.Candidates(lookup)) out.push_back(c.record->entry);
  return out;
}

DiskCache::DiskCache(std::unique_ptr<Impl> impl, DiskCacheOptions options)
    : impl_(std::move(impl)), options_(std::move(options)) {}

DiskCache::~DiskCache() {
  Status st = impl_->Flush();
  if (!st.ok()) spdlog::warn("kv cache: {}", st.ToString());
}

Expected<std::unique_ptr<DiskCache>> DiskCache::Open(const DiskCacheOptions& options) {
  if (options.dir.empty()) return InvalidArgument("kv cache directory is empty");
  if (options.budget_bytes == 0) return InvalidArgument("kv cache budget must be positive");
  const DiskCacheOptions settled = WithOwner(options);
  auto impl = std::make_unique<Impl>(settled);
  Status st = impl->Open();
  if (!st.ok()) return st.WithContext("opening kv cache " + options.dir);
  return std::unique_ptr<DiskCache>(new DiskCache(std::move(impl), settled));
}

std::vector<DiskCacheEntry> DiskCache::Candidates(const DiskLookup& lookup) const {
  return impl_->Candidates(lookup);
}
Expected<DiskHit> DiskCache::Load(const DiskLookup& lookup, KvState& state) {
  return impl_->Load(lookup, state);
}
void DiskCache::PrepareHostBuffer(Backend& backend, uint64_t bytes) {
  impl_->PrepareHostBuffer(backend, bytes);
}

Expected<std::string> DiskCache::Save(const KvState& state, const SnapshotContent& content) {
  return impl_->Save(state, content);
}
bool DiskCache::Contains(std::span<const int32_t> tokens) const {
  return impl_->Contains(tokens);
}
Status DiskCache::Flush() {
  return impl_->Flush();
}
Status DiskCache::Touch(std::string_view key) {
  return impl_->Touch(key);
}
std::vector<DiskCacheEntry> DiskCache::List() const {
  return impl_->List();
}
std::vector<std::string> DiskCache::ReplaySections() const {
  std::vector<std::string> out;
  for (const DiskCacheEntry& e : List()) {
    if (!e.loadable) continue;
    Expected<File> f = File::OpenRead(e.path, options_.owner_uid);
    if (!f.ok()) continue;
    Expected<SnapshotHeader> h = ReadSnapshotHeader(*f);
    if (!h.ok()) continue;
    const SnapshotSection* sec = h->Find(SnapshotSectionKind::kExtension, kSnapshotReplayTag);
    if (sec == nullptr) continue;
    Expected<std::string> bytes = ReadSnapshotSection(*f, *sec);
    if (bytes.ok()) out.push_back(std::move(*bytes));
  }
  return out;
}

Expected<TierHit> ToTierHit(Expected<DiskHit> hit) {
  if (!hit.ok()) return hit.status();
  TierHit t;
  static_cast<ResumeHit&>(t) = std::move(static_cast<ResumeHit&>(*hit));
  t.origin = std::move(hit->entry.path);
  return t;
}

Expected<TierHit> DiskCache::Restore(const ResumeLookup& lookup, KvState& state) {
  return ToTierHit(Load(lookup, state));
}

Status DiskCache::Remove(std::string_view key_prefix) {
  return impl_->Remove(key_prefix);
}
Expected<int> DiskCache::Collect(std::optional<uint64_t> budget_bytes) {
  return impl_->Collect(budget_bytes);
}
DiskCacheStats DiskCache::stats() const {
  return impl_->stats();
}
void DiskCache::SetStoredHook(std::function<void(const DiskStoredEntry&)> hook) {
  impl_->SetStoredHook(std::move(hook));
}
Status DiskCache::Import(std::string_view key, uint32_t n_tokens,
                         std::span<const DiskImportObject> objects) {
  return impl_->Import(key, n_tokens, objects);
}
bool DiskCache::HasChunk(std::string_view file_name, uint64_t bytes) const {
  return impl_->HasChunk(file_name, bytes);
}

}  // namespace flashkv
