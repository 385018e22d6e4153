#include "server/metrics.h"

#include <fmt/format.h>

namespace flashkv {
namespace {

void Family(std::string* out, const char* name, const char* type, const char* help) {
  *out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

template <typename T>
void Sample(std::string* out, const char* name, const std::string& labels, T value) {
  if (labels.empty()) {
    *out += fmt::format("{} {}\n", name, value);
  } else {
    *out += fmt::format("{}{{{}}} {}\n", name, labels, value);
  }
}

}  // namespace

void HttpCounters::Count(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[{endpoint, status}];
}

std::map<std::pair<std::string, int>, uint64_t> HttpCounters::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

std::string PrometheusText(const EngineStats& s,
                           const std::map<std::pair<std::string, int>, uint64_t>& http) {
  std::string out;
  Family(&out, "flashkv_prompt_tokens_total", "counter",
         "Prompt tokens by where they came from: reused from a live session, restored from disk, "
         "or prefilled.");
  Sample(&out, "flashkv_prompt_tokens_total", "source=\"live\"", s.prompt_tokens_live);
  Sample(&out, "flashkv_prompt_tokens_total", "source=\"disk\"", s.prompt_tokens_disk);
  Sample(&out, "flashkv_prompt_tokens_total", "source=\"prefill\"", s.prompt_tokens_prefill);

  Family(&out, "flashkv_cache_lookups_total", "counter",
         "Resume lookups per cache tier and result.");
  Sample(&out, "flashkv_cache_lookups_total", "tier=\"live\",result=\"hit\"", s.live_hits);
  Sample(&out, "flashkv_cache_lookups_total", "tier=\"live\",result=\"miss\"", s.live_misses);
  Sample(&out, "flashkv_cache_lookups_total", "tier=\"disk\",result=\"hit\"", s.disk_hits);
  Sample(&out, "flashkv_cache_lookups_total", "tier=\"disk\",result=\"miss\"", s.disk_misses);

  Family(&out, "flashkv_live_evictions_total", "counter",
         "Live sessions pushed out of memory to make room for another.");
  Sample(&out, "flashkv_live_evictions_total", "", s.live_evictions);
  Family(&out, "flashkv_live_sessions", "gauge", "Live sessions holding tokens.");
  Sample(&out, "flashkv_live_sessions", "", s.live_sessions);

  Family(&out, "flashkv_prefill_tokens_total", "counter", "Prompt tokens evaluated.");
  Sample(&out, "flashkv_prefill_tokens_total", "", s.prefill_tokens);
  Family(&out, "flashkv_prefill_seconds_total", "counter", "Time spent evaluating prompt tokens.");
  Sample(&out, "flashkv_prefill_seconds_total", "", s.prefill_seconds);
  Family(&out, "flashkv_decode_tokens_total", "counter", "Tokens generated.");
  Sample(&out, "flashkv_decode_tokens_total", "", s.decode_tokens);
  Family(&out, "flashkv_decode_seconds_total", "counter", "Time spent generating.");
  Sample(&out, "flashkv_decode_seconds_total", "", s.decode_seconds);
  Family(&out, "flashkv_prefill_tokens_per_second", "gauge",
         "Prefill throughput of the last request that prefilled.");
  Sample(&out, "flashkv_prefill_tokens_per_second", "", s.last_prefill_tps);
  Family(&out, "flashkv_decode_tokens_per_second", "gauge",
         "Decode throughput of the last request that generated.");
  Sample(&out, "flashkv_decode_tokens_per_second", "", s.last_decode_tps);
  Family(&out, "flashkv_restore_seconds_total", "counter", "Time spent restoring disk snapshots.");
  Sample(&out, "flashkv_restore_seconds_total", "", s.restore_seconds);

  Family(&out, "flashkv_requests_total", "counter", "Generation requests by outcome.");
  Sample(&out, "flashkv_requests_total", "outcome=\"ok\"", s.requests_ok);
  Sample(&out, "flashkv_requests_total", "outcome=\"cancelled\"", s.requests_cancelled);
  Sample(&out, "flashkv_requests_total", "outcome=\"failed\"", s.requests_failed);
  Family(&out, "flashkv_queue_depth", "gauge", "Requests waiting for the inference worker.");
  Sample(&out, "flashkv_queue_depth", "", s.queue_depth);
  Family(&out, "flashkv_active_requests", "gauge", "Requests the worker is running (0 or 1).");
  Sample(&out, "flashkv_active_requests", "", s.active_requests);

  if (s.disk_enabled) {
    const DiskCacheStats& d = s.disk;
    Family(&out, "flashkv_disk_bytes", "gauge",
           "Bytes in the disk KV cache directory (with queued writes).");
    Sample(&out, "flashkv_disk_bytes", "", d.used_bytes);
    Family(&out, "flashkv_disk_budget_bytes", "gauge",
           "The disk KV cache budget (--kv-disk-space-mb).");
    Sample(&out, "flashkv_disk_budget_bytes", "", d.budget_bytes);
    Family(&out, "flashkv_disk_entries", "gauge", "Loadable snapshots in the disk KV cache.");
    Sample(&out, "flashkv_disk_entries", "", d.entries);
    Family(&out, "flashkv_disk_evictions_total", "counter",
           "Snapshots deleted to stay within the budget.");
    Sample(&out, "flashkv_disk_evictions_total", "", d.evictions);
    Family(&out, "flashkv_disk_saves_total", "counter", "Snapshot writes by result.");
    Sample(&out, "flashkv_disk_saves_total", "result=\"ok\"", d.saves);
    Sample(&out, "flashkv_disk_saves_total", "result=\"failed\"", d.save_failures);
    Sample(&out, "flashkv_disk_saves_total", "result=\"skipped\"", d.save_skipped);
    Family(&out, "flashkv_disk_load_failures_total", "counter",
           "Snapshots that failed to load (damaged or foreign).");
    Sample(&out, "flashkv_disk_load_failures_total", "", d.load_failures);
    Family(&out, "flashkv_disk_quarantined_total", "counter", "Damaged snapshots moved aside.");
    Sample(&out, "flashkv_disk_quarantined_total", "", d.quarantined);
    Family(&out, "flashkv_disk_pending_writes", "gauge",
           "Snapshots queued for the background writer.");
    Sample(&out, "flashkv_disk_pending_writes", "", d.pending_writes);
  }

  Family(&out, "flashkv_http_requests_total", "counter",
         "HTTP requests by endpoint and status code.");
  for (const auto& [key, n] : http) {
    Sample(&out, "flashkv_http_requests_total",
           fmt::format("endpoint=\"{}\",code=\"{}\"", key.first, key.second), n);
  }
  return out;
}

}  // namespace flashkv
