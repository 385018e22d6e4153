#include "kv_remote/remote_cluster.h"

#include <hiredis/hiredis.h>

#include <charconv>

namespace flashkv {
namespace {

// CRC-16/XMODEM (polynomial 0x1021, initial 0), the one Redis Cluster hashes keys with.
uint16_t Crc16(std::string_view s) {
  uint16_t crc = 0;
  for (unsigned char c : s) {
    crc ^= uint16_t(c) << 8;
    for (int i = 0; i < 8; ++i)
      crc = (crc & 0x8000) != 0 ? uint16_t((crc << 1) ^ 0x1021) : crc << 1;
  }
  return crc;
}

template <typename T>
bool ParseInt(std::string_view s, T* out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

}  // namespace

uint16_t RedisKeySlot(std::string_view key) {
  // Only the first '{' counts, and only when a '}' follows it with something between.
  if (const size_t open = key.find('{'); open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return uint16_t(Crc16(key) % kRedisClusterSlots);
}

std::optional<RemoteRedirect> ParseRemoteRedirect(std::string_view error, const RemoteNode& from) {
  RemoteRedirect r;
  if (error.starts_with("MOVED ")) {
    error.remove_prefix(6);
  } else if (error.starts_with("ASK ")) {
    r.ask = true;
    error.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const size_t sp = error.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  uint32_t slot = 0;
  if (!ParseInt(error.substr(0, sp), &slot) || slot >= kRedisClusterSlots) return std::nullopt;
  r.slot = uint16_t(slot);
  const std::string_view where = error.substr(sp + 1);
  const size_t colon = where.rfind(':');  // an IPv6 host holds colons too
  if (colon == std::string_view::npos) return std::nullopt;
  if (!ParseInt(where.substr(colon + 1), &r.node.port) || r.node.port < 1 || r.node.port > 65535) {
    return std::nullopt;
  }
  std::string_view host = where.substr(0, colon);
  if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
  r.node.host = host.empty() ? from.host : std::string(host);
  return r;
}

const RemoteNode* RemoteSlotMap::Owner(uint16_t slot) const {
  if (owner_.empty() || owner_[slot] < 0) return nullptr;
  return &nodes_[size_t(owner_[slot])];
}

int RemoteSlotMap::IndexOf(const RemoteNode& node) {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i] == node) return int(i);
  }
  nodes_.push_back(node);
  return int(nodes_.size() - 1);
}

void RemoteSlotMap::Set(uint16_t slot, const RemoteNode& node) {
  if (owner_.empty()) owner_.assign(kRedisClusterSlots, -1);
  owner_[slot] = int16_t(IndexOf(node));
}

Status RemoteSlotMap::Load(const redisReply& reply, const RemoteNode& from) {
  if (reply.type != REDIS_REPLY_ARRAY) return Corrupt("CLUSTER SLOTS: not an array");
  RemoteSlotMap next;
  next.owner_.assign(kRedisClusterSlots, -1);
  for (size_t i = 0; i < reply.elements; ++i) {
    // [start, end, [host, port, id, ...], replicas...]
    const redisReply* range = reply.element[i];
    if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
        range->element[0]->type != REDIS_REPLY_INTEGER ||
        range->element[1]->type != REDIS_REPLY_INTEGER ||
        range->element[2]->type != REDIS_REPLY_ARRAY || range->element[2]->elements < 2) {
      return Corrupt("CLUSTER SLOTS: an unexpected range entry");
    }
    const long long lo = range->element[0]->integer, hi = range->element[1]->integer;
    const redisReply* master = range->element[2];
    if (lo < 0 || hi < lo || hi >= kRedisClusterSlots ||
        master->element[0]->type != REDIS_REPLY_STRING ||
        master->element[1]->type != REDIS_REPLY_INTEGER) {
      return Corrupt("CLUSTER SLOTS: an unexpected range entry");
    }
    RemoteNode node;
    node.host.assign(master->element[0]->str, master->element[0]->len);
    if (node.host.empty() || node.host == "?") node.host = from.host;
    node.port = int(master->element[1]->integer);
    const int16_t idx = int16_t(next.IndexOf(node));
    for (long long s = lo; s <= hi; ++s) next.owner_[size_t(s)] = idx;
  }
  *this = std::move(next);
  return Status::Ok();
}

}  // namespace flashkv
