// `flashkv serve`: the OpenAI/Anthropic-compatible HTTP server. Flags follow ds4-server
// where they overlap (--host, --port, --ctx, --tokens, --cors, ...). Loads the model and
// tokenizer, starts the engine worker and the HTTP listener, and shuts down cleanly on
// SIGINT/SIGTERM: the listener closes, queued and running requests finish, then the
// process exits (a second signal exits at once). The port is bound before the model loads:
// a taken port fails at once, and /health answers 503 "loading" with progress until the
// model is ready (server/startup_gate.h).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "cli/auto_or_number.h"
#include "cli/cache_tiers.h"
#include "cli/commands.h"
#include "cli/kv_cache_flags.h"
#include "cli/kv_remote_flags.h"
#include "cli/load_progress.h"
#include "cli/model_flags.h"
#include "cli/prefill_chunk_flag.h"
#include "engine/engine.h"
#include "engine/memory_plan.h"
#include "engine/scheduler.h"
#include "kv/cache_policy.h"
#include "model/expert_cache.h"
#include "runtime/runtime.h"
#include "server/api_server.h"
#include "server/http_server.h"
#include "server/request_screen.h"
#include "server/startup_gate.h"
#include "state/kv_state.h"
#include "tokenizer/tokenizer.h"
#include "util/host_memory.h"

namespace flashkv::cli {
namespace {

struct ServeFlags {
  ModelFlags model;  // --model, --threads, --backend, --numerics, --act-quant, --tokenizer
  int ctx = 32768;
  int64_t tokens = 393216;
  std::string host = "127.0.0.1";
  int port = 8000;
  bool cors = false;
  std::string api_key;
  int max_body_mb = 64;
  int max_request_cpu_ms = 10000;
  int http_threads = 64;
  std::string http_client_connections = "auto";  // auto | 0 (off) | N
  int header_timeout_s = 10;
  std::vector<std::string> allowed_hosts;
  std::string live_sessions = "auto";  // auto | N (engine/memory_plan.h)
  std::string ram_space_mb = "auto";   // auto | N MiB (0: no RAM tier)
  int prefill_chunk = 2048;
  std::string prefill_chunk_solo = "auto";  // cli/prefill_chunk_flag.h
  int max_batch = 16;
  int keepalive_ms = 1000;
  bool disable_exact_dsml = false;
  int tool_memory_max_ids = 100000;
  KvDiskFlags kv;        // disk KV cache (tier 3), ds4-server's flags
  KvRemoteFlags remote;  // the shared store (tier 4) after the disk
};

// Waits for SIGINT/SIGTERM on its own thread (they are blocked everywhere else). While the
// model is still loading there is nothing to finish or save, so a signal exits at once.
class SignalWatcher {
 public:
  SignalWatcher(HttpServer& http, const std::atomic<bool>& loaded) : http_(http), loaded_(loaded) {
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
      if (!loaded_.load()) {
        spdlog::info("signal {} while loading the model: exiting", sig);
        _exit(130);
      }
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
  const std::atomic<bool>& loaded_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

Status RunServe(const ServeFlags& f) {
  if (f.ctx < 16) return InvalidArgument("--ctx must be at least 16");
  if (f.tokens < 1) return InvalidArgument("--tokens must be positive");
  FLASHKV_ASSIGN_OR_RETURN(std::optional<uint64_t> live_flag,
                           AutoOrNumber("--kv-live-sessions", f.live_sessions, 1));
  FLASHKV_ASSIGN_OR_RETURN(std::optional<uint64_t> ram_flag,
                           AutoOrNumber("--kv-ram-space-mb", f.ram_space_mb, 0));
  if (live_flag && *live_flag > 4096) return InvalidArgument("--kv-live-sessions is at most 4096");
  if (f.prefill_chunk < 1) return InvalidArgument("--prefill-chunk must be positive");
  FLASHKV_ASSIGN_OR_RETURN(
      const int solo_chunk,
      ResolvePrefillChunkSolo(f.prefill_chunk_solo, f.prefill_chunk, ResolvedBackend(f.model)));
  if (f.max_batch < 1 || f.max_batch > 4096)
    return InvalidArgument("--max-batch must be 1..4096, got {}", f.max_batch);
  if (f.max_body_mb < 1) return InvalidArgument("--max-body-mb must be positive");
  if (f.max_request_cpu_ms < 0) {
    return InvalidArgument("--max-request-cpu-ms must be 0 (no limit) or positive");
  }
  if (f.keepalive_ms < 50 || f.keepalive_ms > 2000)
    return InvalidArgument("--sse-keepalive-ms must be 50..2000, got {}", f.keepalive_ms);
  if (f.port < 0 || f.port > 65535) return InvalidArgument("--port must be 0..65535");
  if (f.http_threads < 1) return InvalidArgument("--http-threads must be positive");
  FLASHKV_ASSIGN_OR_RETURN(std::optional<uint64_t> client_connections,
                           AutoOrNumber("--http-client-connections", f.http_client_connections, 0));
  if (client_connections && *client_connections > uint64_t(f.http_threads)) {
    return InvalidArgument("--http-client-connections must be at most --http-threads ({}), got {}",
                           f.http_threads, *client_connections);
  }
  if (f.header_timeout_s < 1 || f.header_timeout_s > 3600)
    return InvalidArgument("--http-header-timeout must be 1..3600 seconds");
  // Before the model loads, so the warning is the first thing an operator sees.
  if (f.api_key.empty() && !IsLoopbackHost(HostName(f.host))) {
    spdlog::warn(
        "--host {} without --api-key: anyone who can reach this address can use the model and "
        "read what its cache holds; pass --api-key KEY (or FLASHKV_API_KEY)",
        f.host);
  }

  // Blocked before any thread starts so every thread inherits the mask and only the
  // watcher receives them; a write to a closed socket must not kill the server.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // Bound first: a taken port is reported before a load that can take minutes, and the
  // routes answer (503 "loading", /health with progress) while the model loads.
  StartupGate gate;
  HttpServerOptions ho;
  ho.host = f.host;
  ho.port = f.port;
  ho.cors = f.cors;
  ho.api_key = f.api_key;
  ho.max_body_bytes = size_t(f.max_body_mb) << 20;
  ho.threads = f.http_threads;
  ho.max_client_connections = client_connections ? int(*client_connections) : -1;
  ho.header_timeout_ms = f.header_timeout_s * 1000;
  ho.allowed_hosts = f.allowed_hosts;
  ho.error_body = &ApiServer::TransportErrorBody;
  HttpServer http(ho);
  gate.Register(http);
  FLASHKV_RETURN_IF_ERROR(http.Bind());
  const std::string host = f.host == "localhost" ? "127.0.0.1" : f.host;
  // Not the "listening on" line, which clients wait for before sending requests.
  std::printf("flashkv serve: bound http://%s:%d; loading the model (GET /health shows progress)\n",
              host.c_str(), http.port());
  std::fflush(stdout);
  std::atomic<bool> loaded{false};
  SignalWatcher watcher(http, loaded);
  Status served;
  std::atomic<bool> serve_returned{false};
  std::thread serving([&] {
    served = http.Serve();
    serve_returned = true;
  });
  // Every return below stops the listener and waits for its threads, which finish the
  // requests in flight; the ApiServer is opened last, so none of them can reach it after.
  // Stop() before the thread is listening does nothing, hence the retries.
  struct StopServing {
    HttpServer& http;
    std::thread& thread;
    const std::atomic<bool>& returned;
    ~StopServing() {
      if (!thread.joinable()) return;
      while (!returned.load()) {
        http.Stop();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      thread.join();
    }
  } stop_serving{http, serving, serve_returned};

  LoadReporter progress(
      [&gate](const std::string& phase, double fraction) { gate.SetProgress(phase, fraction); });
  progress.Phase("reading the model file", 0.0);
  FLASHKV_ASSIGN_OR_RETURN(ModelSetup setup, OpenModel(f.model));
  const Tokenizer& tokenizer = setup.tokenizer;
  progress.Phase("loading weights", 0.02);
  // Where the routed experts must stay in host memory, the device keeps room for the live
  // sessions asked for (4 when auto: more wait in the RAM and disk tiers), and for the
  // activations of the longest step.
  const DeviceReserve reserve{f.ctx, live_flag ? int(*live_flag) : 4, solo_chunk};
  FLASHKV_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt,
                           OpenRuntime(f.model, setup, reserve, progress.Weights(0.02, 0.9)));
  progress.Phase("opening the KV cache tiers", 0.9);
  FLASHKV_ASSIGN_OR_RETURN(CachePolicy policy, CachePolicy::Create(f.kv.policy));

  // Tier 1: the live pool, sized from the device memory the weights left.
  const uint64_t session_bytes = KvState::AllocatedBytes(rt->model().StateShape(f.ctx));
  int live_sessions = 0;
  if (live_flag) {
    live_sessions = int(*live_flag);
    spdlog::info("kv live: {} sessions of {:.3f} GiB of KV each (--kv-live-sessions)",
                 live_sessions, double(session_bytes) / double(1 << 30));
  } else {
    LivePoolInputs in;
    in.device = rt->DeviceMemoryLeft();
    in.session_bytes = session_bytes;
    in.ctx = f.ctx;
    in.prefill_chunk = solo_chunk;
    FLASHKV_ASSIGN_OR_RETURN(LivePoolPlan plan, PlanLivePool(in));
    live_sessions = plan.sessions;
    spdlog::info("kv live: {}", plan.explanation);
  }

  // The snapshot tiers share one identity: the model's fingerprint and numerics.
  uint64_t ram_budget = 0;
  if (ram_flag) {
    ram_budget = *ram_flag << 20;
  } else {
    Expected<uint64_t> available = AvailableHostMemory();
    // Routed experts pinned from a disk file's page cache still count in MemAvailable, but
    // cannot be given back (util/host_memory.h): the RAM tier sizes itself after them.
    uint64_t pinned = 0;
    if (const ExpertCache* cache = rt->model().expert_cache();
        cache != nullptr && !cache->pageable_host() && setup.file &&
        !OnMemoryFilesystem(setup.path)) {
      pinned = cache->stats().host_bytes;
    }
    if (available.ok()) {
      const uint64_t left = *available > pinned ? *available - pinned : 0;
      ram_budget = DefaultRamBudgetBytes(left);
      spdlog::info("kv ram: {} MiB, a quarter of the {} MiB available{} (--kv-ram-space-mb)",
                   ram_budget >> 20, left >> 20,
                   pinned > 0 ? fmt::format(" after {} MiB of pinned routed experts", pinned >> 20)
                              : std::string());
    } else {
      spdlog::warn("kv ram: tier off, host memory unknown ({}); set --kv-ram-space-mb",
                   available.status().message());
    }
  }
  CacheTierFlags tier_flags;
  tier_flags.ram_budget_bytes = ram_budget;
  tier_flags.disk = f.kv;
  tier_flags.remote = f.remote;
  std::optional<SnapshotIdentity> identity;
  if (NeedsIdentity(tier_flags)) {
    progress.Phase("fingerprinting the model for the KV cache", 0.92);
    FLASHKV_ASSIGN_OR_RETURN(const Sha1Digest fingerprint, SetupFingerprint(setup));
    identity = CacheIdentity(fingerprint, setup.options);
  }
  // Tiers 2-4; tier 5, a cold prefill, needs nothing opened.
  FLASHKV_ASSIGN_OR_RETURN(CacheTiers tiers, OpenCacheTiers(tier_flags, identity, &rt->backend()));
  EngineMetrics metrics;
  if (tiers.disk != nullptr) metrics.SetDiskCache(tiers.disk.get());
  if (tiers.remote != nullptr) metrics.SetRemoteTier(tiers.remote.get());
  ToolReplayMap replay(size_t(f.tool_memory_max_ids));
  EngineOptions eo;
  eo.ctx_size = f.ctx;
  eo.live_sessions = live_sessions;
  eo.prefill_chunk = f.prefill_chunk;
  eo.prefill_chunk_solo = solo_chunk;
  eo.max_batch = f.max_batch;
  eo.ram = tiers.ram.get();
  eo.disk = tiers.disk.get();
  eo.remote = tiers.remote.get();
  eo.policy = policy;
  Engine engine(rt->model(), tokenizer, replay, metrics, eo);
  Scheduler scheduler(engine, metrics);
  scheduler.Start();

  ApiServerOptions ao;
  ao.ctx_size = f.ctx;
  ao.default_max_tokens = f.tokens;
  ao.exact_dsml_replay = !f.disable_exact_dsml;
  ao.keepalive_ms = f.keepalive_ms;
  ao.max_request_cpu_ms = f.max_request_cpu_ms;
  ApiServer api(scheduler, tokenizer, replay, metrics, ao);
  gate.Open(api);
  loaded = true;

  spdlog::info(
      "model {} on {}: ctx {}, {} live sessions, RAM tier {} MiB, prefill chunk {} ({} while "
      "nothing decodes), max batch {}, api key {}",
      setup.description, rt->backend().name(), f.ctx, live_sessions, ram_budget >> 20,
      f.prefill_chunk, solo_chunk, std::min(f.max_batch, live_sessions),
      f.api_key.empty() ? "off" : "on");
  std::printf("flashkv serve: listening on http://%s:%d\n", host.c_str(), http.port());
  std::fflush(stdout);

  // Returns once a signal stopped the listener and the requests in flight have finished.
  serving.join();
  scheduler.Stop(/*drain=*/true);
  spdlog::info("flashkv serve: stopped");
  return served;
}

void RegisterServe(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "OpenAI/Anthropic-compatible server with KV reuse");
  auto f = std::make_shared<ServeFlags>();
  AddModelFlags(cmd, &f->model);
  AddNumericsFlags(cmd, &f->model);
  AddTokenizerFlag(cmd, &f->model);
  cmd->add_option("--ctx,-c,--ctx-size", f->ctx, "context tokens per session")
      ->capture_default_str();
  cmd->add_option("--tokens,-n,--n-predict,--gen-tokens", f->tokens,
                  "output tokens when a request gives no limit")
      ->capture_default_str();
  cmd->add_option("--host", f->host, "address to bind (IPv4; 0.0.0.0 exposes the server)")
      ->capture_default_str();
  cmd->add_option("--port", f->port, "TCP port (0: any free port, printed at start)")
      ->capture_default_str();
  cmd->add_flag("--cors", f->cors, "send Access-Control-Allow-* headers");
  cmd->add_option("--api-key", f->api_key,
                  "require this key as 'Authorization: Bearer KEY' or 'x-api-key: KEY' "
                  "(default: off; also read from FLASHKV_API_KEY)")
      ->envname("FLASHKV_API_KEY");
  cmd->add_option("--max-body-mb", f->max_body_mb,
                  "largest request body accepted, MiB (after gzip/deflate/br decoding)")
      ->capture_default_str();
  cmd->add_option("--max-request-cpu-ms", f->max_request_cpu_ms,
                  "CPU time one request may spend on its body before it is queued (JSON parse, "
                  "checks, rendering, tokenization); past it the request gets 413 (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--http-threads", f->http_threads,
                  "connections open at once, one thread each; at the cap the one waiting longest "
                  "on its client is dropped for a newcomer")
      ->capture_default_str();
  cmd->add_option("--http-client-connections", f->http_client_connections,
                  "connections open at once per client address (auto: three quarters of "
                  "--http-threads, so one address cannot take every slot; 0: no per-address cap, "
                  "for clients behind one proxy)")
      ->capture_default_str();
  cmd->add_option("--http-header-timeout", f->header_timeout_s,
                  "seconds a request's line and headers may take from their first byte")
      ->capture_default_str();
  cmd->add_option("--allowed-hosts", f->allowed_hosts,
                  "without --api-key, Host names served besides loopback names and the addresses "
                  "listened on (comma-separated; * for any)")
      ->delimiter(',');
  cmd->add_option("--kv-live-sessions", f->live_sessions,
                  "sessions kept live on the backend for instant reuse (LRU); auto: as many as "
                  "the GPU memory left after the weights holds at --ctx (4 on the CPU)")
      ->capture_default_str();
  cmd->add_option("--kv-ram-space-mb", f->ram_space_mb,
                  "host RAM for snapshots of evicted sessions, cold anchors and disk hits "
                  "(page-locked, restored at PCIe speed); auto: a quarter of the available "
                  "memory, at most 64 GiB; 0: off")
      ->capture_default_str();
  cmd->add_option("--prefill-chunk,--chunk", f->prefill_chunk,
                  "prompt tokens per step (all requests together, round-robin); a disconnect "
                  "cancels within one step")
      ->capture_default_str();
  AddPrefillChunkSoloFlag(cmd, &f->prefill_chunk_solo);
  cmd->add_option("--max-batch", f->max_batch,
                  "requests decoded together in one step (at most the live sessions); 1: one "
                  "request at a time")
      ->capture_default_str();
  cmd->add_option("--sse-keepalive-ms", f->keepalive_ms,
                  "SSE comment after this long without bytes (also during prefill), 50..2000")
      ->capture_default_str();
  cmd->add_flag("--disable-exact-dsml-tool-replay", f->disable_exact_dsml,
                "render clients' tool calls canonically instead of the sampled bytes");
  cmd->add_option("--tool-memory-max-ids", f->tool_memory_max_ids,
                  "tool-call ids remembered for exact replay")
      ->capture_default_str();
  AddKvDiskFlags(cmd, &f->kv, "disk KV cache directory: snapshots survive evictions and restarts");
  AddKvRemoteFlags(cmd, &f->remote);
  cmd->callback([f] {
    Status s = RunServe(*f);
    if (!s.ok()) Fail("serve", s);
  });
}

}  // namespace

FLASHKV_REGISTER_COMMAND(10, RegisterServe);

}  // namespace flashkv::cli
