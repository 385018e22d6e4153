#include "kv_ram/ram_cache.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "snapshot/snapshot_memory.h"
#include "util/sha1.h"

namespace flashkv {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

RamCache::RamCache(RamCacheOptions options) : options_(std::move(options)), standby_(options_.pin) {
  standby_.set_enabled(options_.standby);
  stats_.budget_bytes = options_.budget_bytes;
}

RamCache::~RamCache() {
  // Each image unpins its buffer as it is freed (SnapshotImage::Pin).
}

SnapshotImage RamCache::Take(const std::string& key) {
  auto it = entries_.find(key);
  Entry& e = it->second;
  (void)e.pending.Wait();  // nothing may still be copying into a buffer that is let go
  tokens_.Erase(e.image.tokens());
  if (!e.text.empty()) texts_.Erase(key, e.text);
  lru_.erase(e.lru);
  entry_bytes_ -= e.image.capacity();
  SnapshotImage image = std::move(e.image);
  entries_.erase(it);
  return image;
}

Expected<std::string> RamCache::Offer(const KvState& state, const SnapshotContent& content) {
  const uint64_t need =
      SnapshotFileBytes(state.shape(), state.n_tokens(), int64_t(content.logits.size()),
                        content.text.size(), SnapshotExtensionsOf(content));
  if (need > options_.budget_bytes) {
    ++stats_.put_skipped;
    return ResourceExhausted("a {} MiB snapshot does not fit the RAM tier's {} MiB", need >> 20,
                             options_.budget_bytes >> 20);
  }
  // An older image of the same ids is replaced; evicted buffers are kept for reuse, the
  // largest one only, since a capture into mapped, page-locked pages is several times
  // faster than into fresh memory.
  std::unique_ptr<SnapshotImage> reusable;
  auto keep = [&](SnapshotImage image) {
    if (reusable && reusable->capacity() >= image.capacity()) return;  // `image` is freed
    reusable = std::make_unique<SnapshotImage>(std::move(image));
  };
  const std::string key = Sha1Hex(TokensKey(content.tokens));
  if (entries_.count(key) != 0) keep(Take(key));
  while (entry_bytes_ + need > options_.budget_bytes && !lru_.empty()) {
    keep(Take(lru_.back()));
    ++stats_.evictions;
  }
  if (reusable && (reusable->capacity() < need ||
                   entry_bytes_ + reusable->capacity() > options_.budget_bytes)) {
    reusable.reset();
  }
  // Else the standby buffer, when it is not much larger than needed (an entry keeps its
  // whole buffer, and the budget counts it).
  if (!reusable) {
    reusable = standby_.Take(need);
    if (reusable && (reusable->capacity() > 2 * need ||
                     entry_bytes_ + reusable->capacity() > options_.budget_bytes)) {
      reusable.reset();
    }
  }

  Expected<SnapshotImage> prepared =
      PrepareSnapshot(state, options_.identity, content, NowMs(), reusable.get());
  reusable.reset();  // freed unless its buffer was taken over
  if (!prepared.ok()) return prepared.status();
  // The next put's buffer, a little larger (sessions grow), made while this one is used.
  standby_.Prepare(need + need / 8);
  SnapshotImage image = std::move(*prepared);
  if (options_.pin != nullptr) {
    Status st = image.Pin(*options_.pin);
    if (!st.ok()) spdlog::warn("kv ram: {} (this entry moves through staging)", st.message());
  }
  PendingCapture pending;
  if (image.pinned()) {
    FLASHKV_ASSIGN_OR_RETURN(pending, CaptureSnapshotLayersAsync(state, image));
  } else {
    FLASHKV_RETURN_IF_ERROR(CaptureSnapshotLayers(state, image));
  }
  lru_.push_front(key);
  Entry e{std::move(image), std::string(content.text), lru_.begin(), std::move(pending)};
  tokens_.Insert(key, e.image.tokens());
  if (!e.text.empty()) texts_.Insert(key, e.text);
  entry_bytes_ += e.image.capacity();
  stats_.bytes_in += e.image.size();
  entries_.emplace(key, std::move(e));
  ++stats_.puts;
  return key;
}

Expected<TierHit> RamCache::Restore(const ResumeLookup& lookup, KvState& state) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t max_tokens = std::min<int64_t>(lookup.max_tokens, state.ctx_size());
  auto text_of = [this](const std::string& key) -> std::string_view {
    return entries_.at(key).text;
  };
  auto usable = [&](const std::string& key) -> std::optional<int64_t> {
    const int64_t n = int64_t(entries_.at(key).image.tokens().size());
    if (n < lookup.min_tokens || n > max_tokens) return std::nullopt;
    return n;
  };
  const std::vector<PrefixMatch> cands =
      MatchPrefixes(tokens_, texts_, lookup.tokens, lookup.text, text_of, usable);
  Status last;
  for (const PrefixMatch& m : cands) {
    const std::string& key = m.key;
    const bool by_text = m.by_text;
    Entry& e = entries_.at(key);
    Status landed = e.pending.Wait();
    e.pending = PendingCapture();
    Expected<RestoredSnapshot> restored =
        landed.ok() ? RestoreSnapshotImage(e.image, options_.identity, state)
                    : Expected<RestoredSnapshot>(landed);
    if (!restored.ok()) {
      // Only a bug can get here (the identity and shape were this process's own).
      last = restored.status();
      spdlog::error("kv ram: entry {} did not restore, dropped: {}", key, last.ToString());
      Take(key);
      continue;
    }
    TierHit hit;
    hit.by_text = by_text;
    hit.text_bytes =
        by_text || (!e.text.empty() && lookup.text.starts_with(e.text)) ? e.text.size() : 0;
    hit.tokens.assign(e.image.tokens().begin(), e.image.tokens().end());
    hit.logits = std::move(restored->logits);
    for (const SnapshotSection& s : e.image.header().sections) {
      if (s.kind != SnapshotSectionKind::kExtension) continue;
      hit.extensions.push_back(SnapshotExtension{
          s.tag,
          std::string(reinterpret_cast<const char*>(e.image.data() + s.offset), size_t(s.bytes))});
    }
    // This process wrote the image: its own sections cannot be malformed.
    (void)TakeKvSections(&hit.extensions, &hit.tail, &hit.replay);
    hit.text = e.text;
    hit.bytes = restored->layer_bytes;
    hit.load_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    lru_.splice(lru_.begin(), lru_, e.lru);
    ++stats_.hits;
    stats_.bytes_out += hit.bytes;
    return hit;
  }
  ++stats_.misses;
  if (!last.ok()) return last;
  return NotFound("no usable RAM kv entry");
}

Status RamCache::Evict(std::string_view key) {
  if (entries_.count(std::string(key)) == 0) return NotFound("no RAM kv entry {}", key);
  Take(std::string(key));
  return Status::Ok();
}

bool RamCache::Contains(std::span<const int32_t> tokens) const {
  return entries_.count(Sha1Hex(TokensKey(tokens))) != 0;
}

RamCacheStats RamCache::stats() const {
  RamCacheStats s = stats_;
  s.used_bytes = entry_bytes_;
  s.entries = entries_.size();
  return s;
}

}  // namespace flashkv
