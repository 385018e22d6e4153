// What a client of a Redis Cluster needs beyond plain RESP, for kv_remote/remote_store.h: the
// slot a key hashes to (CRC16/XMODEM of the key, or of its first non-empty `{...}` hash
// tag, mod 16384), the MOVED / ASK redirect errors a node answers for a key it does not
// serve, and the slot map a `CLUSTER SLOTS` reply describes (which master serves which
// slot range). Must not: connect or send commands (RemoteStore does).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

struct redisReply;

namespace flashkv {

inline constexpr uint32_t kRedisClusterSlots = 16384;

uint16_t RedisKeySlot(std::string_view key);

struct RemoteNode {
  std::string host;
  int port = 0;
  bool operator==(const RemoteNode&) const = default;
};

// "MOVED <slot> <host>:<port>" (the slot lives there now) or "ASK <slot> <host>:<port>"
// (this one key, mid-migration: ask there once, after ASKING). An empty host (Redis 7's
// "MOVED 12 :7001") means the host of the node that answered, `from`.
struct RemoteRedirect {
  bool ask = false;
  uint16_t slot = 0;
  RemoteNode node;
};
std::optional<RemoteRedirect> ParseRemoteRedirect(std::string_view error, const RemoteNode& from);

// Which master serves each slot; a slot with no known master is routed to the seed.
class RemoteSlotMap {
 public:
  bool empty() const { return nodes_.empty(); }
  // The master of `slot`, or null when unknown.
  const RemoteNode* Owner(uint16_t slot) const;
  void Set(uint16_t slot, const RemoteNode& node);
  // Every master named (each once).
  const std::vector<RemoteNode>& nodes() const { return nodes_; }

  // Replaces the map with a CLUSTER SLOTS reply's; `from` fills in empty or "?" hosts.
  // kCorrupt for a reply of another shape (the map is then unchanged).
  Status Load(const redisReply& reply, const RemoteNode& from);

 private:
  int IndexOf(const RemoteNode& node);

  std::vector<RemoteNode> nodes_;
  std::vector<int16_t> owner_;  // kRedisClusterSlots entries, -1: unknown
};

}  // namespace flashkv
