#include "engine/latency_histogram.h"

#include <array>
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "engine/engine_metrics.h"

namespace flashkv {
namespace {

TEST(LatencyHistogramTest, BucketsAreCumulativeWithAnImplicitInfBucket) {
  const std::array<double, 3> bounds = {0.1, 1.0, 10.0};
  LatencyHistogram h(bounds);
  for (double v : {0.05, 0.1, 0.5, 5.0, 50.0}) h.Observe(v);
  h.Observe(std::numeric_limits<double>::quiet_NaN());  // ignored
  EXPECT_EQ(h.cumulative(0), 2u);                       // le=0.1 includes 0.1 itself
  EXPECT_EQ(h.cumulative(1), 3u);
  EXPECT_EQ(h.cumulative(2), 4u);
  EXPECT_EQ(h.cumulative(3), 5u);  // +Inf
  EXPECT_EQ(h.count(), 5u);
  EXPECT_DOUBLE_EQ(h.sum(), 55.65);
}

TEST(LatencyHistogramTest, EngineMetricsObserveEachRequestsTimings) {
  EngineMetrics m;
  RequestTiming t;
  t.queue_ms = 20;
  t.first_token_ms = 230;  // TTFT 0.25 s with the queue
  t.prefill_ms = 200;
  t.prefill_tokens = 400;  // 2000 tok/s
  t.decode_ms = 500;
  t.decode_tokens = 10;  // 20 tok/s
  m.RecordTiming(t);
  m.RecordInterToken(50);
  RequestTiming cancelled;  // no token sampled: no TTFT, no rates
  cancelled.queue_ms = 1;
  m.RecordTiming(cancelled);
  const EngineStats s = m.Snapshot();
  EXPECT_EQ(s.time_to_first_token.count(), 1u);
  EXPECT_DOUBLE_EQ(s.time_to_first_token.sum(), 0.25);
  EXPECT_EQ(s.queue_wait.count(), 2u);
  EXPECT_EQ(s.prefill_tps.count(), 1u);
  EXPECT_DOUBLE_EQ(s.prefill_tps.sum(), 2000);
  EXPECT_EQ(s.decode_tps.count(), 1u);
  EXPECT_DOUBLE_EQ(s.decode_tps.sum(), 20);
  EXPECT_EQ(s.inter_token.count(), 1u);
  EXPECT_DOUBLE_EQ(s.inter_token.sum(), 0.05);
}

}  // namespace
}  // namespace flashkv
