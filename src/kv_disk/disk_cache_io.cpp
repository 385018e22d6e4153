// The request path of the disk tier (DiskCache::Impl, kv_disk/disk_cache_impl.h): Load tries
// the candidates in the resume order and quarantines damage; Save admits an entry against
// the budget, captures the state and queues it for the writer.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kv_disk/disk_cache_impl.h"
#include "kv_disk/disk_scan.h"
#include "util/file_io.h"

namespace flashkv {

Expected<DiskHit> DiskCache::Impl::Load(const DiskLookup& lookup_in, KvState& state) {
  if (!opt_.identity) return FailedPrecondition("kv cache opened without a model identity");
  if (dir_.disabled()) return NotFound("{}", dir_.disabled_why().message());
  DiskLookup lookup = lookup_in;
  lookup.max_tokens = std::min<int64_t>(lookup.max_tokens, state.ctx_size());
  std::vector<std::pair<DiskCacheEntry, bool>> cands;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const DiskIndex::Candidate& c : index_.Candidates(lookup)) {
      cands.emplace_back(c.record->entry, c.by_text);
    }
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
      // A damaged chunk fails every manifest that names it: set it aside too.
      if (loaded.status().code() == StatusCode::kCorrupt && entry.chunks > 0) {
        CheckChunksOf(entry);
      }
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
    hit.direct_bytes = loaded->direct_bytes;
    hit.prepare_ms = loaded->prepare_ms;
    hit.text = entry.text;
    hit.failed_candidates = failed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.hits;
    }
    Status t = Touch(entry.key);
    if (!t.ok()) spdlog::warn("kv cache: touching {}: {}", entry.path, t.message());
    spdlog::info(
        "kv cache hit tokens={} by={} load={:.1f} ms ({:.0f} MiB/s, {:.0f} MiB O_DIRECT) "
        "file={}",
        entry.n_tokens, by_text ? "text" : "tokens", hit.load_ms,
        CacheMib(hit.bytes) / std::max(hit.load_ms / 1000.0, 1e-9), CacheMib(hit.direct_bytes),
        entry.path);
    return hit;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.misses;
  }
  return NotFound("{} disk kv candidate(s) failed to load; last: {}", failed, last_error);
}

void DiskCache::Impl::HandleLoadFailure(const DiskCacheEntry& entry, const Status& st) {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.load_failures;
  const DiskRecord* r = index_.Find(entry.key);
  const bool still_indexed = r != nullptr && r->entry.path == entry.path;
  switch (st.code()) {
    case StatusCode::kCorrupt: {
      if (still_indexed) index_.Drop(entry.key);
      QuarantineLocked(entry.path, entry.file_bytes, st);
      NoteRemoved(entry.path, entry.file_bytes);
      // Chunks only it named are of no use now.
      std::vector<DiskVictim> orphans = index_.TakeOrphans();
      if (!orphans.empty()) writer_.Submit(DiskWriteJob::DeleteOnly(std::move(orphans)));
      break;
    }
    case StatusCode::kNotFound:
      spdlog::warn("kv cache: {} vanished", entry.path);
      if (still_indexed) index_.Drop(entry.key);
      break;
    default:  // another model / shape / context, or the OS: keep the file
      spdlog::warn("kv cache: not loading {}: {}", entry.path, st.ToString());
      break;
  }
}

Expected<std::string> DiskCache::Impl::Save(const KvState& state, const SnapshotContent& content) {
  if (!opt_.identity) return FailedPrecondition("kv cache opened without a model identity");
  if (dir_.read_only()) return FailedPrecondition("kv cache {} is read-only", opt_.dir);
  FLASHKV_RETURN_IF_ERROR(CheckDirectory());
  const Sha1Digest digest = TokensKey(content.tokens);
  const std::string key = Sha1Hex(digest);
  const std::vector<SnapshotExtension> extensions = SnapshotExtensionsOf(content);
  const int64_t n_tokens = int64_t(content.tokens.size());
  // Chunked (version 2) when the shape allows the configured chunk size.
  uint32_t chunk_tokens = opt_.chunk_tokens;
  if (chunk_tokens > 0 && !CheckChunkTokens(state.shape(), chunk_tokens).ok()) chunk_tokens = 0;
  const uint64_t image_bytes = SnapshotFileBytes(
      state.shape(), n_tokens, int64_t(content.logits.size()), content.text.size(), extensions);
  std::vector<Sha1Digest> chunk_names;
  uint64_t manifest_bytes = image_bytes;
  if (chunk_tokens > 0) {
    chunk_names = ChunkNames(*opt_.identity, chunk_tokens, content.tokens);
    manifest_bytes = ManifestFileBytes(state.shape(), n_tokens, int64_t(content.logits.size()),
                                       content.text.size(), extensions, chunk_tokens);
  }
  const uint64_t chunk_file_bytes =
      chunk_tokens > 0 ? ChunkFileBytes(state.shape(), chunk_tokens) : 0;
  uint64_t bytes = manifest_bytes;  // what this save adds to the directory
  std::vector<DiskVictim> victims;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Sha1Digest& n : chunk_names) {
      if (index_.FindChunk(Sha1Hex(n)) == nullptr) bytes += chunk_file_bytes;
    }
    if (pending_keys_.count(key)) return key;
    if (const DiskRecord* r = index_.Find(key)) {
      if (r->entry.loadable && r->extensions == SignatureOf(extensions)) {
        return key;  // already cached; kept as is (hits, reason, times)
      }
      // Another model's entry or other extensions: replaced.
      victims.push_back(index_.Evict(key, "replaced"));
    }
    if (Status rule = CheckWriteRulesLocked(content.tokens, bytes); !rule.ok()) {
      ++stats_.save_skipped;
      if (!victims.empty()) writer_.Submit(DiskWriteJob::DeleteOnly(std::move(victims)));
      return rule.WithContext(fmt::format("kv cache save of {} tokens", content.tokens.size()));
    }
    DiskCacheEntry probe;
    probe.n_tokens = uint32_t(content.tokens.size());
    probe.file_bytes = bytes;
    std::vector<DiskVictim> more;
    Status st = index_.Plan(bytes, probe.Value(0, 1), opt_.budget_bytes, CacheNowMs(), &more);
    if (!st.ok()) {
      ++stats_.save_skipped;
      // A replaced (outdated) entry is out of the index already: delete it anyway.
      if (!victims.empty()) writer_.Submit(DiskWriteJob::DeleteOnly(std::move(victims)));
      return st.WithContext(fmt::format("kv cache save of {} tokens", content.tokens.size()));
    }
    victims.insert(victims.end(), more.begin(), more.end());
    index_.Reserve(bytes);
    queued_write_bytes_ += bytes;
    pending_keys_.insert(key);
  }
  // Room in the queue first: the image is allocated (or the spare buffer taken) only
  // when it may be queued.
  std::unique_ptr<SnapshotImage> spare = writer_.WaitForRoom(image_bytes);
  // No spare large enough (the first save, or the last one still being written): the
  // buffer made ahead, page-locked, so this capture can still be asynchronous.
  if (!spare || spare->capacity() < image_bytes) {
    PinnedStandby& standby = Standby(state.backend());
    if (auto ahead = standby.Take(image_bytes)) spare = std::move(ahead);
    standby.Prepare(image_bytes + image_bytes / 8);
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto img = PrepareSnapshot(state, *opt_.identity, content, CacheNowMs(), spare.get());
  if (!img.ok()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      index_.Unreserve(bytes);
      queued_write_bytes_ -= bytes;
      pending_keys_.erase(key);
      ++stats_.save_failures;
    }
    // Victims were already taken out of the index; delete them so accounting settles.
    writer_.Submit(DiskWriteJob::DeleteOnly(std::move(victims)));
    return img.status();
  }
  // Queued before the layers are copied: the writer CRCs and writes each layer as soon
  // as its copy has landed, so the disk works during the copy. Only the mutable part of
  // each layer is copied before Save returns; the closed rows follow asynchronously
  // (CaptureSnapshotLayersAsync), so decoding goes on while they move.
  auto capture = std::make_shared<CaptureProgress>();
  auto image = std::make_unique<SnapshotImage>(std::move(*img));
  SnapshotImage& target = *image;
  DiskWriteJob job{std::move(image),   key,     JoinPath(opt_.dir, SnapshotFileName(digest)),
                   std::move(victims), capture, &state.backend()};
  job.chunk_tokens = chunk_tokens;
  job.reserved = bytes;
  writer_.Submit(std::move(job));
  // `target` may be gone once the capture is finished (written and released).
  capture->Finish(CaptureSnapshotLayersAsync(state, target));
  if (!capture->status.ok()) return capture->status;  // the writer drops the job
  spdlog::debug(
      "kv cache: captured {} tokens ({:.1f} MiB) in {:.1f} ms", content.tokens.size(),
      CacheMib(image_bytes),
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return key;
}

int64_t DiskCache::Impl::BudgetNowMs() const {
  return opt_.clock_ms ? opt_.clock_ms() : CacheNowMs();
}

uint64_t DiskCache::Impl::WrittenInWindowLocked(int64_t now_ms) {
  return window_.InWindow(now_ms);
}

DiskCache::Impl::WindowImage DiskCache::Impl::ChargeWritesLocked(uint64_t bytes) {
  window_.Add(BudgetNowMs(), bytes);
  WindowImage image{window_.Encode(), ++window_generation_};
  // The file counts against the space budget as every file here does (written before
  // the save's Flush returns).
  if (!dir_.read_only()) {
    const uint64_t size = image.bytes.size();
    if (size > window_file_bytes_) index_.AddOtherBytes(size - window_file_bytes_);
    if (size < window_file_bytes_) index_.RemoveOtherBytes(window_file_bytes_ - size);
    window_file_bytes_ = size;
  }
  return image;
}

void DiskCache::Impl::PersistWindow(const WindowImage& image) {
  if (image.generation == 0 || dir_.read_only()) return;
  std::lock_guard<std::mutex> lock(window_file_mu_);
  if (image.generation <= window_stored_) return;  // a later window is already stored
  Status st = DiskWriteWindow::StoreFile(opt_.dir, image.bytes);
  if (st.ok()) {
    window_stored_ = image.generation;
    window_store_logged_ = false;
  } else if (!window_store_logged_) {
    // The budget still holds in memory; only a restart would forget it.
    spdlog::warn("kv cache: cannot store the write-budget window: {}", st.ToString());
    window_store_logged_ = true;
  }
}

void DiskCache::Impl::LoadWindow() {
  DiskWriteWindow loaded;
  Status st = DiskWriteWindow::LoadFile(opt_.dir, BudgetNowMs(), &loaded);
  if (!st.ok()) {
    spdlog::warn("kv cache: ignoring the write-budget window ({}); it starts empty", st.ToString());
  }
  std::lock_guard<std::mutex> lock(mu_);
  window_ = std::move(loaded);
  if (window_.buckets() > 0) {
    spdlog::info("kv cache: {:.1f} MiB written in the last 24 h (from {})",
                 CacheMib(window_.InWindow(BudgetNowMs())), kWriteWindowFileName);
  }
}

Status DiskCache::Impl::CheckWriteRulesLocked(std::span<const int32_t> tokens, uint64_t bytes) {
  if (opt_.write_budget_bytes_per_day > 0) {
    const uint64_t used = WrittenInWindowLocked(BudgetNowMs()) + queued_write_bytes_;
    if (used + bytes > opt_.write_budget_bytes_per_day) {
      ++stats_.save_skipped_write_budget;
      return ResourceExhausted(
          "skipped by the disk write budget: {:.1f} MiB written or queued in the last 24 h, "
          "{:.1f} MiB more would pass {:.1f} MiB per day",
          CacheMib(used), CacheMib(bytes), CacheMib(opt_.write_budget_bytes_per_day));
    }
  }
  if (opt_.min_tokens_per_mib > 0) {
    // The prefill this entry spares: its tokens beyond the longest stored entry it extends
    // (a restore of that one plus a short prefill reaches the same point).
    ResumeLookup lookup;
    lookup.tokens = tokens;
    lookup.min_tokens = 1;
    lookup.max_tokens = int64_t(tokens.size()) - 1;
    int64_t have = 0;
    for (const DiskIndex::Candidate& c : index_.Candidates(lookup)) {
      if (!c.by_text) have = std::max<int64_t>(have, c.record->entry.n_tokens);
    }
    const double spared = double(int64_t(tokens.size()) - have);
    const double worth = spared / std::max(CacheMib(bytes), 1e-9);
    if (worth < opt_.min_tokens_per_mib) {
      ++stats_.save_skipped_not_worth;
      return ResourceExhausted(
          "not worth its writes: {:.0f} tokens of prefill spared for {:.1f} MiB ({:.1f} "
          "tokens/MiB, the minimum is {:.1f})",
          spared, CacheMib(bytes), worth, opt_.min_tokens_per_mib);
    }
  }
  return Status::Ok();
}

}  // namespace flashkv
