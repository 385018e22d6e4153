// RemoteStore: one connection to the shared KV tier's RESP store (Redis, a Redis Cluster
// node or proxy, or any server speaking RESP), on hiredis. It stores a cache's objects by
// name (whatever files a disk save wrote) and an index of entries by (model fingerprint,
// numerics, n_tokens, entry name = SHA-1 of the token ids); keys and value framing are in
// docs/KV_FORMAT.md "Remote tier". Plain single-key commands only (GET, SET, EXISTS, ZADD,
// ZREVRANGEBYSCORE, PING, SELECT): no Lua, no modules, no multi-key commands, so every
// command names one key and works on any node of a Redis Cluster that serves its slot.
//
// Redis Cluster (kv_remote/remote_cluster.h): the address is a seed. A node's MOVED reply makes
// the store a cluster client: it loads the slot map (CLUSTER SLOTS), connects to the
// owning node and retries; an ASK reply (a slot mid-migration) is retried once on the
// named node after ASKING. At most kRemoteMaxRedirects hops per command, then kIoError.
// A plain Redis never answers MOVED and never sees a CLUSTER command. In cluster mode
// Ping() checks every master of the slot map (a dead master makes the store unusable
// for the entries whose parts it holds: the tier backs off until it answers again).
//
// Connects to a node on first use and again after any connection error. Every command has
// a hard deadline (kv_remote/remote_command.h: no byte pattern from the server holds a call past
// it) — its own command timeout, or the end of the whole operation SetDeadline names,
// whichever comes first — and a bounded reply. Every value is hostile until checked: a
// part's count, length and index are bounded by the object size its entry record names
// before anything is allocated, and a value larger than that is never read whole.
// Errors: kIoError when the store cannot be reached, times out or speaks something other
// than RESP (the connection is dropped), kResourceExhausted when it refuses a write for
// memory (maxmemory / OOM), kNotFound for an absent key, kCorrupt for a damaged, oversized
// or wrong-typed value (WRONGTYPE: a bad value, not a bad link), kFailedPrecondition for
// another model's and kUnsupported for one unsigned or wrongly signed while a secret is
// set (kv_remote/remote_frame.h).
//
// Threading: not thread-safe; one per thread (kv_remote/remote_tier.h keeps two).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kv_remote/remote_address.h"
#include "kv_remote/remote_cluster.h"
#include "kv_remote/remote_command.h"
#include "util/sha1.h"
#include "util/status.h"

struct redisContext;
struct redisReply;

namespace flashkv {

inline constexpr int kRemoteMaxRedirects = 5;
// The most parts an object may announce (32 MiB parts: 2 TiB); a value saying more is
// damaged, whatever its CRC says.
inline constexpr uint32_t kRemoteMaxParts = 1u << 16;
// An entry record is a few lines per object: a value larger than this is not one.
inline constexpr size_t kRemoteMaxRecordBytes = size_t(1) << 20;

struct RemoteStoreOptions {
  RemoteAddress address;
  Sha1Digest model{};  // the fingerprint every value carries and is checked against
  int connect_timeout_ms = 500;
  int command_timeout_ms = 2000;
  uint64_t part_bytes = uint64_t(32) << 20;  // an object is stored in parts of this size
  // The shared secret (--kv-remote-key-file): values written are signed with it, values
  // read must be (kv_remote/remote_frame.h). Empty: unsigned values, the store trusted.
  std::string secret;
};

// What the store says about one entry: its token count and the objects it is made of.
struct RemoteEntryRecord {
  std::string key;  // 40 hex, SHA-1 of the token ids
  uint32_t n_tokens = 0;
  std::vector<std::pair<std::string, uint64_t>> objects;  // name, bytes
};

// An entry record's payload ("flashkv-remote-entry 1" lines), parsed and checked (names
// safe as file names, numbers in range); kCorrupt otherwise. Exposed for the fuzzer.
Expected<RemoteEntryRecord> DecodeRemoteEntryRecord(std::string_view payload);

// Keys (docs/KV_FORMAT.md): exposed so tests and tools can reach a value directly.
std::string RemoteObjectKey(const Sha1Digest& model, std::string_view name, uint32_t part);
std::string RemoteEntryKey(const Sha1Digest& model, std::string_view numerics,
                           std::string_view key);
std::string RemoteLengthsKey(const Sha1Digest& model, std::string_view numerics);

class RemoteStore {
 public:
  explicit RemoteStore(RemoteStoreOptions options);  // no I/O yet
  ~RemoteStore();
  RemoteStore(const RemoteStore&) = delete;
  RemoteStore& operator=(const RemoteStore&) = delete;

  const RemoteStoreOptions& options() const { return opt_; }
  // MOVED and ASK replies followed so far (readable from any thread).
  uint64_t redirects() const { return redirects_.load(std::memory_order_relaxed); }
  // Whether a node answered MOVED: commands are routed by the slot map.
  bool cluster() const { return cluster_; }

  Status Ping();
  // True when every part of an object of `bytes` bytes is present (shared objects are
  // uploaded once).
  Expected<bool> HasObject(std::string_view name, uint64_t bytes);
  Status PutObject(std::string_view name, std::string_view bytes);
  // The object, which must be exactly `bytes` long (its entry record says so): parts that
  // announce more, or more parts than that can hold, are kCorrupt before they are read.
  Expected<std::string> GetObject(std::string_view name, uint64_t bytes);
  // The entry record, then its length in the model/numerics' sorted set: a reader that
  // finds the length finds the record, and the record is written after its objects.
  Status PutEntry(std::string_view numerics, const RemoteEntryRecord& record);
  Expected<RemoteEntryRecord> GetEntry(std::string_view numerics, std::string_view key);
  Expected<bool> HasEntry(std::string_view numerics, std::string_view key);
  // The token counts of this model/numerics' entries within [lo, hi], longest first, at
  // most `limit`.
  Expected<std::vector<uint32_t>> Lengths(std::string_view numerics, uint32_t lo, uint32_t hi,
                                          int limit);
  // Every command until ClearDeadline ends by `deadline` (a whole fetch's clock).
  void SetDeadline(RemoteClock::time_point deadline) { deadline_ = deadline; }
  void ClearDeadline() { deadline_ = RemoteClock::time_point::max(); }

 private:
  struct Connection {
    RemoteNode node;
    redisContext* ctx = nullptr;
  };
  Expected<redisContext*> Connect(const RemoteNode& node);
  void Drop(const RemoteNode& node);
  // One command on one node; a connection error drops that node's connection.
  Expected<redisReply*> Send(const RemoteNode& node, const std::vector<std::string_view>& args,
                             const RemoteReplyLimits& limits = {});
  // Runs one command on `key`'s node, following redirects; the reply is owned by the
  // caller (Reply frees it).
  Expected<redisReply*> Command(std::string_view key, const std::vector<std::string_view>& args,
                                const RemoteReplyLimits& limits = {});
  // Reloads the slot map from the first node that answers CLUSTER SLOTS.
  void RefreshSlots();
  Status PutValue(const std::string& key, std::string_view value);
  // Hands the value (at most `max_bytes`) to `use` while the reply holds it; kNotFound
  // when absent.
  Status ReadValue(const std::string& key, size_t max_bytes,
                   const std::function<Status(std::string_view)>& use);
  // The end of this command: its timeout or the operation's deadline, the earlier.
  RemoteClock::time_point CommandDeadline() const;
  Expected<bool> Exists(const std::string& key);

  const RemoteStoreOptions opt_;
  const RemoteNode seed_;
  std::vector<Connection> conns_;
  RemoteSlotMap slots_;
  bool cluster_ = false;
  bool slots_stale_ = false;
  std::atomic<uint64_t> redirects_{0};
  RemoteClock::time_point deadline_ = RemoteClock::time_point::max();
};

}  // namespace flashkv
