#include "engine/latency_histogram.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace flashkv {

LatencyHistogram::LatencyHistogram(std::span<const double> bounds)
    : bounds_(bounds.begin(), bounds.end()), buckets_(bounds.size() + 1, 0) {}

void LatencyHistogram::Observe(double value) {
  if (!std::isfinite(value)) return;
  const size_t i =
      size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++buckets_[i];
  ++count_;
  sum_ += value;
}

uint64_t LatencyHistogram::cumulative(size_t i) const {
  uint64_t n = 0;
  for (size_t b = 0; b <= i && b < buckets_.size(); ++b) n += buckets_[b];
  return n;
}

std::span<const double> LatencyHistogram::TimeToFirstTokenBounds() {
  static constexpr std::array<double, 22> kBounds = {
      0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,  0.75,
      1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160., 640., 2560.};
  return kBounds;
}

std::span<const double> LatencyHistogram::InterTokenBounds() {
  static constexpr std::array<double, 19> kBounds = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                                     0.3,  0.4,   0.5,  0.75,  1.0, 2.5,  5.0,
                                                     7.5,  10.0,  20.0, 40.0,  80.0};
  return kBounds;
}

std::span<const double> LatencyHistogram::QueueBounds() {
  static constexpr std::array<double, 17> kBounds = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                     0.25,  0.5,   1.0,  2.5,   5.0,  10.0,
                                                     30.0,  60.0,  120., 300.,  600.};
  return kBounds;
}

std::span<const double> LatencyHistogram::TokensPerSecondBounds() {
  static constexpr std::array<double, 15> kBounds = {1,   2,    5,    10,   20,    50,    100,  200,
                                                     500, 1000, 2000, 5000, 10000, 20000, 50000};
  return kBounds;
}

}  // namespace flashkv
