// LatencyHistogram: a distribution over fixed bucket bounds, as a Prometheus histogram
// reports it (per-bucket counts, their sum and count), for the request latencies /metrics
// exposes (time to first token, inter-token latency, queue wait, prefill and decode
// tokens/s). Must not: format (server/metrics.cpp writes the text) or lock (EngineMetrics
// holds it under its own mutex).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace flashkv {

class LatencyHistogram {
 public:
  // `bounds`: ascending upper bounds; values above the last go to the implicit +Inf bucket.
  explicit LatencyHistogram(std::span<const double> bounds = {});

  void Observe(double value);

  const std::vector<double>& bounds() const { return bounds_; }
  // Observations at or below bounds()[i] (cumulative, as Prometheus' le buckets are);
  // cumulative(bounds().size()) is count().
  uint64_t cumulative(size_t i) const;
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

  // Bucket bounds. Time to first token and inter-token latency use vLLM's buckets for its
  // histograms of the same meaning, so dashboards carry over.
  static std::span<const double> TimeToFirstTokenBounds();  // seconds
  static std::span<const double> InterTokenBounds();        // seconds
  static std::span<const double> QueueBounds();             // seconds
  static std::span<const double> TokensPerSecondBounds();   // tokens/s

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> buckets_;  // bounds_.size() + 1, not cumulative
  uint64_t count_ = 0;
  double sum_ = 0;
};

}  // namespace flashkv
