#include <gtest/gtest.h>

#include "server/metrics.h"

namespace flashkv {
namespace {

TEST(MetricsHistogramTest, LatencyHistogramsUseVllmNamesAndPrometheusShape) {
  EngineMetrics m;
  RequestTiming t;
  t.queue_ms = 10;
  t.first_token_ms = 40;
  t.decode_ms = 100;
  t.decode_tokens = 5;
  m.RecordTiming(t);
  const std::string text = PrometheusText(m.Snapshot(), {});
  for (const char* line : {
           "# TYPE flashkv_time_to_first_token_seconds histogram\n",
           "flashkv_time_to_first_token_seconds_bucket{le=\"0.04\"} 0\n",
           "flashkv_time_to_first_token_seconds_bucket{le=\"0.06\"} 1\n",
           "flashkv_time_to_first_token_seconds_bucket{le=\"+Inf\"} 1\n",
           "flashkv_time_to_first_token_seconds_sum 0.05\n",
           "flashkv_time_to_first_token_seconds_count 1\n",
           "# TYPE flashkv_inter_token_latency_seconds histogram\n",
           "flashkv_inter_token_latency_seconds_count 0\n",
           "# TYPE flashkv_request_queue_time_seconds histogram\n",
           "flashkv_request_queue_time_seconds_count 1\n",
           "# TYPE flashkv_request_prefill_tokens_per_second histogram\n",
           "flashkv_request_prefill_tokens_per_second_count 0\n",
           "flashkv_request_decode_tokens_per_second_bucket{le=\"50\"} 1\n",
           "flashkv_request_decode_tokens_per_second_sum 50\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace flashkv
