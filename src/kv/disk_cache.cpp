#include "kv/disk_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

#include "kv/cache_directory.h"
#include "kv/pinned_standby.h"
#include "kv/prefix_index.h"
#include "util/crc32c.h"
#include "util/file_io.h"

namespace flashkv {
namespace {

constexpr std::string_view kSuffix = ".kv";
constexpr std::string_view kTempMarker = ".kv.tmp.";
constexpr const char* kQuarantineDir = "quarantine";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double Mib(uint64_t b) {
  return double(b) / (1024.0 * 1024.0);
}

// (tag, bytes, crc) of each extension: two entries with equal signatures carry the same
// extension bytes.
using ExtSignature = std::vector<std::tuple<uint32_t, uint64_t, uint32_t>>;

ExtSignature SignatureOf(const SnapshotHeader& h) {
  ExtSignature sig;
  for (const SnapshotSection& s : h.sections) {
    if (s.kind == SnapshotSectionKind::kExtension) sig.emplace_back(s.tag, s.bytes, s.crc32c);
  }
  return sig;
}

ExtSignature SignatureOf(std::span<const SnapshotExtension> ext) {
  ExtSignature sig;
  for (const SnapshotExtension& e : ext) {
    sig.emplace_back(e.tag, e.bytes.size(), Crc32c(0, e.bytes.data(), e.bytes.size()));
  }
  return sig;
}

// The scanned header of the entry file at `path` whose name says `key`: a file whose token
// ids do not hash to its name is damaged (renamed or rewritten outside the cache).
Expected<ScannedSnapshot> ScanEntryFile(const std::string& path, const Sha1Digest& key) {
  auto file = File::OpenRead(path);
  if (!file.ok()) return file.status();
  Expected<ScannedSnapshot> scan = ScanSnapshotFile(*file);
  if (scan.ok() && TokensKey(scan->tokens) != key) {
    return Corrupt("file name does not match the SHA1 of its token ids");
  }
  return scan;
}

}  // namespace

std::string SnapshotFileName(const Sha1Digest& key) {
  return Sha1Hex(key) + std::string(kSuffix);
}

bool ParseSnapshotFileName(std::string_view name, Sha1Digest* key) {
  if (name.size() != 40 + kSuffix.size() || !name.ends_with(kSuffix)) return false;
  return ParseSha1Hex(name.substr(0, 40), key);
}

double DiskCacheEntry::Value(int64_t now_ms, double half_life_hours) const {
  const int64_t last = last_used_ms > 0 ? last_used_ms : created_ms;
  const double age_h = std::max<double>(0.0, double(now_ms - last)) / 3.6e6;
  double hits = double(hit_count) * std::exp2(-age_h / std::max(half_life_hours, 1e-9));
  if (hits < 0.01) hits = 0;
  return (hits + 1.0) * double(n_tokens) / double(std::max<uint64_t>(file_bytes, 1));
}

class DiskCache::Impl {
 public:
  struct Record {
    DiskCacheEntry entry;
    std::vector<int32_t> tokens;
    ExtSignature extensions;
  };
  struct LooseFile {  // a quarantined file
    std::string path;
    uint64_t bytes;
    int64_t mtime_order;  // insertion order = age
  };
  struct Victim {
    std::string path;
    uint64_t bytes;
    std::string what;
  };
  // How far the caller's copy of a queued image has got: the writer streams behind it.
  struct CaptureProgress {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;       // the caller no longer touches the image
    Status status;           // the capture's error, once done
    PendingCapture pending;  // once done: the copies still landing in the image
    // Bytes [0, end) of the image are final (blocks until then).
    Status WaitReady(uint64_t end) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return done; });
        if (!status.ok()) return status;
      }
      return pending.Wait(end);
    }
  };
  struct Job {
    std::unique_ptr<SnapshotImage> image;
    std::string key;
    std::vector<Victim> victims;
    std::shared_ptr<CaptureProgress> capture;  // set with image
    Backend* backend = nullptr;                // the state's: page-locks a kept buffer
  };

  explicit Impl(DiskCacheOptions o)
      : opt_(std::move(o)), dir_(opt_.dir, JoinPath(opt_.dir, kQuarantineDir)) {}

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    queue_cv_.notify_all();
    if (writer_.joinable()) writer_.join();
  }

  Status Open() {
    FLASHKV_RETURN_IF_ERROR(dir_.Open());
    FLASHKV_RETURN_IF_ERROR(Scan());
    if (!dir_.read_only()) {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<Victim> victims;
      Status st = PlanLocked(0, 0, opt_.budget_bytes, &victims);
      if (!st.ok()) spdlog::warn("kv cache: {}", st.message());
      SettleLocked(victims, DeleteVictims(victims));
    }
    writer_ = std::thread([this] { WriterLoop(); });
    const DiskCacheStats s = stats();
    if (opt_.identity) {
      spdlog::info("kv cache: {} ({} entries, {} of other models, {:.1f} / {:.1f} MiB)", opt_.dir,
                   s.entries, s.foreign_entries, Mib(s.used_bytes), Mib(s.budget_bytes));
    } else {
      spdlog::info("kv cache: {} opened for maintenance ({} entries, {:.1f} MiB)", opt_.dir,
                   s.foreign_entries, Mib(s.used_bytes));
    }
    return Status::Ok();
  }

  // A save checks the directory first: deleted or replaced, the index of the old one is
  // dropped and the new one scanned (CacheDirectory relocks it or gives it up).
  Status CheckDirectory() {
    FLASHKV_ASSIGN_OR_RETURN(CacheDirectory::State state, dir_.Check());
    if (state == CacheDirectory::State::kSame) return Status::Ok();
    size_t lost = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      lost = records_.size();
      while (!records_.empty()) DropLocked(records_.begin()->first);
      quarantine_.clear();
      quarantine_bytes_ = 0;
      other_bytes_ = 0;
    }
    if (lost > 0) spdlog::warn("kv cache: {} entries went with the old directory", lost);
    return Scan();
  }

  // ---- scan ------------------------------------------------------------------------
  Status Scan() {
    FLASHKV_ASSIGN_OR_RETURN(std::vector<DirEntry> files, ListDirectory(opt_.dir));
    std::sort(files.begin(), files.end(),
              [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
    for (const DirEntry& f : files) {
      const std::string path = JoinPath(opt_.dir, f.name);
      Sha1Digest key;
      if (f.is_dir && f.name == kQuarantineDir) {
        auto q = ListDirectory(path);
        if (!q.ok()) return q.status();
        std::lock_guard<std::mutex> lock(mu_);
        for (const DirEntry& qf : *q) {
          if (!qf.is_regular) continue;  // set aside (not a file): never evicted
          quarantine_.push_back({JoinPath(path, qf.name), qf.size, order_++});
          quarantine_bytes_ += qf.size;
        }
      } else if (f.is_regular && f.name.find(kTempMarker) != std::string::npos) {
        if (dir_.read_only()) continue;
        spdlog::info("kv cache: removing stale temp file {}", path);
        FLASHKV_RETURN_IF_ERROR(RemoveFile(path));
      } else if (f.is_regular && ParseSnapshotFileName(f.name, &key)) {
        ScanEntry(path, key, f.size);
      } else if (ParseSnapshotFileName(f.name, &key)) {
        dir_.SetAside(path);
      } else if (f.is_regular) {
        std::lock_guard<std::mutex> lock(mu_);
        other_bytes_ += f.size;
      }
    }
    return Status::Ok();
  }

  void ScanEntry(const std::string& path, const Sha1Digest& key, uint64_t size) {
    Expected<ScannedSnapshot> scan = ScanEntryFile(path, key);
    if (!scan.ok()) {
      if (scan.status().code() == StatusCode::kUnsupported) {
        spdlog::warn("kv cache: ignoring {}: {}", path, scan.status().message());
        std::lock_guard<std::mutex> lock(mu_);
        other_bytes_ += size;
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      QuarantineLocked(path, size, scan.status());
      return;
    }
    Record r;
    r.entry.key = Sha1Hex(key);
    r.entry.path = path;
    r.entry.n_tokens = scan->header.n_tokens;
    r.entry.file_bytes = size;
    r.entry.reason = scan->header.reason;
    r.entry.hit_count = scan->header.hit_count;
    r.entry.created_ms = scan->header.created_ms;
    r.entry.last_used_ms = scan->header.last_used_ms;
    r.entry.numerics = scan->header.identity.numerics;
    r.entry.loadable = opt_.identity && scan->header.identity == *opt_.identity;
    r.entry.text = std::move(scan->text);
    r.tokens = std::move(scan->tokens);
    r.extensions = SignatureOf(scan->header);
    std::lock_guard<std::mutex> lock(mu_);
    AddLocked(std::move(r));
  }

  // ---- index -----------------------------------------------------------------------
  void AddLocked(Record r) {
    const std::string key = r.entry.key;
    if (records_.count(key)) DropLocked(key);
    entry_bytes_ += r.entry.file_bytes;
    if (r.entry.loadable) {
      tokens_.Insert(key, r.tokens);
      texts_.Insert(key, r.entry.text);
    }
    records_.emplace(key, std::move(r));
  }

  // Removes an entry from the index (not from disk).
  void DropLocked(const std::string& key) {
    auto it = records_.find(key);
    if (it == records_.end()) return;
    entry_bytes_ -= it->second.entry.file_bytes;
    if (it->second.entry.loadable) {
      tokens_.Erase(it->second.tokens);
      texts_.Erase(key, it->second.entry.text);
    }
    records_.erase(it);
  }

  void QuarantineLocked(const std::string& path, uint64_t size, const Status& why) {
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
    const std::string qdir = JoinPath(opt_.dir, kQuarantineDir);
    const std::string name = path.substr(path.find_last_of('/') + 1);
    const std::string dst = JoinPath(qdir, fmt::format("{}.{}", name, NowMs()));
    Status st = CreateDirectories(qdir, 0700);
    if (st.ok()) st = RenameDurably(path, dst);
    if (!st.ok()) {
      spdlog::warn("kv cache: cannot quarantine {} ({}); deleting it", path, st.message());
      (void)RemoveFile(path);
      return;
    }
    spdlog::warn("kv cache: quarantined {} -> {}: {}", path, dst, why.message());
    quarantine_.push_back({dst, size, order_++});
    quarantine_bytes_ += size;
  }

  uint64_t UsedLocked() const {
    return entry_bytes_ + other_bytes_ + quarantine_bytes_ + reserved_bytes_ + doomed_bytes_;
  }

  // Chooses what to delete so that `need` more bytes fit `budget`: quarantined files
  // first (oldest first), then entries by value, lowest first, never one being written.
  // With a new entry of value `new_value` (> 0), only entries worth no more than it may
  // go (a tie evicts the older); otherwise the new entry would be the first to go.
  // Victims leave the index at once (their bytes count as doomed until deleted).
  Status PlanLocked(uint64_t need, double new_value, uint64_t budget, std::vector<Victim>* out) {
    const uint64_t used = UsedLocked();
    if (need > budget) {
      return ResourceExhausted("an entry of {:.1f} MiB exceeds the {:.1f} MiB budget", Mib(need),
                               Mib(budget));
    }
    if (used + need <= budget) return Status::Ok();
    uint64_t excess = used + need - budget;
    std::vector<Victim> victims;
    std::vector<size_t> q_taken;
    std::vector<std::string> e_taken;
    std::vector<size_t> qorder(quarantine_.size());
    for (size_t i = 0; i < qorder.size(); ++i) qorder[i] = i;
    std::sort(qorder.begin(), qorder.end(), [&](size_t a, size_t b) {
      return quarantine_[a].mtime_order < quarantine_[b].mtime_order;
    });
    uint64_t freed = 0;
    for (size_t i : qorder) {
      if (freed >= excess) break;
      q_taken.push_back(i);
      freed += quarantine_[i].bytes;
    }
    if (freed < excess) {
      const int64_t now = NowMs();
      std::vector<const Record*> order;
      for (const auto& [key, r] : records_) order.push_back(&r);
      std::sort(order.begin(), order.end(), [&](const Record* a, const Record* b) {
        const double va = a->entry.Value(now, opt_.hit_half_life_hours);
        const double vb = b->entry.Value(now, opt_.hit_half_life_hours);
        if (va != vb) return va < vb;
        return a->entry.last_used_ms < b->entry.last_used_ms;
      });
      for (const Record* r : order) {
        if (freed >= excess) break;
        if (new_value > 0 && r->entry.Value(now, opt_.hit_half_life_hours) > new_value) break;
        e_taken.push_back(r->entry.key);
        freed += r->entry.file_bytes;
      }
    }
    if (freed < excess && new_value > 0) {
      return ResourceExhausted(
          "not admitted: it would be the first entry evicted ({:.1f} MiB needed, {:.1f} MiB of "
          "less valuable entries)",
          Mib(excess), Mib(freed));
    }
    // Without a new entry (start-up, gc) evict what can go even if files that are never
    // deleted (unrelated, being written) keep the directory over the budget.
    if (freed < excess) {
      spdlog::warn(
          "kv cache: {:.1f} MiB over the budget after evicting every entry (files that "
          "are not cache entries count too)",
          Mib(excess - freed));
    }
    // Commit: out of the index, bytes doomed until the deletions run.
    std::sort(q_taken.rbegin(), q_taken.rend());
    for (size_t i : q_taken) {
      victims.push_back({quarantine_[i].path, quarantine_[i].bytes, "quarantined file"});
      quarantine_bytes_ -= quarantine_[i].bytes;
      doomed_bytes_ += quarantine_[i].bytes;
      quarantine_.erase(quarantine_.begin() + i);
    }
    for (const std::string& key : e_taken) {
      const DiskCacheEntry& e = records_.at(key).entry;
      victims.push_back({e.path, e.file_bytes,
                         fmt::format("tokens={} hits={} reason={}", e.n_tokens, e.hit_count,
                                     SaveReasonName(e.reason))});
      doomed_bytes_ += e.file_bytes;
      DropLocked(key);
    }
    *out = std::move(victims);
    return Status::Ok();
  }

  // Deletes planned victims; unlink is cheap, so callers may hold mu_. Returns how many
  // went.
  int DeleteVictims(const std::vector<Victim>& victims) {
    int n = 0;
    for (const Victim& v : victims) {
      Status st = RemoveFile(v.path);
      if (st.ok()) {
        spdlog::info("kv cache: evicted reason=disk-cache-full {} size={:.1f} MiB file={}", v.what,
                     Mib(v.bytes), v.path);
        ++n;
      } else {
        spdlog::warn("kv cache: eviction failed: {}", st.message());
      }
    }
    return n;
  }

  // Victims are gone from disk (or failed to go: then they are no longer tracked).
  void SettleLocked(const std::vector<Victim>& victims, int deleted) {
    for (const Victim& v : victims) doomed_bytes_ -= std::min(doomed_bytes_, v.bytes);
    stats_.evictions += uint64_t(deleted);
  }

  // ---- lookup and load ---------------------------------------------------------------
  struct Candidate {
    const Record* record;
    bool by_text;
  };

  std::vector<Candidate> CandidatesLocked(const DiskLookup& lookup) const {
    auto text_of = [&](const std::string& key) -> std::string_view {
      return records_.at(key).entry.text;
    };
    auto usable = [&](const std::string& key) -> std::optional<int64_t> {
      const DiskCacheEntry& e = records_.at(key).entry;
      const int64_t n = e.n_tokens;
      if (!e.loadable || n < lookup.min_tokens || n > lookup.max_tokens) return std::nullopt;
      return n;
    };
    std::vector<Candidate> out;
    for (const PrefixMatch& m :
         MatchPrefixes(tokens_, texts_, lookup.tokens, lookup.text, text_of, usable)) {
      out.push_back(Candidate{&records_.at(m.key), m.by_text});
    }
    return out;
  }

  Expected<DiskHit> Load(const DiskLookup& lookup_in, KvState& state) {
    if (!opt_.identity) return FailedPrecondition("kv cache opened without a model identity");
    if (dir_.disabled()) return NotFound("{}", dir_.disabled_why().message());
    DiskLookup lookup = lookup_in;
    lookup.max_tokens = std::min<int64_t>(lookup.max_tokens, state.ctx_size());
    std::vector<std::pair<DiskCacheEntry, bool>> cands;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const Candidate& c : CandidatesLocked(lookup))
        cands.emplace_back(c.record->entry, c.by_text);
      if (cands.empty()) ++stats_.misses;
    }
    if (cands.empty()) return NotFound("no usable disk kv entry");
    int failed = 0;
    std::string last_error;
    for (auto& [entry, by_text] : cands) {
      const auto t0 = std::chrono::steady_clock::now();
      auto loaded = LoadSnapshot(entry.path, *opt_.identity, state, opt_.load);
      if (loaded.ok()) {
        Status bad;
        if (Sha1Hex(TokensKey(loaded->tokens)) != entry.key) {
          bad = Corrupt("token ids do not match the file name");
        } else if (loaded->text != entry.text) {
          bad = Corrupt("text changed since the scan");
        }
        if (!bad.ok()) {
          (void)state.Clear();
          loaded = bad.WithContext(entry.path);
        }
      }
      if (!loaded.ok()) {
        ++failed;
        last_error = loaded.status().ToString();
        HandleLoadFailure(entry, loaded.status());
        continue;
      }
      DiskHit hit;
      hit.load_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      hit.entry = entry;
      hit.by_text = by_text;
      hit.text_bytes = by_text ? entry.text.size() : 0;
      if (!by_text && !lookup.text.empty() && lookup.text.starts_with(entry.text)) {
        hit.text_bytes = entry.text.size();
      }
      hit.tokens = std::move(loaded->tokens);
      hit.logits = std::move(loaded->logits);
      hit.tail = std::move(loaded->tail);
      hit.replay = std::move(loaded->replay);
      hit.extensions = std::move(loaded->extensions);
      hit.bytes = loaded->bytes_read;
      hit.text = entry.text;
      hit.failed_candidates = failed;
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.hits;
      }
      Status t = Touch(entry.key);
      if (!t.ok()) spdlog::warn("kv cache: touching {}: {}", entry.path, t.message());
      spdlog::info("kv cache hit tokens={} by={} load={:.1f} ms ({:.0f} MiB/s) file={}",
                   entry.n_tokens, by_text ? "text" : "tokens", hit.load_ms,
                   Mib(entry.file_bytes) / std::max(hit.load_ms / 1000.0, 1e-9), entry.path);
      return hit;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.misses;
    }
    return NotFound("{} disk kv candidate(s) failed to load; last: {}", failed, last_error);
  }

  void HandleLoadFailure(const DiskCacheEntry& entry, const Status& st) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.load_failures;
    auto it = records_.find(entry.key);
    const bool still_indexed = it != records_.end() && it->second.entry.path == entry.path;
    switch (st.code()) {
      case StatusCode::kCorrupt:
        if (still_indexed) DropLocked(entry.key);
        QuarantineLocked(entry.path, entry.file_bytes, st);
        break;
      case StatusCode::kNotFound:
        spdlog::warn("kv cache: {} vanished", entry.path);
        if (still_indexed) DropLocked(entry.key);
        break;
      default:  // another model / shape / context, or the OS: keep the file
        spdlog::warn("kv cache: not loading {}: {}", entry.path, st.ToString());
        break;
    }
  }

  // ---- save ------------------------------------------------------------------------
  Expected<std::string> Save(const KvState& state, const SnapshotContent& content) {
    if (!opt_.identity) return FailedPrecondition("kv cache opened without a model identity");
    if (dir_.read_only()) return FailedPrecondition("kv cache {} is read-only", opt_.dir);
    FLASHKV_RETURN_IF_ERROR(CheckDirectory());
    const Sha1Digest digest = TokensKey(content.tokens);
    const std::string key = Sha1Hex(digest);
    const std::vector<SnapshotExtension> extensions = SnapshotExtensionsOf(content);
    const uint64_t bytes =
        SnapshotFileBytes(state.shape(), int64_t(content.tokens.size()),
                          int64_t(content.logits.size()), content.text.size(), extensions);
    std::vector<Victim> victims;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pending_keys_.count(key)) return key;
      auto it = records_.find(key);
      if (it != records_.end()) {
        if (it->second.entry.loadable && it->second.extensions == SignatureOf(extensions)) {
          return key;  // already cached; kept as is (hits, reason, times)
        }
        // Another model's entry or other extensions: replaced.
        victims.push_back({it->second.entry.path, it->second.entry.file_bytes, "replaced"});
        doomed_bytes_ += it->second.entry.file_bytes;
        DropLocked(key);
      }
      DiskCacheEntry probe;
      probe.n_tokens = uint32_t(content.tokens.size());
      probe.file_bytes = bytes;
      std::vector<Victim> more;
      Status st = PlanLocked(bytes, probe.Value(0, 1), opt_.budget_bytes, &more);
      if (!st.ok()) {
        ++stats_.save_skipped;
        // A replaced (outdated) entry is out of the index already: delete it anyway.
        if (!victims.empty()) DeleteVictimsLater(std::move(victims));
        return st.WithContext(fmt::format("kv cache save of {} tokens", content.tokens.size()));
      }
      victims.insert(victims.end(), more.begin(), more.end());
      reserved_bytes_ += bytes;
      pending_keys_.insert(key);
    }
    // Room in the queue first: the image is allocated (or the spare buffer taken) only
    // when it may be queued.
    std::unique_ptr<SnapshotImage> spare;
    {
      std::unique_lock<std::mutex> lock(mu_);
      queue_cv_.wait(
          lock, [&] { return queue_.empty() || queued_bytes_ + bytes <= opt_.max_pending_bytes; });
      spare = std::move(spare_);
    }
    // No spare large enough (the first save, or the last one still being written): the
    // buffer made ahead, page-locked, so this capture can still be asynchronous.
    if (!spare || spare->capacity() < bytes) {
      PinnedStandby& standby = Standby(state.backend());
      if (auto ahead = standby.Take(bytes)) spare = std::move(ahead);
      standby.Prepare(bytes + bytes / 8);
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto img = PrepareSnapshot(state, *opt_.identity, content, NowMs(), spare.get());
    if (!img.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      reserved_bytes_ -= bytes;
      pending_keys_.erase(key);
      ++stats_.save_failures;
      // Victims were already taken out of the index; delete them so accounting settles.
      DeleteVictimsLater(std::move(victims));
      return img.status();
    }
    // Queued before the layers are copied: the writer CRCs and writes each layer as soon
    // as its copy has landed, so the disk works during the copy. Only the mutable part of
    // each layer is copied before Save returns; the closed rows follow asynchronously
    // (CaptureSnapshotLayersAsync), so decoding goes on while they move.
    auto capture = std::make_shared<CaptureProgress>();
    SnapshotImage* image = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Job job{std::make_unique<SnapshotImage>(std::move(*img)), key, std::move(victims), capture,
              &state.backend()};
      image = job.image.get();
      queued_bytes_ += job.image->size();
      queue_.push_back(std::move(job));
    }
    queue_cv_.notify_all();
    Expected<PendingCapture> pending = CaptureSnapshotLayersAsync(state, *image);
    // `image` may be gone from here on (written and released by the writer).
    {
      std::lock_guard<std::mutex> lock(capture->mu);
      capture->done = true;
      capture->status = pending.status();
      if (pending.ok()) capture->pending = std::move(*pending);
    }
    capture->cv.notify_all();
    if (!capture->status.ok()) return capture->status;  // the writer drops the job
    spdlog::debug(
        "kv cache: captured {} tokens ({:.1f} MiB) in {:.1f} ms", content.tokens.size(), Mib(bytes),
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    return key;
  }

  void DeleteVictimsLater(std::vector<Victim> victims) {
    // Called with mu_ held: queue a job without an image that only deletes.
    queue_.push_back(Job{nullptr, "", std::move(victims), nullptr});
    queue_cv_.notify_all();
  }

  void WriterLoop() {
    while (true) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        queue_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stop_ and drained
        job = std::move(queue_.front());
        queue_.pop_front();
        writing_ = true;
      }
      const int deleted = DeleteVictims(job.victims);
      {
        std::lock_guard<std::mutex> lock(mu_);
        SettleLocked(job.victims, deleted);
      }
      Status st;
      bool capture_failed = false;
      if (job.image) {
        st = WriteEntry(job);
        // The caller and the asynchronous copies may still be writing into the image (a
        // write that failed early): it is released only once they are done with it.
        CaptureProgress& c = *job.capture;
        (void)c.WaitReady(UINT64_MAX);
        capture_failed = !c.status.ok();
        // A buffer kept for the next save is page-locked here, off the decoding thread, so
        // the next capture's closed rows can move asynchronously.
        bool keep = false;
        if (opt_.reuse_host_buffer) {
          std::lock_guard<std::mutex> lock(mu_);
          keep = !spare_ || spare_->capacity() < job.image->capacity();
        }
        if (keep && job.backend != nullptr) {
          Status pin = job.image->Pin(*job.backend);
          if (!pin.ok())
            spdlog::debug("kv cache: snapshot buffer not page-locked: {}", pin.message());
        }
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (job.image) {
          queued_bytes_ -= job.image->size();
          reserved_bytes_ -= job.image->size();
          pending_keys_.erase(job.key);
          if (opt_.reuse_host_buffer && (!spare_ || spare_->capacity() < job.image->capacity())) {
            spare_ = std::move(job.image);
          }
          if (st.ok()) {
            ++stats_.saves;
          } else {
            ++stats_.save_failures;
            // A failed capture was returned by Save itself; Flush reports write errors.
            if (first_error_.ok() && !capture_failed) first_error_ = st;
          }
        }
        writing_ = false;
      }
      queue_cv_.notify_all();
    }
  }

  Status WriteEntry(Job& job) {
    SnapshotImage& img = *job.image;
    const auto t0 = std::chrono::steady_clock::now();
    const std::string final_path = JoinPath(opt_.dir, job.key + std::string(kSuffix));
    const std::string tmp =
        JoinPath(opt_.dir, fmt::format("{}{}{}.{}", job.key, kTempMarker, ::getpid(), ++temp_seq_));
    Status st = [&]() -> Status {
      // Saves queue: the directory may have gone since this one was admitted.
      FLASHKV_RETURN_IF_ERROR(CheckDirectory());
      FLASHKV_ASSIGN_OR_RETURN(File f, File::Create(tmp, /*exclusive=*/true));
      CaptureProgress& c = *job.capture;
      FLASHKV_RETURN_IF_ERROR(StreamSnapshotImage(
          img, f, [&c](uint64_t end) { return c.WaitReady(end); }, opt_.write));
      // One sync for the whole file: writeback of every chunk was started as it was
      // written, so this mostly waits for the last ones.
      FLASHKV_RETURN_IF_ERROR(f.SyncData());
      FLASHKV_RETURN_IF_ERROR(f.Close());
      // rename replaces a link or FIFO there, but fails on a directory that appeared since.
      struct stat there;
      if (::lstat(final_path.c_str(), &there) == 0 && S_ISDIR(there.st_mode)) {
        dir_.SetAside(final_path);
      }
      return RenameDurably(tmp, final_path);
    }();
    if (!st.ok()) {
      (void)RemoveFile(tmp);
      spdlog::warn("kv cache: write failed, entry not stored: {}", st.ToString());
      return st;
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    spdlog::info(
        "kv cache stored tokens={} reason={} size={:.1f} MiB write={:.1f} ms ({:.0f} MiB/s) "
        "file={}",
        img.header().n_tokens, SaveReasonName(img.header().reason), Mib(img.size()), ms,
        Mib(img.size()) / std::max(ms / 1000.0, 1e-9), final_path);
    Record r;
    r.entry.key = job.key;
    r.entry.path = final_path;
    r.entry.n_tokens = img.header().n_tokens;
    r.entry.file_bytes = img.size();
    r.entry.reason = img.header().reason;
    r.entry.created_ms = img.header().created_ms;
    r.entry.last_used_ms = img.header().last_used_ms;
    r.entry.numerics = img.header().identity.numerics;
    r.entry.loadable = true;
    r.entry.text = std::string(img.text());
    r.tokens.assign(img.tokens().begin(), img.tokens().end());
    r.extensions = SignatureOf(img.header());
    std::lock_guard<std::mutex> lock(mu_);
    AddLocked(std::move(r));
    return Status::Ok();
  }

  PinnedStandby& Standby(Backend& backend) {
    std::lock_guard<std::mutex> lock(standby_mu_);
    if (!standby_) standby_ = std::make_unique<PinnedStandby>(&backend);
    return *standby_;
  }

  void PrepareHostBuffer(Backend& backend, uint64_t bytes) { Standby(backend).Prepare(bytes); }

  Status Flush() {
    std::unique_lock<std::mutex> lock(mu_);
    queue_cv_.wait(lock, [&] { return queue_.empty() && !writing_; });
    Status st = first_error_;
    first_error_ = Status::Ok();
    return st;
  }

  // ---- maintenance -----------------------------------------------------------------
  Status Touch(std::string_view key) {
    std::string path;
    uint32_t hits;
    const int64_t now = NowMs();
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = records_.find(std::string(key));
      if (it == records_.end()) return NotFound("no kv cache entry {}", key);
      it->second.entry.hit_count += 1;
      it->second.entry.last_used_ms = now;
      path = it->second.entry.path;
      hits = it->second.entry.hit_count;
    }
    if (dir_.read_only()) return Status::Ok();  // counted in memory only
    FLASHKV_ASSIGN_OR_RETURN(File f, File::OpenReadWrite(path));
    return WriteSnapshotStats(f, now, hits);
  }

  std::vector<DiskCacheEntry> List() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<DiskCacheEntry> out;
    for (const auto& [key, r] : records_) out.push_back(r.entry);
    std::sort(out.begin(), out.end(), [](const DiskCacheEntry& a, const DiskCacheEntry& b) {
      return a.n_tokens != b.n_tokens ? a.n_tokens > b.n_tokens : a.key < b.key;
    });
    return out;
  }

  Status Remove(std::string_view prefix) {
    if (prefix.size() < 4) return InvalidArgument("give at least 4 hex digits of the key");
    std::string path, key;
    {
      std::lock_guard<std::mutex> lock(mu_);
      int matches = 0;
      for (const auto& [k, r] : records_) {
        if (k.starts_with(prefix)) {
          ++matches;
          key = k;
          path = r.entry.path;
        }
      }
      if (matches == 0) return NotFound("no kv cache entry starts with {}", prefix);
      if (matches > 1) return InvalidArgument("{} entries start with {}", matches, prefix);
      if (pending_keys_.count(key)) return FailedPrecondition("{} is being written", key);
      DropLocked(key);
    }
    return RemoveFile(path);
  }

  Expected<int> Collect(std::optional<uint64_t> budget) {
    if (dir_.read_only()) return FailedPrecondition("kv cache {} is read-only", opt_.dir);
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Victim> victims;
    FLASHKV_RETURN_IF_ERROR(PlanLocked(0, 0, budget.value_or(opt_.budget_bytes), &victims));
    const int n = DeleteVictims(victims);
    SettleLocked(victims, n);
    return n;
  }

  DiskCacheStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    DiskCacheStats s = stats_;
    s.budget_bytes = opt_.budget_bytes;
    s.used_bytes = UsedLocked();
    s.entries = 0;
    s.foreign_entries = 0;
    for (const auto& [k, r] : records_) (r.entry.loadable ? s.entries : s.foreign_entries)++;
    s.pending_writes = pending_keys_.size();
    return s;
  }

  bool Contains(std::span<const int32_t> tokens) const {
    const std::string key = Sha1Hex(TokensKey(tokens));
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(key);
    return pending_keys_.count(key) > 0 || (it != records_.end() && it->second.entry.loadable);
  }

  std::vector<DiskCacheEntry> CandidatesPublic(const DiskLookup& lookup) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<DiskCacheEntry> out;
    for (const Candidate& c : CandidatesLocked(lookup)) out.push_back(c.record->entry);
    return out;
  }

 private:
  const DiskCacheOptions opt_;
  CacheDirectory dir_;
  mutable std::mutex mu_;
  std::map<std::string, Record> records_;
  TokenPrefixIndex tokens_;
  TextPrefixIndex texts_;
  std::vector<LooseFile> quarantine_;
  int64_t order_ = 0;
  uint64_t entry_bytes_ = 0;  // every indexed entry (any identity)
  uint64_t other_bytes_ = 0;  // unrelated files and unreadable-version entries
  uint64_t quarantine_bytes_ = 0;
  uint64_t reserved_bytes_ = 0;  // admitted entries not yet renamed into place
  uint64_t doomed_bytes_ = 0;    // victims out of the index, not yet deleted
  std::set<std::string> pending_keys_;
  std::unique_ptr<SnapshotImage> spare_;  // the last written image's buffer, for reuse
  std::mutex standby_mu_;
  std::unique_ptr<PinnedStandby> standby_;  // made with the first state's backend
  std::deque<Job> queue_;
  uint64_t queued_bytes_ = 0;
  bool writing_ = false;
  bool stop_ = false;
  Status first_error_;
  uint64_t temp_seq_ = 0;
  DiskCacheStats stats_;
  std::condition_variable queue_cv_;
  std::thread writer_;
};

Expected<CacheDirectoryView> InspectCacheDirectory(
    const std::string& dir, const std::optional<SnapshotIdentity>& identity) {
  CacheDirectoryView view;
  FLASHKV_ASSIGN_OR_RETURN(std::vector<DirEntry> files, ListDirectory(dir));
  for (const DirEntry& f : files) {
    const std::string path = JoinPath(dir, f.name);
    view.total_bytes += f.size;
    if (f.is_dir && f.name == kQuarantineDir) {
      auto q = ListDirectory(path);
      if (!q.ok()) return q.status();
      for (const DirEntry& qf : *q) {
        view.total_bytes += qf.size;
        ++view.quarantined_files;
      }
      continue;
    }
    if (f.name.find(kTempMarker) != std::string::npos) ++view.temp_files;
    Sha1Digest key;
    if (!f.is_regular || !ParseSnapshotFileName(f.name, &key)) continue;
    Expected<ScannedSnapshot> scan = ScanEntryFile(path, key);
    if (!scan.ok()) {
      view.damaged.emplace_back(path, scan.status());
      continue;
    }
    DiskCacheEntry e;
    e.key = Sha1Hex(key);
    e.path = path;
    e.n_tokens = scan->header.n_tokens;
    e.file_bytes = f.size;
    e.reason = scan->header.reason;
    e.hit_count = scan->header.hit_count;
    e.created_ms = scan->header.created_ms;
    e.last_used_ms = scan->header.last_used_ms;
    e.numerics = scan->header.identity.numerics;
    e.loadable = identity && scan->header.identity == *identity;
    e.text = std::move(scan->text);
    view.entries.push_back(std::move(e));
  }
  std::sort(view.entries.begin(), view.entries.end(),
            [](const DiskCacheEntry& a, const DiskCacheEntry& b) {
              return a.n_tokens != b.n_tokens ? a.n_tokens > b.n_tokens : a.key < b.key;
            });
  return view;
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
  auto impl = std::make_unique<Impl>(options);
  Status st = impl->Open();
  if (!st.ok()) return st.WithContext("opening kv cache " + options.dir);
  return std::unique_ptr<DiskCache>(new DiskCache(std::move(impl), options));
}

std::vector<DiskCacheEntry> DiskCache::Candidates(const DiskLookup& lookup) const {
  return impl_->CandidatesPublic(lookup);
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
    Expected<File> f = File::OpenRead(e.path);
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

Status DiskCache::Remove(std::string_view key_prefix) {
  return impl_->Remove(key_prefix);
}
Expected<int> DiskCache::Collect(std::optional<uint64_t> budget_bytes) {
  return impl_->Collect(budget_bytes);
}
DiskCacheStats DiskCache::stats() const {
  return impl_->stats();
}

}  // namespace flashkv
