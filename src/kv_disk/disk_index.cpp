#include "kv_disk/disk_index.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "util/crc32c.h"

namespace flashkv {
ExtSignature SignatureOf(const SnapshotHeader& h) {
  ExtSignature sig;
  for (const SnapshotSection& s : h.sections) {
    // The chunk list says where the state is, not what the entry carries.
    if (s.kind == SnapshotSectionKind::kExtension && s.tag != kSnapshotChunksTag) {
      sig.emplace_back(s.tag, s.bytes, s.crc32c);
    }
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

void DiskIndex::Add(DiskRecord r) {
  const std::string key = r.entry.key;
  // References first: a replaced record's chunks that the new one names stay referenced.
  for (const SnapshotChunkRef& c : r.chunks) {
    auto it = chunks_.find(Sha1Hex(c.name));
    if (it != chunks_.end()) ++it->second.refs;
  }
  if (records_.count(key)) Drop(key);
  entry_bytes_ += r.entry.file_bytes;
  if (r.entry.loadable) {
    tokens_.Insert(key, r.tokens);
    texts_.Insert(key, r.entry.text);
  }
  records_.emplace(key, std::move(r));
}

void DiskIndex::Drop(const std::string& key) {
  auto it = records_.find(key);
  if (it == records_.end()) return;
  entry_bytes_ -= it->second.entry.file_bytes;
  for (const SnapshotChunkRef& c : it->second.chunks) {
    auto ch = chunks_.find(Sha1Hex(c.name));
    if (ch != chunks_.end() && ch->second.refs > 0) --ch->second.refs;
  }
  if (it->second.entry.loadable) {
    tokens_.Erase(it->second.tokens);
    texts_.Erase(key, it->second.entry.text);
  }
  records_.erase(it);
}

size_t DiskIndex::Clear() {
  const size_t lost = records_.size();
  while (!records_.empty()) Drop(records_.begin()->first);
  quarantine_.clear();
  quarantine_bytes_ = 0;
  other_bytes_ = 0;
  chunks_.clear();
  chunk_bytes_ = 0;
  keep_unreferenced_ = false;
  return lost;
}

void DiskIndex::AddChunk(const std::string& hex, const std::string& path,
                         const SnapshotChunkRef& ref) {
  auto [it, fresh] = chunks_.try_emplace(hex);
  if (!fresh) chunk_bytes_ -= it->second.bytes;
  it->second.path = path;
  it->second.bytes = ref.file_bytes;
  it->second.payload_crc32c = ref.payload_crc32c;
  chunk_bytes_ += ref.file_bytes;
}

const DiskChunk* DiskIndex::FindChunk(const std::string& hex) const {
  auto it = chunks_.find(hex);
  return it == chunks_.end() ? nullptr : &it->second;
}

bool DiskIndex::PinChunk(const std::string& hex) {
  auto it = chunks_.find(hex);
  if (it == chunks_.end()) return false;
  ++it->second.pins;
  return true;
}

void DiskIndex::UnpinChunk(const std::string& hex) {
  auto it = chunks_.find(hex);
  if (it != chunks_.end() && it->second.pins > 0) --it->second.pins;
}

void DiskIndex::DropChunk(const std::string& hex) {
  auto it = chunks_.find(hex);
  if (it == chunks_.end()) return;
  chunk_bytes_ -= it->second.bytes;
  chunks_.erase(it);
}

std::vector<DiskVictim> DiskIndex::TakeOrphans() {
  std::vector<DiskVictim> out;
  if (keep_unreferenced_) return out;
  for (auto it = chunks_.begin(); it != chunks_.end();) {
    if (it->second.refs == 0 && it->second.pins == 0) {
      out.push_back({it->second.path, it->second.bytes, "unreferenced chunk"});
      chunk_bytes_ -= it->second.bytes;
      doomed_bytes_ += it->second.bytes;
      it = chunks_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

double DiskIndex::ChargedBytes(const DiskRecord& r) const {
  double bytes = double(r.entry.file_bytes);
  for (const SnapshotChunkRef& c : r.chunks) {
    const DiskChunk* ch = FindChunk(Sha1Hex(c.name));
    if (ch != nullptr) bytes += double(ch->bytes) / double(std::max<uint32_t>(ch->refs, 1));
  }
  return bytes;
}

uint64_t DiskIndex::LogicalBytes(const DiskRecord& r) const {
  uint64_t bytes = r.entry.file_bytes;
  for (const SnapshotChunkRef& c : r.chunks) bytes += c.file_bytes;
  return bytes;
}

DiskRecord* DiskIndex::Find(const std::string& key) {
  auto it = records_.find(key);
  return it == records_.end() ? nullptr : &it->second;
}

const DiskRecord* DiskIndex::Find(const std::string& key) const {
  auto it = records_.find(key);
  return it == records_.end() ? nullptr : &it->second;
}

void DiskIndex::AddQuarantined(const std::string& path, uint64_t bytes) {
  quarantine_.push_back({path, bytes, order_++});
  quarantine_bytes_ += bytes;
}

Status DiskIndex::Plan(uint64_t need, double new_value, uint64_t budget, int64_t now,
                       std::vector<DiskVictim>* out) {
  const uint64_t used_now = used();
  if (need > budget) {
    return ResourceExhausted("an entry of {:.1f} MiB exceeds the {:.1f} MiB budget", CacheMib(need),
                             CacheMib(budget));
  }
  if (used_now + need <= budget) return Status::Ok();
  uint64_t excess = used_now + need - budget;
  std::vector<DiskVictim> victims;
  std::vector<size_t> q_taken;
  std::vector<std::string> e_taken;
  std::vector<size_t> qorder(quarantine_.size());
  for (size_t i = 0; i < qorder.size(); ++i) qorder[i] = i;
  std::sort(qorder.begin(), qorder.end(),
            [&](size_t a, size_t b) { return quarantine_[a].order < quarantine_[b].order; });
  uint64_t freed = 0;
  for (size_t i : qorder) {
    if (freed >= excess) break;
    q_taken.push_back(i);
    freed += quarantine_[i].bytes;
  }
  if (freed < excess) {
    // Values with each chunk charged in shares to the manifests that name it.
    std::vector<std::pair<double, const DiskRecord*>> order;
    for (const auto& [key, r] : records_) {
      order.emplace_back(r.entry.ValueFor(now, half_life_hours_, ChargedBytes(r)), &r);
    }
    std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first < b.first;
      return a.second->entry.last_used_ms < b.second->entry.last_used_ms;
    });
    // A chunk is freed with the last of its referencing manifests that goes.
    std::map<std::string, uint32_t> dropped_refs;
    for (const auto& [value, r] : order) {
      if (freed >= excess) break;
      if (new_value > 0 && value > new_value) break;
      e_taken.push_back(r->entry.key);
      freed += r->entry.file_bytes;
      for (const SnapshotChunkRef& c : r->chunks) {
        const std::string hex = Sha1Hex(c.name);
        const DiskChunk* ch = FindChunk(hex);
        if (ch == nullptr) continue;
        const uint32_t gone = ++dropped_refs[hex];
        if (gone >= ch->refs && ch->pins == 0) freed += ch->bytes;
      }
    }
  }
  if (freed < excess && new_value > 0) {
    return ResourceExhausted(
        "not admitted: it would be the first entry evicted ({:.1f} MiB needed, {:.1f} MiB of "
        "less valuable entries)",
        CacheMib(excess), CacheMib(freed));
  }
  // Without a new entry (start-up, gc) evict what can go even if files that are never
  // deleted (unrelated, being written) keep the directory over the budget.
  if (freed < excess) {
    spdlog::warn(
        "kv cache: {:.1f} MiB over the budget after evicting every entry (files that "
        "are not cache entries count too)",
        CacheMib(excess - freed));
  }
  // Commit: out of the index, bytes doomed until the deletions run.
  std::sort(q_taken.rbegin(), q_taken.rend());
  for (size_t i : q_taken) {
    victims.push_back({quarantine_[i].path, quarantine_[i].bytes, "quarantined file"});
    quarantine_bytes_ -= quarantine_[i].bytes;
    doomed_bytes_ += quarantine_[i].bytes;
    quarantine_.erase(quarantine_.begin() + ptrdiff_t(i));
  }
  for (const std::string& key : e_taken) {
    const DiskCacheEntry& e = records_.at(key).entry;
    victims.push_back(Evict(key, fmt::format("tokens={} hits={} reason={}", e.n_tokens, e.hit_count,
                                             SaveReasonName(e.reason))));
  }
  for (DiskVictim& v : TakeOrphans()) victims.push_back(std::move(v));
  *out = std::move(victims);
  return Status::Ok();
}

DiskVictim DiskIndex::Evict(const std::string& key, std::string what) {
  const DiskCacheEntry& e = records_.at(key).entry;
  DiskVictim v{e.path, e.file_bytes, std::move(what)};
  doomed_bytes_ += e.file_bytes;
  Drop(key);
  return v;
}

void DiskIndex::Settle(const std::vector<DiskVictim>& victims) {
  for (const DiskVictim& v : victims) doomed_bytes_ -= std::min(doomed_bytes_, v.bytes);
}

std::vector<DiskIndex::Candidate> DiskIndex::Candidates(const ResumeLookup& lookup) const {
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

std::vector<DiskCacheEntry> DiskIndex::List() const {
  std::vector<DiskCacheEntry> out;
  for (const auto& [key, r] : records_) out.push_back(r.entry);
  std::sort(out.begin(), out.end(), [](const DiskCacheEntry& a, const DiskCacheEntry& b) {
    return a.n_tokens != b.n_tokens ? a.n_tokens > b.n_tokens : a.key < b.key;
  });
  return out;
}

void DiskIndex::Count(uint64_t* loadable, uint64_t* foreign) const {
  *loadable = *foreign = 0;
  for (const auto& [k, r] : records_) (r.entry.loadable ? *loadable : *foreign)++;
}

}  // namespace flashkv
