#include "engine/tool_replay_map.h"

#include <cstring>
#include <random>

namespace flashkv {
namespace {

constexpr char kTrailerMagic[3] = {'K', 'T', 'M'};
constexpr uint8_t kTrailerVersion = 1;
constexpr size_t kMaxIdBytes = 256;
constexpr size_t kMaxBlockBytes = size_t(512) << 20;

void PutU32(uint32_t v, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(char((v >> (8 * i)) & 0xff));
}

uint32_t GetU32(std::string_view s, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(uint8_t(s[at + size_t(i)])) << (8 * i);
  return v;
}

}  // namespace

std::string NewRandomId(std::string_view prefix) {
  // random_device reads the OS entropy source; ids must not be guessable by other
  // clients of the same server, because they unlock replayed bytes.
  thread_local std::random_device rd;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(prefix);
  for (int i = 0; i < 4; ++i) {
    uint32_t r = rd();
    for (int j = 0; j < 8; ++j) {
      id.push_back(kHex[r & 15]);
      r >>= 4;
    }
  }
  return id;
}

ToolReplayMap::ToolReplayMap(size_t max_ids, size_t max_bytes)
    : max_ids_(max_ids == 0 ? 1 : max_ids), max_bytes_(max_bytes) {}

std::shared_ptr<const std::string> ToolReplayMap::InternLocked(std::string_view block) {
  auto it = blocks_.find(block);
  if (it != blocks_.end()) {
    ++it->second.refs;
    return it->second.data;
  }
  auto data = std::make_shared<const std::string>(block);
  blocks_.emplace(std::string_view(*data), Block{data, 1});
  bytes_ += data->size();
  return data;
}

void ToolReplayMap::ReleaseLocked(const Entry& e) {
  bytes_ -= e.id.size();
  auto it = blocks_.find(std::string_view(*e.block));
  if (it != blocks_.end() && --it->second.refs == 0) {
    bytes_ -= it->second.data->size();
    blocks_.erase(it);
  }
}

void ToolReplayMap::RememberLocked(const std::string& id,
                                   std::shared_ptr<const std::string> block) {
  auto found = by_id_.find(id);
  if (found != by_id_.end()) {
    ReleaseLocked(*found->second);
    lru_.erase(found->second);
    by_id_.erase(found);
  }
  lru_.push_front(Entry{id, std::move(block)});
  by_id_.emplace(id, lru_.begin());
  bytes_ += id.size();
}

void ToolReplayMap::EvictLocked() {
  // Keep at least the newest entry even when it alone exceeds the byte budget.
  while (lru_.size() > 1 && (lru_.size() > max_ids_ || bytes_ > max_bytes_)) {
    const Entry& victim = lru_.back();
    ReleaseLocked(victim);
    by_id_.erase(victim.id);
    lru_.pop_back();
  }
}

void ToolReplayMap::Remember(std::span<const std::string> ids, std::string_view dsml_block) {
  if (ids.empty() || dsml_block.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& id : ids) {
    if (id.empty()) continue;
    RememberLocked(id, InternLocked(dsml_block));
  }
  EvictLocked();
}

std::optional<std::string> ToolReplayMap::Resolve(std::span<const std::string> ids) {
  if (ids.empty()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  const std::string* block = nullptr;
  for (const std::string& id : ids) {
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return std::nullopt;
    const std::string* b = it->second->block.get();
    if (block != nullptr && *b != *block) return std::nullopt;
    block = b;
    lru_.splice(lru_.begin(), lru_, it->second);  // touch
  }
  return *block;
}

int ToolReplayMap::ApplyTo(std::vector<ChatMessage>* messages) {
  int applied = 0;
  for (ChatMessage& m : *messages) {
    if (m.role != ChatRole::kAssistant || m.tool_calls.empty() || !m.raw_dsml.empty()) continue;
    std::vector<std::string> ids;
    ids.reserve(m.tool_calls.size());
    for (const ToolCall& c : m.tool_calls) ids.push_back(c.id);
    if (auto block = Resolve(ids)) {
      m.raw_dsml = std::move(*block);
      ++applied;
    }
  }
  return applied;
}

size_t ToolReplayMap::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

size_t ToolReplayMap::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

// Trailer layout (little-endian): "KTM", u8 version 1, u32 entry count, then per entry
// u32 id_len, u32 dsml_len, id bytes, block bytes. Each id is written with its own copy
// of the block, as ds4 does, so a reader needs no second table.
std::string ToolReplayMap::EncodeTrailer(std::string_view rendered_text) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string body;
  uint32_t count = 0;
  std::unordered_map<const std::string*, bool> in_text;     // per distinct block
  for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {  // oldest first
    const std::string* block = it->block.get();
    auto [pos, fresh] = in_text.emplace(block, false);
    if (fresh) pos->second = rendered_text.find(*block) != std::string_view::npos;
    if (!pos->second) continue;
    PutU32(uint32_t(it->id.size()), &body);
    PutU32(uint32_t(block->size()), &body);
    body += it->id;
    body += *block;
    ++count;
  }
  if (count == 0) return {};
  std::string out(kTrailerMagic, 3);
  out.push_back(char(kTrailerVersion));
  PutU32(count, &out);
  return out + body;
}

Expected<size_t> ToolReplayMap::DecodeTrailer(std::string_view bytes) {
  if (bytes.size() < 8 || std::memcmp(bytes.data(), kTrailerMagic, 3) != 0) {
    return Corrupt("tool-id map trailer: bad magic");
  }
  if (uint8_t(bytes[3]) != kTrailerVersion) {
    return Unsupported("tool-id map trailer: version {}", int(uint8_t(bytes[3])));
  }
  const uint32_t count = GetU32(bytes, 4);
  if (count > 4 * max_ids_) return Corrupt("tool-id map trailer: {} entries is too many", count);
  size_t at = 8;
  size_t read = 0;
  std::lock_guard<std::mutex> lock(mu_);
  for (uint32_t i = 0; i < count; ++i) {
    if (bytes.size() - at < 8)
      return Corrupt("tool-id map trailer: entry {} truncated at offset {}", i, at);
    const uint32_t id_len = GetU32(bytes, at);
    const uint32_t dsml_len = GetU32(bytes, at + 4);
    if (id_len == 0 || id_len > kMaxIdBytes || dsml_len == 0 || dsml_len > kMaxBlockBytes ||
        bytes.size() - at - 8 < size_t(id_len) + dsml_len) {
      EvictLocked();
      return Corrupt("tool-id map trailer: entry {} at offset {} is malformed", i, at);
    }
    const std::string id(bytes.substr(at + 8, id_len));
    RememberLocked(id, InternLocked(bytes.substr(at + 8 + id_len, dsml_len)));
    at += 8 + size_t(id_len) + dsml_len;
    ++read;
  }
  EvictLocked();
  return read;
}

}  // namespace flashkv
