// `flashkv serve`: the OpenAI/Anthropic-compatible HTTP server. Flags follow ds4-server
// where they overlap (--host, --port, --ctx, --tokens, --cors, ...). Loads the model and
// tokenizer, starts the engine worker and the HTTP listener, and shuts down cleanly on
// SIGINT/SIGTERM: the listener closes, queued and running requests finish, then the
// process exits (a second signal exits at once).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "engine/engine.h"
#include "engine/runtime.h"
#include "engine/scheduler.h"
#include "gguf/gguf_file.h"
#include "kv/cache_policy.h"
#include "kv/disk_cache.h"
#include "kv/model_fingerprint.h"
#include "server/api_server.h"
#include "server/http_server.h"
#include "tokenizer/tokenizer.h"

namespace flashkv::cli {
namespace {

struct ServeFlags {
  std::string model;
  int ctx = 32768;
  int64_t tokens = 393216;
  int threads = 0;
  std::string host = "127.0.0.1";
  int port = 8000;
  bool cors = false;
  std::string api_key;
  int max_body_mb = 64;
  int http_threads = 64;
  int live_sessions = 4;
  int prefill_chunk = 2048;
  int keepalive_ms = 1000;
  bool disable_exact_dsml = false;
  int tool_memory_max_ids = 100000;
  // Disk KV cache (tier 2), ds4-server's flags.
  std::string kv_disk_dir;
  uint64_t kv_disk_space_mb = 4096;
  std::string kv_quarantine = "on";
  CachePolicyOptions kv_policy;
};

std::string DefaultModel() {
  return std::filesystem::exists("ds4flash.gguf") ? "ds4flash.gguf" : "models/flashkv-tiny.gguf";
}

// Waits for SIGINT/SIGTERM on its own thread (they are blocked everywhere else).
class SignalWatcher {
 public:
  explicit SignalWatcher(HttpServer& http) : http_(http) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~SignalWatcher() {
    done_ = true;
    pthread_kill(thread_.native_handle(), SIGUSR1);  // wakes sigwait
    thread_.join();
  }

 private:
  void Loop() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    int seen = 0;
    while (!done_) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0 || sig == SIGUSR1) continue;
      if (++seen == 1) {
        spdlog::info("signal {}: closing the listener, finishing requests (again to exit now)",
                     sig);
        http_.Stop();
      } else {
        _exit(130);
      }
    }
  }
  HttpServer& http_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// The disk cache, keyed to this model file and numerics so another model's snapshots are
// never loaded into this one.
Expected<std::unique_ptr<DiskCache>> OpenDiskCache(const ServeFlags& f, const GgufFile& file,
                                                   const ModelOptions& mo) {
  if (f.kv_quarantine != "on" && f.kv_quarantine != "off") {
    return InvalidArgument("--kv-quarantine must be on or off, got '{}'", f.kv_quarantine);
  }
  DiskCacheOptions o;
  o.dir = f.kv_disk_dir;
  o.budget_bytes = f.kv_disk_space_mb << 20;
  o.quarantine = f.kv_quarantine == "on";
  FLASHKV_ASSIGN_OR_RETURN(Sha1Digest fp, ModelFingerprint(file));
  o.identity = SnapshotIdentity{
      fp, fmt::format("{}/{}", NumericsModeName(mo.numerics), ActQuantModeName(mo.act_quant))};
  return DiskCache::Open(o);
}

Status RunServe(const ServeFlags& f) {
  if (f.ctx < 16) return InvalidArgument("--ctx must be at least 16");
  if (f.tokens < 1) return InvalidArgument("--tokens must be positive");
  if (f.live_sessions < 1) return InvalidArgument("--kv-live-sessions must be at least 1");
  if (f.prefill_chunk < 1) return InvalidArgument("--prefill-chunk must be positive");
  if (f.max_body_mb < 1) return InvalidArgument("--max-body-mb must be positive");
  if (f.keepalive_ms < 50 || f.keepalive_ms > 2000)
    return InvalidArgument("--sse-keepalive-ms must be 50..2000, got {}", f.keepalive_ms);
  if (f.port < 0 || f.port > 65535) return InvalidArgument("--port must be 0..65535");

  // Blocked before any thread starts so every thread inherits the mask and only the
  // watcher receives them; a write to a closed socket must not kill the server.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  const std::string model_path = f.model.empty() ? DefaultModel() : f.model;
  if (!std::filesystem::exists(model_path)) {
    return NotFound("model {} not found (make one with `flashkv make-tiny {}`, or pass --model)",
                    model_path, model_path);
  }
  FLASHKV_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::Open(model_path));
  Expected<Tokenizer> tokenizer = Tokenizer::FromGguf(gguf);
  if (!tokenizer.ok()) return tokenizer.status().WithContext(model_path);
  RuntimeOptions ro;
  ro.model_path = model_path;
  ro.threads = f.threads;
  FLASHKV_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::Open(ro));
  FLASHKV_ASSIGN_OR_RETURN(CachePolicy policy, CachePolicy::Create(f.kv_policy));

  EngineMetrics metrics;
  std::unique_ptr<DiskCache> disk;
  if (!f.kv_disk_dir.empty()) {
    if (f.kv_disk_space_mb == 0) return InvalidArgument("--kv-disk-space-mb must be positive");
    // A cache that cannot open (another server holds the directory, no permission) is
    // reported; the server still runs from memory, as ds4 does.
    auto opened = OpenDiskCache(f, gguf, rt->model().options());
    if (opened.ok()) {
      disk = std::move(*opened);
      metrics.SetDiskCache(disk.get());
    } else {
      spdlog::error("disk KV cache disabled: {}", opened.status().ToString());
    }
  }
  ToolReplayMap replay(size_t(f.tool_memory_max_ids));
  EngineOptions eo;
  eo.ctx_size = f.ctx;
  eo.live_sessions = f.live_sessions;
  eo.prefill_chunk = f.prefill_chunk;
  eo.disk = disk.get();
  eo.policy = policy;
  Engine engine(rt->model(), *tokenizer, replay, metrics, eo);
  Scheduler scheduler(engine, metrics);
  scheduler.Start();

  ApiServerOptions ao;
  ao.ctx_size = f.ctx;
  ao.default_max_tokens = f.tokens;
  ao.exact_dsml_replay = !f.disable_exact_dsml;
  ao.keepalive_ms = f.keepalive_ms;
  ApiServer api(scheduler, *tokenizer, replay, metrics, ao);

  HttpServerOptions ho;
  ho.host = f.host;
  ho.port = f.port;
  ho.cors = f.cors;
  ho.api_key = f.api_key;
  ho.max_body_bytes = size_t(f.max_body_mb) << 20;
  ho.threads = f.http_threads;
  ho.error_body = &ApiServer::TransportErrorBody;
  HttpServer http(ho);
  api.Register(http);
  FLASHKV_RETURN_IF_ERROR(http.Bind());

  const std::string host = f.host == "localhost" ? "127.0.0.1" : f.host;
  spdlog::info("model {}: ctx {}, {} live sessions, prefill chunk {}, api key {}", model_path,
               f.ctx, f.live_sessions, f.prefill_chunk, f.api_key.empty() ? "off" : "on");
  std::printf("flashkv serve: listening on http://%s:%d\n", host.c_str(), http.port());
  std::fflush(stdout);

  Status served;
  {
    SignalWatcher watcher(http);
    served = http.Serve();
  }
  scheduler.Stop(/*drain=*/true);
  spdlog::info("flashkv serve: stopped");
  return served;
}

void RegisterServe(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "OpenAI/Anthropic-compatible server with KV reuse");
  auto f = std::make_shared<ServeFlags>();
  cmd->add_option("--model,-m", f->model,
                  "GGUF model (default ./ds4flash.gguf if present, else models/flashkv-tiny.gguf)");
  cmd->add_option("--ctx,-c", f->ctx, "context tokens per session")->capture_default_str();
  cmd->add_option("--tokens,-n", f->tokens, "output tokens when a request gives no limit")
      ->capture_default_str();
  cmd->add_option("--threads,-t", f->threads, "CPU threads for the model (default: all cores)");
  cmd->add_option("--host", f->host, "address to bind (IPv4; 0.0.0.0 exposes the server)")
      ->capture_default_str();
  cmd->add_option("--port", f->port, "TCP port (0: any free port, printed at start)")
      ->capture_default_str();
  cmd->add_flag("--cors", f->cors, "send Access-Control-Allow-* headers");
  cmd->add_option("--api-key", f->api_key,
                  "require this key as 'Authorization: Bearer KEY' or 'x-api-key: KEY' "
                  "(default: off; also read from FLASHKV_API_KEY)")
      ->envname("FLASHKV_API_KEY");
  cmd->add_option("--max-body-mb", f->max_body_mb, "largest request body accepted, MiB")
      ->capture_default_str();
  cmd->add_option("--http-threads", f->http_threads, "connection threads")->capture_default_str();
  cmd->add_option("--kv-live-sessions", f->live_sessions,
                  "sessions kept in memory for instant reuse (LRU)")
      ->capture_default_str();
  cmd->add_option("--prefill-chunk", f->prefill_chunk,
                  "tokens per prefill step; a disconnect cancels within one step")
      ->capture_default_str();
  cmd->add_option("--sse-keepalive-ms", f->keepalive_ms,
                  "SSE comment after this long without bytes (also during prefill), 50..2000")
      ->capture_default_str();
  cmd->add_flag("--disable-exact-dsml-tool-replay", f->disable_exact_dsml,
                "render clients' tool calls canonically instead of the sampled bytes");
  cmd->add_option("--tool-memory-max-ids", f->tool_memory_max_ids,
                  "tool-call ids remembered for exact replay")
      ->capture_default_str();
  cmd->add_option("--kv-disk-dir", f->kv_disk_dir,
                  "disk KV cache directory: snapshots survive evictions and restarts");
  cmd->add_option("--kv-disk-space-mb", f->kv_disk_space_mb, "disk KV cache budget (MiB)")
      ->capture_default_str();
  cmd->add_option("--kv-quarantine", f->kv_quarantine,
                  "on: move damaged cache files to quarantine/; off: delete them")
      ->capture_default_str();
  cmd->add_option("--kv-cache-min-tokens", f->kv_policy.min_tokens,
                  "never save or load snapshots shorter than this")
      ->capture_default_str();
  cmd->add_option("--kv-cache-cold-max-tokens", f->kv_policy.cold_max_tokens,
                  "cold saves only for first prompts up to this long (0: off)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-continued-interval-tokens", f->kv_policy.continued_interval_tokens,
                  "spacing of continued snapshots (0: off)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-boundary-trim-tokens", f->kv_policy.boundary_trim_tokens,
                  "tail tokens trimmed before a cold boundary")
      ->capture_default_str();
  cmd->add_option("--kv-cache-boundary-align-tokens", f->kv_policy.boundary_align_tokens,
                  "align cold and continued boundaries to this (0: off)")
      ->capture_default_str();
  cmd->callback([f] {
    Status s = RunServe(*f);
    if (!s.ok()) Fail("serve", s);
  });
}

}  // namespace

FLASHKV_REGISTER_COMMAND(10, RegisterServe);

}  // namespace flashkv::cli
