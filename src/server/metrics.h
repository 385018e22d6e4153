// /metrics in the Prometheus text format (version 0.0.4): the engine's counters (prompt
// tokens by source, cache hits and misses per tier, evictions, prefill/decode throughput,
// queue) and the server's HTTP request counts. Must not: compute engine numbers (it formats
// EngineStats) or know the dialects.
//
// Threading: HttpCounters is thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "engine/engine_metrics.h"

namespace flashkv {

class HttpCounters {
 public:
  void Count(const std::string& endpoint, int status);
  std::map<std::pair<std::string, int>, uint64_t> Snapshot() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> counts_;
};

std::string PrometheusText(const EngineStats& engine,
                           const std::map<std::pair<std::string, int>, uint64_t>& http);

}  // namespace flashkv
