#include "server/metrics.h"

#include <span>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace flashkv {
namespace {

EngineStats SomeStats() {
  EngineStats s;
  s.prompt_tokens_live = 1;
  s.prompt_tokens_ram = 31;
  s.prompt_tokens_disk = 2;
  s.prompt_tokens_prefill = 3;
  s.live_hits = 4;
  s.live_misses = 5;
  s.ram_hits = 32;
  s.ram_misses = 33;
  s.disk_hits = 6;
  s.disk_misses = 7;
  s.live_evictions = 8;
  s.live_sessions = 9;
  s.prefill_tokens = 10;
  s.prefill_seconds = 1.5;
  s.decode_tokens = 11;
  s.decode_seconds = 0.25;
  s.last_prefill_tps = 12.5;
  s.last_decode_tps = 13;
  s.restore_seconds = 0.125;
  s.restore_bytes_ram = 34;
  s.restore_bytes_disk = 35;
  s.requests_ok = 14;
  s.requests_cancelled = 15;
  s.requests_failed = 16;
  s.queue_depth = 17;
  s.active_requests = 1;
  s.queue_seconds = 0.5;
  s.queued_requests = 18;
  s.steps = 19;
  s.step_rows = 20;
  s.step_sessions = 21;
  s.last_step_sessions = 3;
  s.inter_token_seconds = 0.75;
  s.inter_token_gaps = 22;
  s.inter_token_max_seconds = 0.0625;
  return s;
}

// The whole document, written out by hand: scrapers and dashboards depend on every name,
// label and line, so a change to any of them must show up here.
constexpr const char* kEngineTextBase =
    "# HELP flashkv_prompt_tokens_total Prompt tokens by where they came from: reused from a "
    "live session, restored from RAM or disk, or prefilled.\n"
    "# TYPE flashkv_prompt_tokens_total counter\n"
    "flashkv_prompt_tokens_total{source=\"live\"} 1\n"
    "flashkv_prompt_tokens_total{source=\"ram\"} 31\n"
    "flashkv_prompt_tokens_total{source=\"disk\"} 2\n"
    "flashkv_prompt_tokens_total{source=\"prefill\"} 3\n"
    "# HELP flashkv_cache_lookups_total Resume lookups per cache tier and result.\n"
    "# TYPE flashkv_cache_lookups_total counter\n"
    "flashkv_cache_lookups_total{tier=\"live\",result=\"hit\"} 4\n"
    "flashkv_cache_lookups_total{tier=\"live\",result=\"miss\"} 5\n"
    "flashkv_cache_lookups_total{tier=\"ram\",result=\"hit\"} 32\n"
    "flashkv_cache_lookups_total{tier=\"ram\",result=\"miss\"} 33\n"
    "flashkv_cache_lookups_total{tier=\"disk\",result=\"hit\"} 6\n"
    "flashkv_cache_lookups_total{tier=\"disk\",result=\"miss\"} 7\n"
    "# HELP flashkv_live_evictions_total Live sessions pushed out of memory to make room for "
    "another.\n"
    "# TYPE flashkv_live_evictions_total counter\n"
    "flashkv_live_evictions_total 8\n"
    "# HELP flashkv_live_sessions Live sessions holding tokens.\n"
    "# TYPE flashkv_live_sessions gauge\n"
    "flashkv_live_sessions 9\n"
    "# HELP flashkv_prefill_tokens_total Prompt tokens evaluated.\n"
    "# TYPE flashkv_prefill_tokens_total counter\n"
    "flashkv_prefill_tokens_total 10\n"
    "# HELP flashkv_prefill_seconds_total Time spent evaluating prompt tokens.\n"
    "# TYPE flashkv_prefill_seconds_total counter\n"
    "flashkv_prefill_seconds_total 1.5\n"
    "# HELP flashkv_decode_tokens_total Tokens generated.\n"
    "# TYPE flashkv_decode_tokens_total counter\n"
    "flashkv_decode_tokens_total 11\n"
    "# HELP flashkv_decode_seconds_total Time spent generating.\n"
    "# TYPE flashkv_decode_seconds_total counter\n"
    "flashkv_decode_seconds_total 0.25\n"
    "# HELP flashkv_prefill_tokens_per_second Prefill throughput of the last request that "
    "prefilled.\n"
    "# TYPE flashkv_prefill_tokens_per_second gauge\n"
    "flashkv_prefill_tokens_per_second 12.5\n"
    "# HELP flashkv_decode_tokens_per_second Decode throughput of the last request that "
    "generated.\n"
    "# TYPE flashkv_decode_tokens_per_second gauge\n"
    "flashkv_decode_tokens_per_second 13\n"
    "# HELP flashkv_restore_seconds_total Time spent restoring RAM and disk snapshots.\n"
    "# TYPE flashkv_restore_seconds_total counter\n"
    "flashkv_restore_seconds_total 0.125\n"
    "# HELP flashkv_restore_bytes_total Bytes restored into live sessions, by the tier they "
    "came from.\n"
    "# TYPE flashkv_restore_bytes_total counter\n"
    "flashkv_restore_bytes_total{tier=\"ram\"} 34\n"
    "flashkv_restore_bytes_total{tier=\"disk\"} 35\n"
    "# HELP flashkv_requests_total Generation requests by outcome.\n"
    "# TYPE flashkv_requests_total counter\n"
    "flashkv_requests_total{outcome=\"ok\"} 14\n"
    "flashkv_requests_total{outcome=\"cancelled\"} 15\n"
    "flashkv_requests_total{outcome=\"failed\"} 16\n"
    "# HELP flashkv_queue_depth Requests waiting for the inference worker.\n"
    "# TYPE flashkv_queue_depth gauge\n"
    "flashkv_queue_depth 17\n"
    "# HELP flashkv_active_requests Requests the worker is running (sessions in its batched "
    "steps).\n"
    "# TYPE flashkv_active_requests gauge\n"
    "flashkv_active_requests 1\n"
    "# HELP flashkv_queue_wait_seconds_total Time requests waited for the worker (divide by "
    "flashkv_queued_requests_total).\n"
    "# TYPE flashkv_queue_wait_seconds_total counter\n"
    "flashkv_queue_wait_seconds_total 0.5\n"
    "# HELP flashkv_queued_requests_total Requests the worker took up.\n"
    "# TYPE flashkv_queued_requests_total counter\n"
    "flashkv_queued_requests_total 18\n"
    "# HELP flashkv_batch_steps_total Batched forward steps.\n"
    "# TYPE flashkv_batch_steps_total counter\n"
    "flashkv_batch_steps_total 19\n"
    "# HELP flashkv_batch_rows_total Token rows of every batched step (decode rows and prompt "
    "tokens).\n"
    "# TYPE flashkv_batch_rows_total counter\n"
    "flashkv_batch_rows_total 20\n"
    "# HELP flashkv_batch_sessions_total Sessions of every batched step (divide by "
    "flashkv_batch_steps_total).\n"
    "# TYPE flashkv_batch_sessions_total counter\n"
    "flashkv_batch_sessions_total 21\n"
    "# HELP flashkv_batch_sessions Sessions in the last batched step.\n"
    "# TYPE flashkv_batch_sessions gauge\n"
    "flashkv_batch_sessions 3\n"
    "# HELP flashkv_inter_token_seconds_total Gaps between consecutive tokens of a session, "
    "summed over every session.\n"
    "# TYPE flashkv_inter_token_seconds_total counter\n"
    "flashkv_inter_token_seconds_total 0.75\n"
    "# HELP flashkv_inter_token_gaps_total Gaps counted in that sum.\n"
    "# TYPE flashkv_inter_token_gaps_total counter\n"
    "flashkv_inter_token_gaps_total 22\n"
    "# HELP flashkv_inter_token_max_seconds The longest gap between two tokens of one session "
    "since start.\n"
    "# TYPE flashkv_inter_token_max_seconds gauge\n"
    "flashkv_inter_token_max_seconds 0.0625\n";

constexpr const char* kDiskText =
    "# HELP flashkv_disk_bytes Bytes in the disk KV cache directory (with queued writes).\n"
    "# TYPE flashkv_disk_bytes gauge\n"
    "flashkv_disk_bytes 4096\n"
    "# HELP flashkv_disk_budget_bytes The disk KV cache budget (--kv-disk-space-mb).\n"
    "# TYPE flashkv_disk_budget_bytes gauge\n"
    "flashkv_disk_budget_bytes 1048576\n"
    "# HELP flashkv_disk_entries Loadable snapshots in the disk KV cache.\n"
    "# TYPE flashkv_disk_entries gauge\n"
    "flashkv_disk_entries 3\n"
    "# HELP flashkv_disk_evictions_total Snapshots deleted to stay within the budget.\n"
    "# TYPE flashkv_disk_evictions_total counter\n"
    "flashkv_disk_evictions_total 21\n"
    "# HELP flashkv_disk_saves_total Snapshot writes by result.\n"
    "# TYPE flashkv_disk_saves_total counter\n"
    "flashkv_disk_saves_total{result=\"ok\"} 22\n"
    "flashkv_disk_saves_total{result=\"failed\"} 23\n"
    "flashkv_disk_saves_total{result=\"skipped\"} 24\n"
    "# HELP flashkv_disk_load_failures_total Snapshots that failed to load (damaged or "
    "foreign).\n"
    "# TYPE flashkv_disk_load_failures_total counter\n"
    "flashkv_disk_load_failures_total 25\n"
    "# HELP flashkv_disk_quarantined_total Damaged snapshots moved aside.\n"
    "# TYPE flashkv_disk_quarantined_total counter\n"
    "flashkv_disk_quarantined_total 26\n"
    "# HELP flashkv_disk_pending_writes Snapshots queued for the background writer.\n"
    "# TYPE flashkv_disk_pending_writes gauge\n"
    "flashkv_disk_pending_writes 27\n"
    "# HELP flashkv_disk_written_bytes_total Bytes written to the disk KV cache by save "
    "reason.\n"
    "# TYPE flashkv_disk_written_bytes_total counter\n"
    "flashkv_disk_written_bytes_total{reason=\"unknown\"} 31\n"
    "flashkv_disk_written_bytes_total{reason=\"cold\"} 32\n"
    "flashkv_disk_written_bytes_total{reason=\"continued\"} 33\n"
    "flashkv_disk_written_bytes_total{reason=\"evict\"} 34\n"
    "flashkv_disk_written_bytes_total{reason=\"shutdown\"} 35\n"
    "flashkv_disk_written_bytes_total{reason=\"manual\"} 36\n"
    "# HELP flashkv_disk_written_bytes_24h Bytes written in the last 24 hours (the write "
    "budget's window).\n"
    "# TYPE flashkv_disk_written_bytes_24h gauge\n"
    "flashkv_disk_written_bytes_24h 37\n"
    "# HELP flashkv_disk_logical_bytes Sum of every disk entry's whole state (what unchunked "
    "files would occupy).\n"
    "# TYPE flashkv_disk_logical_bytes gauge\n"
    "flashkv_disk_logical_bytes 38\n"
    "# HELP flashkv_disk_chunks Content-addressed chunk files on disk.\n"
    "# TYPE flashkv_disk_chunks gauge\n"
    "flashkv_disk_chunks 39\n"
    "# HELP flashkv_disk_chunk_bytes Bytes of the chunk files.\n"
    "# TYPE flashkv_disk_chunk_bytes gauge\n"
    "flashkv_disk_chunk_bytes 40\n"
    "# HELP flashkv_disk_chunk_writes_total Chunks a save needed, by whether it wrote them or "
    "found them stored.\n"
    "# TYPE flashkv_disk_chunk_writes_total counter\n"
    "flashkv_disk_chunk_writes_total{result=\"written\"} 46\n"
    "flashkv_disk_chunk_writes_total{result=\"reused\"} 47\n"
    "# HELP flashkv_disk_saves_skipped_total Saves skipped by the SSD rules, by rule.\n"
    "# TYPE flashkv_disk_saves_skipped_total counter\n"
    "flashkv_disk_saves_skipped_total{rule=\"write_budget\"} 48\n"
    "flashkv_disk_saves_skipped_total{rule=\"not_worth\"} 49\n";

constexpr const char* kRamText =
    "# HELP flashkv_ram_bytes Bytes held by the RAM KV tier.\n"
    "# TYPE flashkv_ram_bytes gauge\n"
    "flashkv_ram_bytes 8192\n"
    "# HELP flashkv_ram_budget_bytes The RAM KV tier's budget (--kv-ram-space-mb).\n"
    "# TYPE flashkv_ram_budget_bytes gauge\n"
    "flashkv_ram_budget_bytes 2097152\n"
    "# HELP flashkv_ram_entries Snapshots in the RAM KV tier.\n"
    "# TYPE flashkv_ram_entries gauge\n"
    "flashkv_ram_entries 2\n"
    "# HELP flashkv_ram_puts_total Snapshots offered to the RAM tier by result.\n"
    "# TYPE flashkv_ram_puts_total counter\n"
    "flashkv_ram_puts_total{result=\"ok\"} 41\n"
    "flashkv_ram_puts_total{result=\"skipped\"} 42\n"
    "# HELP flashkv_ram_evictions_total Snapshots dropped from the RAM tier to stay within its "
    "budget.\n"
    "# TYPE flashkv_ram_evictions_total counter\n"
    "flashkv_ram_evictions_total 43\n"
    "# HELP flashkv_ram_transfer_bytes_total Bytes copied between live states and the RAM "
    "tier, by direction.\n"
    "# TYPE flashkv_ram_transfer_bytes_total counter\n"
    "flashkv_ram_transfer_bytes_total{direction=\"in\"} 44\n"
    "flashkv_ram_transfer_bytes_total{direction=\"out\"} 45\n";

// The latency histograms with no observation (their samples are checked in
// metrics_histogram_test.cpp): every bucket 0, then _sum 0 and _count 0.
std::string EmptyHistogram(const char* name, const char* help, std::span<const double> bounds) {
  std::string out = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  for (double b : bounds) out += fmt::format("{}_bucket{{le=\"{}\"}} 0\n", name, b);
  return out + fmt::format("{}_bucket{{le=\"+Inf\"}} 0\n{}_sum 0\n{}_count 0\n", name, name, name);
}

const std::string kEngineText =
    std::string(kEngineTextBase) +
    EmptyHistogram("flashkv_time_to_first_token_seconds",
                   "Time to first token: submitted to first token sampled, queue wait included.",
                   LatencyHistogram::TimeToFirstTokenBounds()) +
    EmptyHistogram("flashkv_inter_token_latency_seconds",
                   "Gaps between consecutive tokens of one session.",
                   LatencyHistogram::InterTokenBounds()) +
    EmptyHistogram("flashkv_request_queue_time_seconds",
                   "Time a request waited before the worker took it up.",
                   LatencyHistogram::QueueBounds()) +
    EmptyHistogram("flashkv_request_prefill_tokens_per_second",
                   "Each request's prompt evaluation rate (requests that prefilled).",
                   LatencyHistogram::TokensPerSecondBounds()) +
    EmptyHistogram("flashkv_request_decode_tokens_per_second",
                   "Each request's generation rate (requests that generated).",
                   LatencyHistogram::TokensPerSecondBounds());

constexpr const char* kHttpHeader =
    "# HELP flashkv_http_requests_total HTTP requests by endpoint and status code.\n"
    "# TYPE flashkv_http_requests_total counter\n";

TEST(MetricsTest, EngineFamiliesWithoutDiskOrHttp) {
  EXPECT_EQ(PrometheusText(SomeStats(), {}), std::string(kEngineText) + kHttpHeader);
}

TEST(MetricsTest, DiskFamiliesOnlyWhenTheDiskTierIsOn) {
  EngineStats s = SomeStats();
  s.disk.used_bytes = 4096;
  s.disk.budget_bytes = 1 << 20;
  s.disk.entries = 3;
  s.disk.evictions = 21;
  s.disk.saves = 22;
  s.disk.save_failures = 23;
  s.disk.save_skipped = 24;
  s.disk.load_failures = 25;
  s.disk.quarantined = 26;
  s.disk.pending_writes = 27;
  for (uint64_t r = 0; r < 6; ++r) s.disk.bytes_written_by_reason[r] = 31 + r;
  s.disk.bytes_written_24h = 37;
  s.disk.logical_bytes = 38;
  s.disk.chunks = 39;
  s.disk.chunk_bytes = 40;
  s.disk.chunks_written = 46;
  s.disk.chunks_reused = 47;
  s.disk.save_skipped_write_budget = 48;
  s.disk.save_skipped_not_worth = 49;
  // Filled but off: nothing about the disk is printed.
  EXPECT_EQ(PrometheusText(s, {}), std::string(kEngineText) + kHttpHeader);
  s.disk_enabled = true;
  EXPECT_EQ(PrometheusText(s, {}), std::string(kEngineText) + kDiskText + kHttpHeader);
}

TEST(MetricsTest, RamFamiliesOnlyWhenTheRamTierIsOn) {
  EngineStats s = SomeStats();
  s.ram.used_bytes = 8192;
  s.ram.budget_bytes = 2 << 20;
  s.ram.entries = 2;
  s.ram.puts = 41;
  s.ram.put_skipped = 42;
  s.ram.evictions = 43;
  s.ram.bytes_in = 44;
  s.ram.bytes_out = 45;
  EXPECT_EQ(PrometheusText(s, {}), std::string(kEngineText) + kHttpHeader);
  s.ram_enabled = true;
  EXPECT_EQ(PrometheusText(s, {}), std::string(kEngineText) + kRamText + kHttpHeader);
}

TEST(MetricsTest, RemoteSamplesAndFamiliesOnlyWhenTheSharedTierIsOn) {
  EngineStats s = SomeStats();
  s.remote_hits = 51;
  s.remote_misses = 52;
  s.prompt_tokens_remote = 53;
  s.restore_bytes_remote = 54;
  s.remote.bytes_read = 55;
  s.remote.bytes_written = 56;
  s.remote.uploads = 57;
  s.remote.dropped = 58;
  s.remote.refused = 59;
  s.remote.errors = 60;
  s.remote.damaged = 61;
  s.remote.foreign = 62;
  s.remote.unsigned_values = 64;
  s.remote.redirects = 63;
  s.remote.queued = 3;
  s.remote.backoff = true;
  s.remote_fetches_waiting = 2;
  EXPECT_EQ(PrometheusText(s, {}), std::string(kEngineText) + kHttpHeader);
  s.remote_enabled = true;
  const std::string text = PrometheusText(s, {});
  for (const char* line : {
           "flashkv_prompt_tokens_total{source=\"remote\"} 53\n",
           "flashkv_cache_lookups_total{tier=\"remote\",result=\"hit\"} 51\n",
           "flashkv_cache_lookups_total{tier=\"remote\",result=\"miss\"} 52\n",
           "flashkv_restore_bytes_total{tier=\"remote\"} 54\n",
           "flashkv_remote_bytes_total{direction=\"read\"} 55\n",
           "flashkv_remote_bytes_total{direction=\"written\"} 56\n",
           "flashkv_remote_uploads_total{result=\"ok\"} 57\n",
           "flashkv_remote_uploads_total{result=\"dropped\"} 58\n",
           "flashkv_remote_refused_writes_total 59\n",
           "flashkv_remote_redirects_total 63\n",
           "flashkv_remote_errors_total{kind=\"connection\"} 60\n",
           "flashkv_remote_errors_total{kind=\"damaged\"} 61\n",
           "flashkv_remote_errors_total{kind=\"foreign\"} 62\n",
           "flashkv_remote_errors_total{kind=\"unsigned\"} 64\n",
           "flashkv_remote_upload_queue 3\n",
           "flashkv_remote_fetches_waiting 2\n",
           "flashkv_remote_backoff{what=\"link\"} 1\n",
           "flashkv_remote_backoff{what=\"writes\"} 0\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line;
  }
  // A family's samples stay together: the remote lookups sit right after the disk's.
  EXPECT_NE(text.find("result=\"miss\"} 7\nflashkv_cache_lookups_total{tier=\"remote\""),
            std::string::npos);
}

TEST(MetricsTest, HttpCountsOneSamplePerEndpointAndCode) {
  HttpCounters http;
  http.Count("/v1/chat/completions", 200);
  http.Count("/v1/chat/completions", 200);
  http.Count("/v1/chat/completions", 400);
  http.Count("/health", 200);
  // std::map order: endpoint, then code.
  EXPECT_EQ(PrometheusText(SomeStats(), http.Snapshot()),
            std::string(kEngineText) + kHttpHeader +
                "flashkv_http_requests_total{endpoint=\"/health\",code=\"200\"} 1\n"
                "flashkv_http_requests_total{endpoint=\"/v1/chat/completions\",code=\"200\"} 2\n"
                "flashkv_http_requests_total{endpoint=\"/v1/chat/completions\",code=\"400\"} 1\n");
}

}  // namespace
}  // namespace flashkv
