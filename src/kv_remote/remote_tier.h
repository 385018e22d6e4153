// RemoteTier: the shared KV tier after the local disk (issue 19 item 4). Mirrors the disk
// cache's objects by name to a RESP store (kv_remote/remote_store.h) after each local save, and
// finds, for a prompt, the longest entry another server saved whose ids are a prefix of
// it: the store lists the token counts present for this model/numerics, the SHA-1 of the
// prompt's first n ids (one incremental pass) names each candidate, and the longest one
// present is fetched with every object verified (fingerprint, CRC, length). The caller
// keeps it locally (DiskCache::Import) and restores it from there.
//
// Never on a request's critical path for writes: uploads run on a background thread
// from a bounded queue (full: dropped and counted). The store down, slow or full never
// fails a request: a connection error puts the tier in backoff (logged once, retried with
// exponential delays by the background thread's PING; lookups miss at once meanwhile),
// a store refusing writes for memory puts uploads in their own backoff while lookups go
// on. Must not: touch the disk directory or the model (the caller imports and restores).
//
// Threading: every method is thread-safe. Lookups and uploads use separate connections.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <vector>

#include "kv_remote/remote_store.h"
#include "util/status.h"

namespace flashkv {

struct RemoteTierOptions {
  RemoteStoreOptions store;
  std::string numerics;        // with store.model: the identity entries are indexed by
  size_t max_queued = 32;      // uploads waiting; more are dropped
  int candidates = 8;          // longest entries tried per lookup
  int backoff_min_ms = 200;    // first retry delay after a failure, doubled up to
  int backoff_max_ms = 30000;  // this
  // The whole lookup (index, record, every object) ends by then: a store that trickles
  // bytes holds a request no longer. 0: the store's command timeout.
  int fetch_timeout_ms = 0;
};

struct RemoteTierStats {
  uint64_t hits = 0, misses = 0;
  uint64_t bytes_read = 0, bytes_written = 0;
  uint64_t uploads = 0;          // entries stored (or found already there)
  uint64_t upload_failures = 0;  // dropped after an error that a retry cannot fix
  uint64_t refused = 0;          // writes the store refused for memory
  uint64_t dropped = 0;          // uploads dropped because the queue was full
  uint64_t errors = 0;           // connection errors and timeouts
  uint64_t damaged = 0;          // values that failed their checks (never loaded)
  uint64_t foreign = 0;          // values of another model (never loaded)
  uint64_t unsigned_values = 0;  // values unsigned or wrongly signed for the tier's key
  uint64_t redirects = 0;        // Redis Cluster MOVED / ASK replies followed
  uint64_t queued = 0;           // gauge
  bool backoff = false;          // gauge: the store is unreachable, being retried
  bool writes_backoff = false;   // gauge: the store refuses writes, being retried
};

// One local entry to mirror: its key, token count and the files that make it up (each
// stored under its file name).
struct RemoteUpload {
  std::string key;
  uint32_t n_tokens = 0;
  std::vector<std::string> paths;
};

struct RemoteObject {
  std::string name;
  std::string bytes;
};

struct RemoteFetched {
  std::string key;
  uint32_t n_tokens = 0;
  std::vector<RemoteObject> objects;  // verified
  uint64_t bytes = 0;
  double ms = 0;
};

class RemoteTier {
 public:
  explicit RemoteTier(RemoteTierOptions options);  // starts the uploader; no I/O yet
  // Uploads what is queued while the store answers, then stops.
  ~RemoteTier();
  RemoteTier(const RemoteTier&) = delete;
  RemoteTier& operator=(const RemoteTier&) = delete;

  const RemoteTierOptions& options() const { return opt_; }

  // Never blocks.
  void Enqueue(RemoteUpload upload);
  // The longest entry with min_tokens <= n <= max_tokens whose ids are `tokens`' first n.
  // kNotFound on a miss, in backoff, or when every candidate failed its checks. Objects
  // `have(name, bytes)` says the caller holds already (a disk cache's chunks, shared by
  // entries) are not fetched and not in the result.
  // `cancel`, when set, is checked between objects: kCancelled once it is true. An entry
  // whose objects add up to more than `max_bytes` (the caller's budget) is never fetched.
  // Every value is checked before it is kept (remote_store.h); one that fails is logged
  // once per key, counted (damaged / foreign) and the next candidate tried.
  Expected<RemoteFetched> Fetch(
      std::span<const int32_t> tokens, int64_t min_tokens, int64_t max_tokens,
      const std::function<bool(std::string_view name, uint64_t bytes)>& have = {},
      const std::atomic<bool>* cancel = nullptr, uint64_t max_bytes = UINT64_MAX);
  // Waits until the queue is empty and nothing is being uploaded (tests, shutdown), or
  // `timeout_ms` passed; false then.
  bool Flush(int timeout_ms);
  RemoteTierStats stats() const;

 private:
  class Backoff;
  void Loop();
  Status Upload(const RemoteUpload& u);
  // Records a store error (mu_ held): a refused write backs off uploads, anything else
  // the link.
  void Failed(const Status& st, bool write);
  // Counts a value that failed its checks and logs it, once per key (mu_ held).
  void Refused(const Status& st, const std::string& key);

  const RemoteTierOptions opt_;
  RemoteStore fetch_store_;   // the engine thread's
  RemoteStore upload_store_;  // the uploader's
  mutable std::mutex mu_;     // guards everything below
  std::condition_variable cv_;
  std::deque<RemoteUpload> queue_;
  bool uploading_ = false;
  bool stop_ = false;
  RemoteTierStats stats_;
  std::unique_ptr<Backoff> link_, writes_;
  std::unordered_set<std::string> refused_keys_;  // logged already (bounded)
  std::mutex fetch_mu_;                           // one lookup at a time on fetch_store_
  std::thread thread_;
};

}  // namespace flashkv
