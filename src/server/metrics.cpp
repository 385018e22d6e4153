#include "server/metrics.h"

#include <iterator>
#include <string_view>

#include <fmt/format.h>

namespace flashkv {
namespace {

// One metric family: the HELP and TYPE lines, then its samples under the same name.
class Family {
 public:
  Family(std::string* out, const char* name, const char* type, const char* help)
      : out_(out), name_(name) {
    *out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  // A labelled sample; `labels` is the text between the braces, e.g. `tier="live"`.
  template <typename T>
  Family& Add(std::string_view labels, T value) {
    *out_ += fmt::format("{}{{{}}} {}\n", name_, labels, value);
    return *this;
  }
  // The family's only sample, without labels.
  template <typename T>
  Family& Add(T value) {
    *out_ += fmt::format("{} {}\n", name_, value);
    return *this;
  }

 private:
  std::string* out_;
  const char* name_;
};

// A histogram family: cumulative le buckets (+Inf last), then _sum and _count.
void AppendHistogram(std::string* out, const char* name, const char* help,
                     const LatencyHistogram& h) {
  *out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  for (size_t i = 0; i < h.bounds().size(); ++i) {
    *out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, h.bounds()[i], h.cumulative(i));
  }
  *out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, h.count());
  *out += fmt::format("{}_sum {}\n{}_count {}\n", name, h.sum(), name, h.count());
}

// The shared tier's own families (kv_remote/remote_tier.h).
// The routed experts' device cache (model/expert_cache.h), when they live in host memory.
// Routes are counted on the device and folded in every few steps, so the counters trail by
// at most that many steps.
void AppendExpertCacheMetrics(const EngineStats& s, std::string* out) {
  const ExpertCacheStats& c = s.expert_cache;
  Family(out, "flashkv_expert_cache_slots", "gauge",
         "Routed experts held on the device (the rest are read from host memory).")
      .Add(c.slots);
  Family(out, "flashkv_expert_cache_experts", "gauge",
         "Routed experts of the model (layers x experts).")
      .Add(c.experts);
  Family(out, "flashkv_expert_cache_routes_total", "counter",
         "Token-to-expert routes by where the expert was: on the device (hit) or in host memory.")
      .Add("result=\"hit\"", c.hits)
      .Add("result=\"miss\"", c.misses);
  Family(out, "flashkv_expert_cache_host_read_bytes_total", "counter",
         "Expert bytes the missed routes read from host memory (one expert each).")
      .Add(c.miss_bytes);
  Family(out, "flashkv_expert_cache_swaps_total", "counter",
         "Hot experts copied into the device cache in place of cold ones.")
      .Add(c.swaps);
  Family(out, "flashkv_expert_cache_swap_bytes_total", "counter",
         "Bytes copied into the device cache by those trades.")
      .Add(c.swap_bytes);
  Family(out, "flashkv_expert_cache_staged_bytes_total", "counter",
         "Uncached experts' bytes copied ahead of prefill steps' MoE blocks (prefill staging).")
      .Add(c.staged_bytes);
  Family(out, "flashkv_expert_cache_gather_steps_total", "counter",
         "Decode-sized steps whose MoE blocks copied their chosen uncached experts to the "
         "device before reading them (decode gather).")
      .Add(c.gather_steps);
}

void AppendRemoteTierMetrics(const EngineStats& s, std::string* out) {
  const RemoteTierStats& r = s.remote;
  Family(out, "flashkv_remote_bytes_total", "counter",
         "Bytes moved to and from the shared KV store, by direction.")
      .Add("direction=\"read\"", r.bytes_read)
      .Add("direction=\"written\"", r.bytes_written);
  Family(out, "flashkv_remote_uploads_total", "counter",
         "Entries mirrored to the shared store by result.")
      .Add("result=\"ok\"", r.uploads)
      .Add("result=\"failed\"", r.upload_failures)
      .Add("result=\"dropped\"", r.dropped);
  Family(out, "flashkv_remote_refused_writes_total", "counter",
         "Writes the shared store refused for memory (maxmemory).")
      .Add(r.refused);
  Family(out, "flashkv_remote_redirects_total", "counter",
         "Redis Cluster MOVED and ASK replies followed to the node serving a key.")
      .Add(r.redirects);
  Family(out, "flashkv_remote_errors_total", "counter",
         "Shared store errors by kind: unreachable or timed out, damaged (or oversized, "
         "wrong-typed) values, other models' values, values unsigned or wrongly signed for "
         "--kv-remote-key-file (never loaded).")
      .Add("kind=\"connection\"", r.errors)
      .Add("kind=\"damaged\"", r.damaged)
      .Add("kind=\"foreign\"", r.foreign)
      .Add("kind=\"unsigned\"", r.unsigned_values);
  Family(out, "flashkv_remote_upload_queue", "gauge", "Entries waiting to be mirrored.")
      .Add(r.queued);
  Family(out, "flashkv_remote_fetches_waiting", "gauge",
         "Requests waiting on a shared-store lookup (queued or running).")
      .Add(s.remote_fetches_waiting);
  Family(out, "flashkv_remote_backoff", "gauge",
         "1 while the shared store is being retried with backoff, by what failed.")
      .Add("what=\"link\"", r.backoff ? 1 : 0)
      .Add("what=\"writes\"", r.writes_backoff ? 1 : 0);
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
  Family prompt_tokens(&out, "flashkv_prompt_tokens_total", "counter",
                       "Prompt tokens by where they came from: reused from a live session, "
                       "restored from RAM or disk, or prefilled.");
  prompt_tokens.Add("source=\"live\"", s.prompt_tokens_live)
      .Add("source=\"ram\"", s.prompt_tokens_ram)
      .Add("source=\"disk\"", s.prompt_tokens_disk);
  if (s.remote_enabled) prompt_tokens.Add("source=\"remote\"", s.prompt_tokens_remote);
  prompt_tokens.Add("source=\"prefill\"", s.prompt_tokens_prefill);
  Family lookups(&out, "flashkv_cache_lookups_total", "counter",
                 "Resume lookups per cache tier and result.");
  lookups.Add("tier=\"live\",result=\"hit\"", s.live_hits)
      .Add("tier=\"live\",result=\"miss\"", s.live_misses)
      .Add("tier=\"ram\",result=\"hit\"", s.ram_hits)
      .Add("tier=\"ram\",result=\"miss\"", s.ram_misses)
      .Add("tier=\"disk\",result=\"hit\"", s.disk_hits)
      .Add("tier=\"disk\",result=\"miss\"", s.disk_misses);
  if (s.remote_enabled) {
    lookups.Add("tier=\"remote\",result=\"hit\"", s.remote_hits)
        .Add("tier=\"remote\",result=\"miss\"", s.remote_misses);
  }
  Family(&out, "flashkv_live_evictions_total", "counter",
         "Live sessions pushed out of memory to make room for another.")
      .Add(s.live_evictions);
  Family(&out, "flashkv_live_sessions", "gauge", "Live sessions holding tokens.")
      .Add(s.live_sessions);

  Family(&out, "flashkv_prefill_tokens_total", "counter", "Prompt tokens evaluated.")
      .Add(s.prefill_tokens);
  Family(&out, "flashkv_prefill_seconds_total", "counter", "Time spent evaluating prompt tokens.")
      .Add(s.prefill_seconds);
  Family(&out, "flashkv_decode_tokens_total", "counter", "Tokens generated.").Add(s.decode_tokens);
  Family(&out, "flashkv_decode_seconds_total", "counter", "Time spent generating.")
      .Add(s.decode_seconds);
  Family(&out, "flashkv_prefill_tokens_per_second", "gauge",
         "Prefill throughput of the last request that prefilled.")
      .Add(s.last_prefill_tps);
  Family(&out, "flashkv_decode_tokens_per_second", "gauge",
         "Decode throughput of the last request that generated.")
      .Add(s.last_decode_tps);
  Family(&out, "flashkv_restore_seconds_total", "counter",
         "Time spent restoring RAM and disk snapshots.")
      .Add(s.restore_seconds);
  Family restore_bytes(&out, "flashkv_restore_bytes_total", "counter",
                       "Bytes restored into live sessions, by the tier they came from.");
  restore_bytes.Add("tier=\"ram\"", s.restore_bytes_ram).Add("tier=\"disk\"", s.restore_bytes_disk);
  if (s.remote_enabled) restore_bytes.Add("tier=\"remote\"", s.restore_bytes_remote);

  Family(&out, "flashkv_requests_total", "counter", "Generation requests by outcome.")
      .Add("outcome=\"ok\"", s.requests_ok)
      .Add("outcome=\"cancelled\"", s.requests_cancelled)
      .Add("outcome=\"failed\"", s.requests_failed);
  Family(&out, "flashkv_queue_depth", "gauge", "Requests waiting for the inference worker.")
      .Add(s.queue_depth);
  Family(&out, "flashkv_active_requests", "gauge",
         "Requests the worker is running (sessions in its batched steps).")
      .Add(s.active_requests);
  Family(&out, "flashkv_queue_wait_seconds_total", "counter",
         "Time requests waited for the worker (divide by flashkv_queued_requests_total).")
      .Add(s.queue_seconds);
  Family(&out, "flashkv_queued_requests_total", "counter", "Requests the worker took up.")
      .Add(s.queued_requests);
  Family(&out, "flashkv_batch_steps_total", "counter", "Batched forward steps.").Add(s.steps);
  Family(&out, "flashkv_batch_rows_total", "counter",
         "Token rows of every batched step (decode rows and prompt tokens).")
      .Add(s.step_rows);
  Family(&out, "flashkv_batch_sessions_total", "counter",
         "Sessions of every batched step (divide by flashkv_batch_steps_total).")
      .Add(s.step_sessions);
  Family(&out, "flashkv_batch_sessions", "gauge", "Sessions in the last batched step.")
      .Add(s.last_step_sessions);
  Family(&out, "flashkv_inter_token_seconds_total", "counter",
         "Gaps between consecutive tokens of a session, summed over every session.")
      .Add(s.inter_token_seconds);
  Family(&out, "flashkv_inter_token_gaps_total", "counter", "Gaps counted in that sum.")
      .Add(s.inter_token_gaps);
  Family(&out, "flashkv_inter_token_max_seconds", "gauge",
         "The longest gap between two tokens of one session since start.")
      .Add(s.inter_token_max_seconds);
  // Distributions under the names vLLM gives the same measures (flashkv_ for vllm:).
  AppendHistogram(&out, "flashkv_time_to_first_token_seconds",
                  "Time to first token: submitted to first token sampled, queue wait included.",
                  s.time_to_first_token);
  AppendHistogram(&out, "flashkv_inter_token_latency_seconds",
                  "Gaps between consecutive tokens of one session.", s.inter_token);
  AppendHistogram(&out, "flashkv_request_queue_time_seconds",
                  "Time a request waited before the worker took it up.", s.queue_wait);
  AppendHistogram(&out, "flashkv_request_prefill_tokens_per_second",
                  "Each request's prompt evaluation rate (requests that prefilled).",
                  s.prefill_tps);
  AppendHistogram(&out, "flashkv_request_decode_tokens_per_second",
                  "Each request's generation rate (requests that generated).", s.decode_tps);

  if (s.ram_enabled) {
    const RamCacheStats& r = s.ram;
    Family(&out, "flashkv_ram_bytes", "gauge", "Bytes held by the RAM KV tier.").Add(r.used_bytes);
    Family(&out, "flashkv_ram_budget_bytes", "gauge",
           "The RAM KV tier's budget (--kv-ram-space-mb).")
        .Add(r.budget_bytes);
    Family(&out, "flashkv_ram_entries", "gauge", "Snapshots in the RAM KV tier.").Add(r.entries);
    Family(&out, "flashkv_ram_puts_total", "counter",
           "Snapshots offered to the RAM tier by result.")
        .Add("result=\"ok\"", r.puts)
        .Add("result=\"skipped\"", r.put_skipped);
    Family(&out, "flashkv_ram_evictions_total", "counter",
           "Snapshots dropped from the RAM tier to stay within its budget.")
        .Add(r.evictions);
    Family(&out, "flashkv_ram_transfer_bytes_total", "counter",
           "Bytes copied between live states and the RAM tier, by direction.")
        .Add("direction=\"in\"", r.bytes_in)
        .Add("direction=\"out\"", r.bytes_out);
  }

  if (s.disk_enabled) {
    const DiskCacheStats& d = s.disk;
    Family(&out, "flashkv_disk_bytes", "gauge",
           "Bytes in the disk KV cache directory (with queued writes).")
        .Add(d.used_bytes);
    Family(&out, "flashkv_disk_budget_bytes", "gauge",
           "The disk KV cache budget (--kv-disk-space-mb).")
        .Add(d.budget_bytes);
    Family(&out, "flashkv_disk_entries", "gauge", "Loadable snapshots in the disk KV cache.")
        .Add(d.entries);
    Family(&out, "flashkv_disk_evictions_total", "counter",
           "Snapshots deleted to stay within the budget.")
        .Add(d.evictions);
    Family(&out, "flashkv_disk_saves_total", "counter", "Snapshot writes by result.")
        .Add("result=\"ok\"", d.saves)
        .Add("result=\"failed\"", d.save_failures)
        .Add("result=\"skipped\"", d.save_skipped);
    Family(&out, "flashkv_disk_load_failures_total", "counter",
           "Snapshots that failed to load (damaged or foreign).")
        .Add(d.load_failures);
    Family(&out, "flashkv_disk_quarantined_total", "counter", "Damaged snapshots moved aside.")
        .Add(d.quarantined);
    Family(&out, "flashkv_disk_pending_writes", "gauge",
           "Snapshots queued for the background writer.")
        .Add(d.pending_writes);
    // SSD stewardship (format v2 chunks, the write budget).
    Family written(&out, "flashkv_disk_written_bytes_total", "counter",
                   "Bytes written to the disk KV cache by save reason.");
    for (uint8_t r = 0; r < std::size(d.bytes_written_by_reason); ++r) {
      written.Add(fmt::format("reason=\"{}\"", SaveReasonName(SaveReason(r))),
                  d.bytes_written_by_reason[r]);
    }
    Family(&out, "flashkv_disk_written_bytes_24h", "gauge",
           "Bytes written in the last 24 hours (the write budget's window).")
        .Add(d.bytes_written_24h);
    Family(&out, "flashkv_disk_logical_bytes", "gauge",
           "Sum of every disk entry's whole state (what unchunked files would occupy).")
        .Add(d.logical_bytes);
    Family(&out, "flashkv_disk_chunks", "gauge", "Content-addressed chunk files on disk.")
        .Add(d.chunks);
    Family(&out, "flashkv_disk_chunk_bytes", "gauge", "Bytes of the chunk files.")
        .Add(d.chunk_bytes);
    Family(&out, "flashkv_disk_chunk_writes_total", "counter",
           "Chunks a save needed, by whether it wrote them or found them stored.")
        .Add("result=\"written\"", d.chunks_written)
        .Add("result=\"reused\"", d.chunks_reused);
    Family(&out, "flashkv_disk_saves_skipped_total", "counter",
           "Saves skipped by the SSD rules, by rule.")
        .Add("rule=\"write_budget\"", d.save_skipped_write_budget)
        .Add("rule=\"not_worth\"", d.save_skipped_not_worth);
  }

  if (s.remote_enabled) AppendRemoteTierMetrics(s, &out);
  if (s.expert_cache_enabled) AppendExpertCacheMetrics(s, &out);

  Family http_family(&out, "flashkv_http_requests_total", "counter",
                     "HTTP requests by endpoint and status code.");
  for (const auto& [key, n] : http) {
    http_family.Add(fmt::format("endpoint=\"{}\",code=\"{}\"", key.first, key.second), n);
  }
  return out;
}

}  // namespace flashkv
