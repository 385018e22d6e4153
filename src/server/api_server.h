// ApiServer: the endpoints (docs/SERVER.md §5.3) and the request pipeline every generation endpoint
// shares — parse the dialect, resolve exact-DSML replay, render, tokenize, check the
// context, queue for the engine worker, then answer with one body or an SSE stream
// (keepalive comments on a timer while nothing else is sent; a vanished client cancels the
// work). Must not: touch the model or KvStates (only the worker does, via the Scheduler),
// or reach the filesystem.
//
// Threading: handlers run concurrently on HTTP threads; everything they share
// (Scheduler, Tokenizer, ToolReplayMap, EngineMetrics, HttpCounters) is thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/engine_metrics.h"
#include "engine/scheduler.h"
#include "engine/tool_replay_map.h"
#include "server/api_request.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "tokenizer/tokenizer.h"

namespace flashkv {

struct ApiServerOptions {
  std::string model_id = "deepseek-v4-flash";  // the id /v1/models lists
  int ctx_size = 32768;                        // prompts must have fewer tokens
  int64_t default_max_tokens = 393216;  // when the client gives no limit (clamped to the context)
  bool exact_dsml_replay = true;        // render sampled DSML for known tool-call ids
  int keepalive_ms = 1000;              // SSE comment after this long without a write (<= 2 s)
  // CPU time one request may spend on its body before it is queued (JSON parse, checks,
  // rendering, tokenization; util/work_budget.h): past it the request is a 413. 0: none.
  int max_request_cpu_ms = 10000;
};

class ApiServer;

// One endpoint: its method, path (HttpServer::Get/Post syntax) and the member that answers.
struct ApiRoute {
  bool post;
  const char* path;
  HttpResponse (*call)(ApiServer& api, const HttpRequest& req);
};

class ApiServer {
 public:
  // Everything passed in must outlive the server.
  ApiServer(Scheduler& scheduler, const Tokenizer& tokenizer, ToolReplayMap& replay,
            EngineMetrics& metrics, ApiServerOptions options);

  void Register(HttpServer& http);

  // Every endpoint, in registration order (also what StartupGate registers before the
  // model has loaded).
  static const std::vector<ApiRoute>& Routes();
  // Answers `req` on `route` (one of Routes()), counting its status for /metrics.
  HttpResponse Handle(const ApiRoute& route, const HttpRequest& req);

  // The body for errors the transport produces (401, 404, 413), in the path's dialect.
  static std::string TransportErrorBody(const std::string& path, int status,
                                        const std::string& message);

 private:
  struct Prepared;
  HttpResponse Generate(const HttpRequest& http, Dialect dialect);
  HttpResponse CountTokens(const HttpRequest& http);
  HttpResponse Models(const HttpRequest& http);
  HttpResponse ModelById(const HttpRequest& http);
  HttpResponse Health(const HttpRequest& http);
  HttpResponse Metrics(const HttpRequest& http);
  // Parse, replay, render and tokenize. False: *error is the response to send.
  bool Prepare(const HttpRequest& http, Dialect dialect, Prepared* out, HttpResponse* error);
  HttpResponse Error(Dialect dialect, const Status& status) const;
  // `at_least`: n_prompt is a lower bound (the prompt was refused before tokenizing).
  HttpResponse ContextError(Dialect dialect, int64_t n_prompt, bool at_least = false) const;
  // A request whose budget ran out: 413, or 503 when the server is stopping.
  HttpResponse BudgetError(Dialect dialect, const WorkBudget& budget, size_t body_bytes) const;
  Json ModelJson() const;

  Scheduler& scheduler_;
  const Tokenizer& tokenizer_;
  ToolReplayMap& replay_;
  EngineMetrics& metrics_;
  const ApiServerOptions options_;
  HttpCounters http_counters_;
};

}  // namespace flashkv
