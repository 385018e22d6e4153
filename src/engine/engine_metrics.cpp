#include "engine/engine_metrics.h"

#include <algorithm>

#include "kv_remote/remote_fetcher.h"

namespace flashkv {

EngineStats EngineMetrics::Snapshot() const {
  EngineStats out;
  const DiskCache* disk = nullptr;
  const RemoteTier* remote = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out = s_;
    disk = disk_;
    remote = remote_;
    // Read under the lock: SetRemoteFetcher(nullptr) (the engine going) waits for it.
    if (fetcher_ != nullptr) out.remote_fetches_waiting = int64_t(fetcher_->waiting());
  }
  if (remote != nullptr) {
    out.remote_enabled = true;
    out.remote = remote->stats();
  }
  if (disk != nullptr) {
    out.disk_enabled = true;
    out.disk = disk->stats();
  }
  return out;
}

void EngineMetrics::SetDiskCache(const DiskCache* disk) {
  std::lock_guard<std::mutex> lock(mu_);
  disk_ = disk;
}

void EngineMetrics::SetRemoteTier(const RemoteTier* remote) {
  std::lock_guard<std::mutex> lock(mu_);
  remote_ = remote;
}

void EngineMetrics::SetRemoteFetcher(const RemoteFetcher* fetcher) {
  std::lock_guard<std::mutex> lock(mu_);
  fetcher_ = fetcher;
}

void EngineMetrics::SetRamStats(const RamCacheStats& stats) {
  std::lock_guard<std::mutex> lock(mu_);
  s_.ram_enabled = true;
  s_.ram = stats;
}

void EngineMetrics::RecordPrompt(CacheSource source, int64_t reused, int64_t prefilled,
                                 bool live_lookup_hit, bool ram_looked_up, bool disk_looked_up,
                                 bool remote_looked_up, uint64_t restored_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (live_lookup_hit) {
    ++s_.live_hits;
  } else {
    ++s_.live_misses;
  }
  if (ram_looked_up) {
    if (source == CacheSource::kRam) {
      ++s_.ram_hits;
    } else {
      ++s_.ram_misses;
    }
  }
  if (disk_looked_up) {
    if (source == CacheSource::kDisk) {
      ++s_.disk_hits;
    } else {
      ++s_.disk_misses;
    }
  }
  if (remote_looked_up) {
    if (source == CacheSource::kRemote) {
      ++s_.remote_hits;
    } else {
      ++s_.remote_misses;
    }
  }
  if (source == CacheSource::kLive) s_.prompt_tokens_live += uint64_t(reused);
  if (source == CacheSource::kRemote) {
    s_.prompt_tokens_remote += uint64_t(reused);
    s_.restore_bytes_remote += restored_bytes;
  }
  if (source == CacheSource::kRam) {
    s_.prompt_tokens_ram += uint64_t(reused);
    s_.restore_bytes_ram += restored_bytes;
  }
  if (source == CacheSource::kDisk) {
    s_.prompt_tokens_disk += uint64_t(reused);
    s_.restore_bytes_disk += restored_bytes;
  }
  s_.prompt_tokens_prefill += uint64_t(prefilled);
}

void EngineMetrics::RecordTiming(const RequestTiming& t) {
  std::lock_guard<std::mutex> lock(mu_);
  s_.prefill_tokens += uint64_t(t.prefill_tokens);
  s_.prefill_seconds += t.prefill_ms / 1000.0;
  s_.decode_tokens += uint64_t(t.decode_tokens);
  s_.decode_seconds += t.decode_ms / 1000.0;
  s_.restore_seconds += t.restore_ms / 1000.0;
  s_.queue_seconds += t.queue_ms / 1000.0;
  ++s_.queued_requests;
  if (t.prefill_tokens > 0) s_.last_prefill_tps = t.prefill_tps();
  if (t.decode_tokens > 0) s_.last_decode_tps = t.decode_tps();
  s_.queue_wait.Observe(t.queue_ms / 1000.0);
  // first_token_ms is 0 when no token was sampled (cancelled or failed before one).
  if (t.first_token_ms > 0)
    s_.time_to_first_token.Observe((t.queue_ms + t.first_token_ms) / 1000.0);
  if (t.prefill_tokens > 0 && t.prefill_ms > 0) s_.prefill_tps.Observe(t.prefill_tps());
  if (t.decode_tokens > 0 && t.decode_ms > 0) s_.decode_tps.Observe(t.decode_tps());
}

void EngineMetrics::RecordLiveEviction() {
  std::lock_guard<std::mutex> lock(mu_);
  ++s_.live_evictions;
}

void EngineMetrics::SetExpertCacheStats(const ExpertCacheStats& stats) {
  std::lock_guard<std::mutex> lock(mu_);
  s_.expert_cache_enabled = true;
  s_.expert_cache = stats;
}

void EngineMetrics::RecordStep(int sessions, int rows) {
  std::lock_guard<std::mutex> lock(mu_);
  ++s_.steps;
  s_.step_rows += uint64_t(rows);
  s_.step_sessions += uint64_t(sessions);
  s_.last_step_sessions = sessions;
}

void EngineMetrics::RecordInterToken(double ms) {
  std::lock_guard<std::mutex> lock(mu_);
  s_.inter_token_seconds += ms / 1000.0;
  ++s_.inter_token_gaps;
  s_.inter_token_max_seconds = std::max(s_.inter_token_max_seconds, ms / 1000.0);
  s_.inter_token.Observe(ms / 1000.0);
}

void EngineMetrics::RecordOutcome(Outcome outcome) {
  std::lock_guard<std::mutex> lock(mu_);
  switch (outcome) {
    case Outcome::kOk:
      ++s_.requests_ok;
      break;
    case Outcome::kCancelled:
      ++s_.requests_cancelled;
      break;
    case Outcome::kFailed:
      ++s_.requests_failed;
      break;
  }
}

void EngineMetrics::AddQueueDepth(int64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  s_.queue_depth += delta;
}

void EngineMetrics::AddActive(int64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  s_.active_requests += delta;
}

void EngineMetrics::SetLiveSessions(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  s_.live_sessions = n;
}

}  // namespace flashkv
