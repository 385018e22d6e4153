#include "kv_remote/remote_store.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <functional>
#include <memory>

#include <fmt/format.h>

#include "kv_remote/remote_frame.h"

namespace flashkv {
namespace {

constexpr std::string_view kKeyPrefix = "flashkv:1:";
constexpr std::string_view kEntryMagic = "flashkv-remote-entry 1";

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

std::string NodeName(const RemoteNode& node) {
  const bool v6 = node.host.find(':') != std::string::npos;
  return fmt::format("{}{}{}:{}", v6 ? "[" : "", node.host, v6 ? "]" : "", node.port);
}

timeval Timeval(int ms) {
  timeval tv;
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  return tv;
}

// An object name from the store becomes a file name in the cache directory: a plain name.
bool SafeObjectName(std::string_view name) {
  if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

// An error reply: a write refused for memory, a key holding another type (a bad value,
// like a damaged one: the link is fine) or anything else (the store misbehaves).
Status ErrorReply(std::string_view where, std::string_view cmd, const redisReply& r) {
  const std::string_view err(r.str, r.len);
  if (err.starts_with("OOM")) return ResourceExhausted("{} refused a write: {}", where, err);
  if (err.starts_with("WRONGTYPE")) return Corrupt("{}: {}: {}", where, cmd, err);
  return IoError("{}: {}: {}", where, cmd, err);
}

uint32_t PartsOf(uint64_t bytes, uint64_t part_bytes) {
  return bytes == 0 ? 1 : uint32_t((bytes + part_bytes - 1) / part_bytes);
}

template <typename T>
bool ParseInt(std::string_view s, T* out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

std::string EncodeEntry(const RemoteEntryRecord& r) {
  std::string s = fmt::format("{}\nkey {}\ntokens {}\n", kEntryMagic, r.key, r.n_tokens);
  for (const auto& [name, bytes] : r.objects) s += fmt::format("object {} {}\n", name, bytes);
  return s;
}

Expected<RemoteEntryRecord> DecodeEntry(std::string_view s) {
  RemoteEntryRecord r;
  bool magic = false, key = false, tokens = false;
  while (!s.empty()) {
    const size_t nl = s.find('\n');
    if (nl == std::string_view::npos) return Corrupt("remote entry record has a partial line");
    const std::string_view line = s.substr(0, nl);
    s.remove_prefix(nl + 1);
    if (!magic) {
      if (line != kEntryMagic) return Corrupt("remote entry record of an unknown version");
      magic = true;
    } else if (line.starts_with("key ")) {
      r.key = std::string(line.substr(4));
      Sha1Digest d;
      if (!ParseSha1Hex(r.key, &d)) return Corrupt("remote entry record has a bad key");
      key = true;
    } else if (line.starts_with("tokens ")) {
      if (!ParseInt(line.substr(7), &r.n_tokens)) return Corrupt("remote entry: bad tokens");
      tokens = true;
    } else if (line.starts_with("object ")) {
      const std::string_view rest = line.substr(7);
      const size_t sp = rest.find(' ');
      uint64_t bytes = 0;
      if (sp == std::string_view::npos || !SafeObjectName(rest.substr(0, sp)) ||
          !ParseInt(rest.substr(sp + 1), &bytes)) {
        return Corrupt("remote entry record names an unusable object");
      }
      r.objects.emplace_back(std::string(rest.substr(0, sp)), bytes);
    } else {
      return Corrupt("remote entry record has an unknown line");
    }
  }
  if (!magic || !key || !tokens || r.objects.empty()) {
    return Corrupt("remote entry record is incomplete");
  }
  return r;
}

}  // namespace

Expected<RemoteEntryRecord> DecodeRemoteEntryRecord(std::string_view payload) {
  return DecodeEntry(payload);
}

std::string RemoteObjectKey(const Sha1Digest& model, std::string_view name, uint32_t part) {
  return fmt::format("{}{}:obj:{}:{}", kKeyPrefix, Sha1Hex(model), name, part);
}

std::string RemoteEntryKey(const Sha1Digest& model, std::string_view numerics,
                           std::string_view key) {
  return fmt::format("{}{}:{}:entry:{}", kKeyPrefix, Sha1Hex(model), numerics, key);
}

std::string RemoteLengthsKey(const Sha1Digest& model, std::string_view numerics) {
  return fmt::format("{}{}:{}:lengths", kKeyPrefix, Sha1Hex(model), numerics);
}

RemoteStore::RemoteStore(RemoteStoreOptions options)
    : opt_(std::move(options)), seed_{opt_.address.host, opt_.address.port} {}

RemoteStore::~RemoteStore() {
  for (Connection& c : conns_) redisFree(c.ctx);
}

void RemoteStore::Drop(const RemoteNode& node) {
  std::erase_if(conns_, [&](Connection& c) {
    if (!(c.node == node)) return false;
    redisFree(c.ctx);
    return true;
  });
  // The node may have failed over or left: ask the cluster again before routing.
  if (cluster_) slots_stale_ = true;
}

Expected<redisContext*> RemoteStore::Connect(const RemoteNode& node) {
  for (Connection& c : conns_) {
    if (c.node == node) return c.ctx;
  }
  const std::string where = NodeName(node);
  const int64_t left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - RemoteClock::now()).count();
  if (left <= 0) return IoError("{}: out of time before connecting", where);
  const int connect_ms = int(std::min<int64_t>(opt_.connect_timeout_ms, left));
  redisContext* c = redisConnectWithTimeout(node.host.c_str(), node.port, Timeval(connect_ms));
  if (c == nullptr) return IoError("{}: cannot allocate a connection", where);
  if (c->err != 0) {
    Status st = IoError("{}: {}", where, c->errstr);
    redisFree(c);
    return st;
  }
  if (redisSetTimeout(c, Timeval(opt_.command_timeout_ms)) != REDIS_OK) {
    Status st = IoError("{}: cannot set the command timeout", where);
    redisFree(c);
    return st;
  }
  BoundRemoteReader(c);
  conns_.push_back(Connection{node, c});
  if (opt_.address.db != 0) {
    const std::string db = std::to_string(opt_.address.db);
    FLASHKV_ASSIGN_OR_RETURN(redisReply * raw, Send(node, {"SELECT", db}));
    Reply r(raw);
    if (r->type == REDIS_REPLY_ERROR) {
      Status st = IoError("{}: SELECT {}: {}", where, db, std::string_view(r->str, r->len));
      Drop(node);
      return st;
    }
  }
  return c;
}

RemoteClock::time_point RemoteStore::CommandDeadline() const {
  return std::min(deadline_,
                  RemoteClock::now() + std::chrono::milliseconds(opt_.command_timeout_ms));
}

Expected<redisReply*> RemoteStore::Send(const RemoteNode& node,
                                        const std::vector<std::string_view>& args,
                                        const RemoteReplyLimits& limits) {
  Expected<redisContext*> connected = Connect(node);
  if (!connected.ok()) {
    if (cluster_) slots_stale_ = true;
    return connected.status();
  }
  Expected<redisReply*> reply = RunRemoteCommand(*connected, args, CommandDeadline(), limits);
  if (!reply.ok()) {
    // A timed-out, broken or half-read connection is never reused.
    Status st = reply.status().WithContext(NodeName(node));
    Drop(node);
    return st;
  }
  return *reply;
}

void RemoteStore::RefreshSlots() {
  std::vector<RemoteNode> ask = slots_.nodes();
  if (std::find(ask.begin(), ask.end(), seed_) == ask.end()) ask.push_back(seed_);
  for (const RemoteNode& node : ask) {
    Expected<redisReply*> raw = Send(node, {"CLUSTER", "SLOTS"});
    if (!raw.ok()) continue;
    Reply r(*raw);
    if (r->type == REDIS_REPLY_ERROR) continue;
    if (slots_.Load(*r, node).ok()) {
      slots_stale_ = false;
      return;
    }
  }
}

Expected<redisReply*> RemoteStore::Command(std::string_view key,
                                           const std::vector<std::string_view>& args,
                                           const RemoteReplyLimits& limits) {
  const uint16_t slot = RedisKeySlot(key);
  RemoteNode target = seed_;
  if (cluster_) {
    if (slots_stale_) RefreshSlots();
    if (const RemoteNode* owner = slots_.Owner(slot)) target = *owner;
  }
  bool asking = false;
  for (int hop = 0;; ++hop) {
    if (asking) {
      FLASHKV_ASSIGN_OR_RETURN(redisReply * raw, Send(target, {"ASKING"}));
      Reply ok(raw);
      if (ok->type == REDIS_REPLY_ERROR) {
        return IoError("{}: ASKING: {}", NodeName(target), std::string_view(ok->str, ok->len));
      }
    }
    FLASHKV_ASSIGN_OR_RETURN(redisReply * raw, Send(target, args, limits));
    if (raw->type != REDIS_REPLY_ERROR) return raw;
    std::optional<RemoteRedirect> redirect =
        ParseRemoteRedirect(std::string_view(raw->str, raw->len), target);
    if (!redirect) return raw;  // the caller's error to judge
    freeReplyObject(raw);
    if (hop >= kRemoteMaxRedirects) {
      return IoError("{}: {} {} still redirected after {} hops", opt_.address.ToString(), args[0],
                     key, hop);
    }
    redirects_.fetch_add(1, std::memory_order_relaxed);
    asking = redirect->ask;
    if (!asking) {
      // The slot moved (or this is the first command to a cluster): route by the map.
      cluster_ = true;
      slots_.Set(redirect->slot, redirect->node);
      slots_stale_ = true;
    }
    target = redirect->node;
  }
}

Status RemoteStore::PutValue(const std::string& key, std::string_view value) {
  FLASHKV_ASSIGN_OR_RETURN(redisReply * raw, Command(key, {"SET", key, value}));
  Reply r(raw);
  if (r->type == REDIS_REPLY_ERROR) return ErrorReply(opt_.address.ToString(), "SET", *r);
  return Status::Ok();
}

Status RemoteStore::ReadValue(const std::string& key, size_t max_bytes,
                              const std::function<Status(std::string_view)>& use) {
  RemoteReplyLimits limits;
  limits.max_bytes = max_bytes + 64;  // RESP framing: "$<length>\r\n" ... "\r\n"
  limits.max_elements = 0;            // a value is a string, never an array
  FLASHKV_ASSIGN_OR_RETURN(redisReply * raw, Command(key, {"GET", key}, limits));
  Reply r(raw);
  if (r->type == REDIS_REPLY_NIL) return NotFound("no remote value {}", key);
  if (r->type == REDIS_REPLY_ERROR) return ErrorReply(opt_.address.ToString(), "GET", *r);
  if (r->type == REDIS_REPLY_STRING && r->len > max_bytes) {
    return Corrupt("remote value {} has {} bytes, at most {} expected", key, r->len, max_bytes);
  }
  if (r->type != REDIS_REPLY_STRING) return Corrupt("remote value {} is not a string", key);
  // Checked and copied out of the reply buffer directly: one copy of a large part less.
  return use(std::string_view(r->str, r->len));
}

Expected<bool> RemoteStore::Exists(const std::string& key) {
  FLASHKV_ASSIGN_OR_RETURN(redisReply * raw, Command(key, {"EXISTS", key}));
  Reply r(raw);
  if (r->type == REDIS_REPLY_ERROR) return ErrorReply(opt_.address.ToString(), "EXISTS", *r);
  if (r->type != REDIS_REPLY_INTEGER) {
    return IoError("{}: EXISTS: unexpected reply", opt_.address.ToString());
  }
  return r->integer > 0;
}

Status RemoteStore::Ping() {
  if (cluster_) RefreshSlots();
  // A cluster is usable when every master answers; a plain store when it does.
  std::vector<RemoteNode> nodes = cluster_ ? slots_.nodes() : std::vector<RemoteNode>{};
  if (nodes.empty()) nodes.push_back(seed_);
  for (const RemoteNode& node : nodes) {
    FLASHKV_ASSIGN_OR_RETURN(redisReply * raw, Send(node, {"PING"}));
    Reply r(raw);
    if (r->type == REDIS_REPLY_ERROR) {
      return IoError("{}: PING: {}", NodeName(node), std::string_view(r->str, r->len));
    }
  }
  return Status::Ok();
}

Expected<bool> RemoteStore::HasObject(std::string_view name, uint64_t bytes) {
  const uint32_t parts = PartsOf(bytes, opt_.part_bytes);
  for (uint32_t i = 0; i < parts; ++i) {
    FLASHKV_ASSIGN_OR_RETURN(bool there, Exists(RemoteObjectKey(opt_.model, name, i)));
    if (!there) return false;
  }
  return true;
}

Status RemoteStore::PutObject(std::string_view name, std::string_view bytes) {
  if (!SafeObjectName(name)) return InvalidArgument("'{}' is not a remote object name", name);
  const uint32_t parts = PartsOf(bytes.size(), opt_.part_bytes);
  for (uint32_t i = 0; i < parts; ++i) {
    const std::string_view payload =
        bytes.substr(std::min<uint64_t>(i * opt_.part_bytes, bytes.size()), opt_.part_bytes);
    const std::string key = RemoteObjectKey(opt_.model, name, i);
    FLASHKV_RETURN_IF_ERROR(
        PutValue(key, FrameRemotePart(opt_.model, i, parts, payload, opt_.secret, key)));
  }
  return Status::Ok();
}

Expected<std::string> RemoteStore::GetObject(std::string_view name, uint64_t bytes) {
  if (!SafeObjectName(name)) return InvalidArgument("'{}' is not a remote object name", name);
  if (bytes > std::string().max_size() / 2) {
    return Corrupt("remote object {} of {} bytes cannot be held", name, bytes);
  }
  std::string out;
  // What the entry record says, not what a part says: the only size trusted to allocate.
  out.reserve(bytes);
  uint32_t parts = 1;
  for (uint32_t i = 0; i < parts; ++i) {
    const std::string key = RemoteObjectKey(opt_.model, name, i);
    const uint64_t left = bytes - out.size();
    const size_t most = kRemoteFrameBytes + kRemoteSignatureBytes + left;
    Status st = ReadValue(key, most, [&](std::string_view value) -> Status {
      Expected<RemotePart> part = UnframeRemotePart(value, opt_.model, i, opt_.secret, key);
      if (!part.ok()) return part.status().WithContext(key);
      if (i == 0) {
        // Each part but an empty object's holds a byte at least.
        const uint64_t max_parts =
            std::min<uint64_t>(std::max<uint64_t>(bytes, 1), kRemoteMaxParts);
        if (part->count > max_parts) {
          return Corrupt("{}: {} parts for an object of {} bytes", key, part->count, bytes);
        }
        parts = part->count;
      } else if (part->count != parts) {
        return Corrupt("{}: part count {} differs from part 0's {}", key, part->count, parts);
      }
      if (part->payload.size() > left || (part->payload.empty() && bytes != 0)) {
        return Corrupt("{}: a part of {} bytes where {} remain", key, part->payload.size(), left);
      }
      out.append(part->payload);
      return Status::Ok();
    });
    // A part gone (evicted by the store) damages the object, not the store.
    if (st.code() == StatusCode::kNotFound && i > 0) {
      return Corrupt("remote object {} lost part {} of {}", name, i, parts);
    }
    if (!st.ok()) return st;
  }
  if (out.size() != bytes) {
    return Corrupt("remote object {} has {} bytes, its entry says {}", name, out.size(), bytes);
  }
  return out;
}

Status RemoteStore::PutEntry(std::string_view numerics, const RemoteEntryRecord& record) {
  const std::string entry_key = RemoteEntryKey(opt_.model, numerics, record.key);
  FLASHKV_RETURN_IF_ERROR(PutValue(
      entry_key, FrameRemotePart(opt_.model, 0, 1, EncodeEntry(record), opt_.secret, entry_key)));
  const std::string n = std::to_string(record.n_tokens);
  const std::string lengths = RemoteLengthsKey(opt_.model, numerics);
  FLASHKV_ASSIGN_OR_RETURN(redisReply * raw, Command(lengths, {"ZADD", lengths, n, n}));
  Reply r(raw);
  if (r->type == REDIS_REPLY_ERROR) return ErrorReply(opt_.address.ToString(), "ZADD", *r);
  return Status::Ok();
}

Expected<bool> RemoteStore::HasEntry(std::string_view numerics, std::string_view key) {
  return Exists(RemoteEntryKey(opt_.model, numerics, key));
}

Expected<RemoteEntryRecord> RemoteStore::GetEntry(std::string_view numerics, std::string_view key) {
  const std::string k = RemoteEntryKey(opt_.model, numerics, key);
  RemoteEntryRecord record;
  FLASHKV_RETURN_IF_ERROR(
      ReadValue(k, kRemoteMaxRecordBytes, [&](std::string_view value) -> Status {
        Expected<RemotePart> part = UnframeRemotePart(value, opt_.model, 0, opt_.secret, k);
        if (!part.ok()) return part.status().WithContext(k);
        if (part->count != 1) return Corrupt("{}: an entry record has one part", k);
        Expected<RemoteEntryRecord> r = DecodeEntry(part->payload);
        if (!r.ok()) return r.status().WithContext(k);
        if (r->key != key) return Corrupt("{}: the record names entry {}", k, r->key);
        record = std::move(*r);
        return Status::Ok();
      }));
  return record;
}

Expected<std::vector<uint32_t>> RemoteStore::Lengths(std::string_view numerics, uint32_t lo,
                                                     uint32_t hi, int limit) {
  const std::string max = std::to_string(hi), min = std::to_string(lo),
                    count = std::to_string(limit);
  const std::string key = RemoteLengthsKey(opt_.model, numerics);
  RemoteReplyLimits limits;
  limits.max_elements = std::max(limit, 0);
  limits.max_bytes = size_t(std::max(limit, 0)) * 32 + 64;  // decimal members
  FLASHKV_ASSIGN_OR_RETURN(
      redisReply * raw,
      Command(key, {"ZREVRANGEBYSCORE", key, max, min, "LIMIT", "0", count}, limits));
  Reply r(raw);
  if (r->type == REDIS_REPLY_ERROR) {
    return ErrorReply(opt_.address.ToString(), "ZREVRANGEBYSCORE", *r);
  }
  if (r->type != REDIS_REPLY_ARRAY) return IoError("ZREVRANGEBYSCORE: unexpected reply");
  std::vector<uint32_t> out;
  for (size_t i = 0; i < r->elements; ++i) {
    const redisReply* e = r->element[i];
    uint32_t n = 0;
    // Members are this process's own decimal lengths; anything else is skipped.
    if (e->type == REDIS_REPLY_STRING && ParseInt(std::string_view(e->str, e->len), &n) &&
        n >= lo && n <= hi) {
      out.push_back(n);
    }
  }
  return out;
}

}  // namespace flashkv
