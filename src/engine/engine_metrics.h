// EngineMetrics: process-wide counters of the engine (prompt tokens by cache tier, hits
// and misses per tier, evictions, throughput), updated by the worker and read by the
// server's /metrics. Must not: format them (server/ writes the Prometheus text).
//
// Threading: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <mutex>

#include "engine/latency_histogram.h"
#include "engine/request_timing.h"
#include "kv/cache_tier.h"  // CacheSource: where the reused part of a prompt came from
#include "kv_disk/disk_cache.h"
#include "kv_ram/ram_cache.h"
#include "kv_remote/remote_tier.h"
#include "model/expert_cache.h"

namespace flashkv {

class RemoteFetcher;

struct EngineStats {
  // Prompt tokens of finished prefills, by where they came from.
  uint64_t prompt_tokens_live = 0;
  uint64_t prompt_tokens_ram = 0;
  uint64_t prompt_tokens_disk = 0;
  uint64_t prompt_tokens_remote = 0;
  uint64_t prompt_tokens_prefill = 0;
  // Lookups per tier: a hit served the request's prefix, a miss fell through.
  uint64_t live_hits = 0;
  uint64_t live_misses = 0;
  uint64_t ram_hits = 0;
  uint64_t ram_misses = 0;
  uint64_t disk_hits = 0;
  uint64_t disk_misses = 0;
  uint64_t remote_hits = 0;
  uint64_t remote_misses = 0;
  uint64_t live_evictions = 0;  // sessions pushed out of memory for a new one
  // Throughput totals (a rate is tokens / seconds) and the last request's rates.
  uint64_t prefill_tokens = 0;
  double prefill_seconds = 0;
  uint64_t decode_tokens = 0;
  double decode_seconds = 0;
  double last_prefill_tps = 0;
  double last_decode_tps = 0;
  double restore_seconds = 0;
  // Time requests waited before the worker took them (sum over requests, and how many).
  double queue_seconds = 0;
  uint64_t queued_requests = 0;
  // Batched forward steps: how many, their rows (decode rows + prompt tokens) and the
  // sessions in them (sums), and the sessions of the last one.
  uint64_t steps = 0;
  uint64_t step_rows = 0;
  uint64_t step_sessions = 0;
  int64_t last_step_sessions = 0;
  // Gaps between consecutive tokens of one session (sum over every gap, and how many),
  // and the largest since start.
  double inter_token_seconds = 0;
  uint64_t inter_token_gaps = 0;
  double inter_token_max_seconds = 0;
  // Per-request distributions (/metrics histograms): submitted → first token (queue wait
  // included), the gaps between a session's tokens, the queue wait, and each request's
  // prefill and decode rates (requests that prefilled or decoded at all).
  LatencyHistogram time_to_first_token{LatencyHistogram::TimeToFirstTokenBounds()};
  LatencyHistogram inter_token{LatencyHistogram::InterTokenBounds()};
  LatencyHistogram queue_wait{LatencyHistogram::QueueBounds()};
  LatencyHistogram prefill_tps{LatencyHistogram::TokensPerSecondBounds()};
  LatencyHistogram decode_tps{LatencyHistogram::TokensPerSecondBounds()};
  // Bytes restored into live states, by tier.
  uint64_t restore_bytes_ram = 0;
  uint64_t restore_bytes_disk = 0;
  uint64_t restore_bytes_remote = 0;
  // Requests by outcome.
  uint64_t requests_ok = 0;
  uint64_t requests_cancelled = 0;
  uint64_t requests_failed = 0;
  // Gauges.
  int64_t queue_depth = 0;    // submitted, not yet picked up
  int64_t live_sessions = 0;  // sessions holding tokens
  int64_t active_requests = 0;
  // The RAM tier, when there is one (as the worker last published it).
  bool ram_enabled = false;
  RamCacheStats ram;
  // The disk tier, when there is one.
  bool disk_enabled = false;
  DiskCacheStats disk;
  // The shared tier, when there is one.
  bool remote_enabled = false;
  RemoteTierStats remote;
  // Requests waiting on a shared-store lookup (queued or running; kv_remote/remote_fetcher.h).
  int64_t remote_fetches_waiting = 0;
  // The routed experts' device cache, when they live in host memory (model/expert_cache.h).
  bool expert_cache_enabled = false;
  ExpertCacheStats expert_cache;
};

class EngineMetrics {
 public:
  EngineStats Snapshot() const;

  // One prompt was resolved: `reused` ids from `source` (`restored_bytes` moved into the
  // state from a RAM or disk snapshot), `prefilled` evaluated; the flags say which
  // tiers were asked.
  void RecordPrompt(CacheSource source, int64_t reused, int64_t prefilled, bool live_lookup_hit,
                    bool ram_looked_up, bool disk_looked_up, bool remote_looked_up,
                    uint64_t restored_bytes);
  void RecordTiming(const RequestTiming& t);
  void RecordLiveEviction();
  // One batched forward step ran `rows` token rows of `sessions` sessions.
  void RecordStep(int sessions, int rows);
  // A session got a token `ms` after its previous one.
  void RecordInterToken(double ms);
  enum class Outcome { kOk, kCancelled, kFailed };
  void RecordOutcome(Outcome outcome);
  void AddQueueDepth(int64_t delta);
  void AddActive(int64_t delta);
  void SetLiveSessions(int64_t n);
  // Snapshot() then includes its stats; `disk` must outlive this object.
  void SetDiskCache(const DiskCache* disk);
  // The same for the shared tier.
  void SetRemoteTier(const RemoteTier* remote);
  // The engine's remote lookup thread, for remote_fetches_waiting (nullptr: none); the
  // engine clears it before the fetcher goes.
  void SetRemoteFetcher(const RemoteFetcher* fetcher);
  // The RAM tier is the worker's alone (not thread-safe), so the worker publishes its
  // stats here after every change.
  void SetRamStats(const RamCacheStats& stats);
  // The expert cache is the worker's too: it publishes the cache's figures after each step.
  void SetExpertCacheStats(const ExpertCacheStats& stats);

 private:
  mutable std::mutex mu_;
  EngineStats s_;
  const DiskCache* disk_ = nullptr;
  const RemoteTier* remote_ = nullptr;
  const RemoteFetcher* fetcher_ = nullptr;
};

}  // namespace flashkv
