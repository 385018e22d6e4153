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
  bool disable_exact_dsml = false;
  int tool_memory_max_ids = 100000;
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

Status RunServe(const ServeFlags& f) {
  if (f.ctx < 16) return InvalidArgument("--ctx must be at least 16");
  if (f.tokens < 1) return InvalidArgument("--tokens must be positive");
  if (f.live_sessions < 1) return InvalidArgument("--kv-live-sessions must be at least 1");
  if (f.prefill_chunk < 1) return InvalidArgument("--prefill-chunk must be positive");
  if (f.max_body_mb < 1) return InvalidArgument("--max-body-mb must be positive");
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

  EngineMetrics metrics;
  ToolReplayMap replay(size_t(f.tool_memory_max_ids));
  EngineOptions eo;
  eo.ctx_size = f.ctx;
  eo.live_sessions = f.live_sessions;
  eo.prefill_chunk = f.prefill_chunk;
  Engine engine(rt->model(), *tokenizer, replay, metrics, eo);
  Scheduler scheduler(engine, metrics);
  scheduler.Start();

  ApiServerOptions ao;
  ao.ctx_size = f.ctx;
  ao.default_max_tokens = f.tokens;
  ao.exact_dsml_replay = !f.disable_exact_dsml;
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
  cmd->add_flag("--disable-exact-dsml-tool-replay", f->disable_exact_dsml,
                "render clients' tool calls canonically instead of the sampled bytes");
  cmd->add_option("--tool-memory-max-ids", f->tool_memory_max_ids,
                  "tool-call ids remembered for exact replay")
      ->capture_default_str();
  cmd->callback([f] {
    Status s = RunServe(*f);
    if (!s.ok()) Fail("serve", s);
  });
}

}  // namespace

FLASHKV_REGISTER_COMMAND(10, RegisterServe);

}  // namespace flashkv::cli
