#include "server/api_server.h"

#include <chrono>
#include <ctime>
#include <random>

#include <spdlog/spdlog.h>

#include "chat/prompt_renderer.h"
#include "engine/request_handle.h"
#include "server/anthropic_messages.h"
#include "server/api_errors.h"
#include "server/openai_chat.h"
#include "server/openai_responses.h"
#include "server/request_reader.h"
#include "server/request_schema.h"
#include "server/sse.h"
#include "server/usage.h"

namespace flashkv {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How often a waiting HTTP thread wakes to check its client and send keepalives.
constexpr milliseconds kPollInterval{100};

// Status used for a request whose client left; nobody receives it, it only shows in
// /metrics (nginx's "client closed request").
constexpr int kClientGone = 499;

HttpResponse JsonResponse(int status, const Json& body) {
  HttpResponse r;
  r.status = status;
  r.body = DumpJson(body);
  return r;
}

uint64_t RandomSeed() {
  thread_local std::random_device rd;
  return (uint64_t(rd()) << 32) | rd();
}

const char* IdPrefix(Dialect d) {
  switch (d) {
    case Dialect::kChatCompletions:
      return "chatcmpl-";
    case Dialect::kCompletions:
      return "cmpl-";
    case Dialect::kResponses:
      return "resp_";
    case Dialect::kAnthropic:
      return "msg_";
  }
  return "";
}

std::unique_ptr<StreamEncoder> NewStream(Dialect d, const ResponseContext& ctx) {
  switch (d) {
    case Dialect::kChatCompletions:
      return NewChatCompletionsStream(ctx);
    case Dialect::kCompletions:
      return NewCompletionsStream(ctx);
    case Dialect::kResponses:
      return NewResponsesStream(ctx);
    case Dialect::kAnthropic:
      return NewAnthropicStream(ctx);
  }
  return nullptr;
}

Json ResponseBody(Dialect d, const ResponseContext& ctx, const GenerationResult& r) {
  switch (d) {
    case Dialect::kChatCompletions:
      return ChatCompletionResponse(ctx, r);
    case Dialect::kCompletions:
      return CompletionResponse(ctx, r);
    case Dialect::kResponses:
      return ResponsesResponse(ctx, r);
    case Dialect::kAnthropic:
      return AnthropicResponse(ctx, r);
  }
  return Json::object();
}

}  // namespace

struct ApiServer::Prepared {
  ApiRequest api;
  GenerationRequest gen;
  int replayed = 0;  // assistant turns rendered with their exact sampled DSML
};

ApiServer::ApiServer(Scheduler& scheduler, const Tokenizer& tokenizer, ToolReplayMap& replay,
                     EngineMetrics& metrics, ApiServerOptions options)
    : scheduler_(scheduler),
      tokenizer_(tokenizer),
      replay_(replay),
      metrics_(metrics),
      options_(std::move(options)) {}

std::string ApiServer::TransportErrorBody(const std::string& path, int status,
                                          const std::string& message) {
  return DumpJson(ErrorJson(DialectForPath(path), status, message));
}

HttpResponse ApiServer::Error(Dialect dialect, const Status& status) const {
  const int code = HttpStatusFor(status);
  Json body = ErrorJson(dialect, code, status.message());
  if (status.code() == StatusCode::kResourceExhausted) {
    Json& err = body["error"];
    if (dialect != Dialect::kAnthropic) err["code"] = "context_length_exceeded";
    err["n_ctx"] = options_.ctx_size;
  }
  return JsonResponse(code, body);
}

HttpResponse ApiServer::ContextError(Dialect dialect, int64_t n_prompt, bool at_least) const {
  const std::string message =
      fmt::format("Prompt has {}{} tokens, but the configured context size is {} tokens",
                  at_least ? "at least " : "", n_prompt, options_.ctx_size);
  Json body = ErrorJson(dialect, 400, message);
  Json& err = body["error"];
  if (dialect != Dialect::kAnthropic) {
    err["param"] = dialect == Dialect::kResponses     ? "input"
                   : dialect == Dialect::kCompletions ? "prompt"
                                                      : "messages";
    err["code"] = "context_length_exceeded";
  }
  err["n_prompt_tokens"] = n_prompt;
  err["n_ctx"] = options_.ctx_size;
  return JsonResponse(400, body);
}

HttpResponse ApiServer::BudgetError(Dialect dialect, const WorkBudget& budget,
                                    size_t body_bytes) const {
  if (budget.status().code() == StatusCode::kCancelled) {
    return JsonResponse(503, ErrorJson(dialect, 503, "server shutting down"));
  }
  spdlog::warn("request refused: its {} byte body took more than {} ms of CPU time to read",
               body_bytes, budget.cpu_limit().count());
  return JsonResponse(
      413, ErrorJson(dialect, 413,
                     fmt::format("the request took more than {} ms of CPU time to read (parse, "
                                 "render and tokenize); send a smaller one",
                                 budget.cpu_limit().count())));
}

bool ApiServer::Prepare(const HttpRequest& http, Dialect dialect, Prepared* p,
                        HttpResponse* error) {
  // Everything before the request is queued runs on this HTTP thread at a cost the client
  // chooses: it is held to a CPU budget, and ends at once when the server stops.
  WorkBudget budget(std::chrono::milliseconds(options_.max_request_cpu_ms), http.server_stopping);
  Expected<ApiRequest> api = ReadApiRequest(dialect, http.body, &budget);
  if (!api.ok()) {
    *error =
        budget.ok() ? Error(dialect, api.status()) : BudgetError(dialect, budget, http.body.size());
    return false;
  }
  p->api = std::move(*api);
  ApiRequest& a = p->api;
  if (options_.exact_dsml_replay) p->replayed = replay_.ApplyTo(&a.messages);

  const ThinkingMode thinking = EffectiveThinkingMode(a.thinking, size_t(options_.ctx_size));
  GenerationRequest& g = p->gen;
  g.prompt_options.thinking = thinking;
  g.prompt_options.tools = a.tools;
  if (dialect == Dialect::kCompletions) {
    g.prompt_text = RenderCompletionPrompt(a.prompt, thinking);
    g.output = OutputMode::kRaw;
  } else {
    g.prompt_text = RenderPrompt(a.messages, g.prompt_options);
    g.output = OutputMode::kChat;
    g.history = a.messages;
  }
  if (!budget.Check()) {
    *error = BudgetError(dialect, budget, http.body.size());
    return false;
  }
  // Every token stands for at most max_token_bytes() bytes: a text that long cannot fit,
  // and is refused before the tokenizer spends seconds and gigabytes on it (a 60 MB word:
  // 24 s of merges and 2.1 GB).
  const int64_t at_least = int64_t((g.prompt_text.size() + tokenizer_.max_token_bytes() - 1) /
                                   tokenizer_.max_token_bytes());
  if (at_least >= options_.ctx_size) {
    *error = ContextError(dialect, at_least, /*at_least=*/true);
    return false;
  }
  Expected<std::vector<int32_t>> ids = tokenizer_.EncodeChatPrompt(g.prompt_text, budget);
  if (!ids.ok()) {
    *error = BudgetError(dialect, budget, http.body.size());
    return false;
  }
  g.prompt_tokens = std::move(*ids);
  if (int64_t(g.prompt_tokens.size()) >= options_.ctx_size) {
    *error = ContextError(dialect, int64_t(g.prompt_tokens.size()));
    return false;
  }
  g.thinking = thinking != ThinkingMode::kNone;
  g.tools_active = !a.tools.empty();
  g.tool_id_prefix = dialect == Dialect::kAnthropic ? "toolu_" : "call_";
  g.max_tokens =
      int(std::min<int64_t>(a.max_tokens.value_or(options_.default_max_tokens), INT32_MAX));
  g.stop = a.stop;
  g.replays_reasoning = ReplaysReasoning(a);
  g.sampling = a.sampling;
  g.logprobs = a.logprobs;
  g.constraint = a.constraint;
  g.constraint_prefix = a.constraint_prefix;
  if (!a.seeded) g.sampling.seed = RandomSeed();
  return true;
}

HttpResponse ApiServer::Generate(const HttpRequest& http, Dialect dialect) {
  Prepared p;
  HttpResponse error;
  if (!Prepare(http, dialect, &p, &error)) return error;

  ResponseContext ctx;
  ctx.id = NewRandomId(IdPrefix(dialect));
  ctx.model = p.api.model.empty() ? options_.model_id : p.api.model;
  ctx.created = int64_t(std::time(nullptr));
  ctx.include_usage = p.api.include_usage;
  ctx.reasoning_summary = p.api.reasoning_summary;
  ctx.tool_names = p.api.tool_names;
  ctx.logprobs = p.api.logprobs >= 0;

  auto handle = std::make_shared<RequestHandle>(std::move(p.gen));
  if (!scheduler_.Submit(handle)) {
    return JsonResponse(503, ErrorJson(dialect, 503, "server shutting down"));
  }

  // Until the worker starts the request nothing is sent (the cache header needs its
  // resume decision), but a client that leaves the queue is noticed.
  std::optional<CacheInfo> started;
  while (true) {
    std::optional<GenerationEvent> ev = handle->Next(kPollInterval);
    if (!ev) {
      if (!http.client_connected()) {
        handle->Cancel();
        HttpResponse gone;
        gone.status = kClientGone;
        return gone;
      }
      continue;
    }
    if (ev->kind == GenerationEvent::Kind::kError) {
      if (ev->error.code() == StatusCode::kCancelled) {
        HttpResponse gone;
        gone.status = kClientGone;
        return gone;
      }
      return Error(dialect, ev->error);
    }
    if (ev->kind == GenerationEvent::Kind::kStarted) {
      started = ev->cache;
      break;
    }
  }

  if (!p.api.stream) {
    // Events keep coming while the model works, so the client is probed on a clock, not
    // only when the queue is quiet.
    Clock::time_point last_probe = Clock::now();
    while (true) {
      std::optional<GenerationEvent> ev = handle->Next(kPollInterval);
      if (Clock::now() - last_probe >= kPollInterval) {
        last_probe = Clock::now();
        if (!http.client_connected()) handle->Cancel();  // the worker answers with kDone soon
      }
      if (!ev) continue;
      if (ev->kind == GenerationEvent::Kind::kError) return Error(dialect, ev->error);
      if (ev->kind != GenerationEvent::Kind::kDone) continue;
      const GenerationResult& r = *ev->result;
      if (r.finish == FinishReason::kCancelled) {
        HttpResponse gone;
        gone.status = kClientGone;
        return gone;
      }
      HttpResponse resp = JsonResponse(200, ResponseBody(dialect, ctx, r));
      resp.headers.emplace_back(kCacheHeader, CacheHeaderValue(r.cache));
      return resp;
    }
  }

  HttpResponse resp;
  resp.content_type = "text/event-stream";
  resp.headers.emplace_back(kCacheHeader, CacheHeaderValue(*started));
  std::shared_ptr<StreamEncoder> encoder = NewStream(dialect, ctx);
  const CacheInfo cache = *started;
  const milliseconds keepalive{options_.keepalive_ms};
  resp.stream = [handle, encoder, cache, keepalive](StreamWriter& w) {
    Clock::time_point last_write = Clock::now();
    auto send = [&](const std::string& data) {
      if (data.empty()) return true;
      last_write = Clock::now();
      if (w.Write(data)) return true;
      handle->Cancel();
      return false;
    };
    if (!send(encoder->Start(cache))) return;
    bool prefilling = true;
    int64_t prefilled = 0;  // prompt ids evaluated so far (the engine's kPrefill events)
    const Clock::time_point stream_t0 = Clock::now();
    Clock::time_point last_probe = Clock::now();
    while (true) {
      std::optional<GenerationEvent> ev = handle->Next(kPollInterval);
      if (Clock::now() - last_probe >= kPollInterval) {
        last_probe = Clock::now();
        if (!w.ClientConnected()) {
          handle->Cancel();
          return;
        }
      }
      if (!ev || ev->kind == GenerationEvent::Kind::kPrefill) {
        if (ev) prefilled = ev->done;
        // A timer, not prefill progress, drives keepalives: one chunk can take longer
        // than a client's idle timeout.
        if (Clock::now() - last_write >= keepalive) {
          const std::string comment =
              prefilling
                  ? SsePrefillProgress(
                        cache.prompt_tokens, cache.cached_tokens, cache.cached_tokens + prefilled,
                        std::chrono::duration_cast<milliseconds>(Clock::now() - stream_t0).count())
                  : SseComment("keepalive");
          if (!send(comment)) return;
        }
        continue;
      }
      switch (ev->kind) {
        case GenerationEvent::Kind::kChat:
        case GenerationEvent::Kind::kText:
          prefilling = false;
          if (!send(encoder->Delta(*ev))) return;
          break;
        case GenerationEvent::Kind::kDone:
          if (ev->result->finish != FinishReason::kCancelled) send(encoder->Finish(*ev->result));
          return;
        case GenerationEvent::Kind::kError:
          send(encoder->Error(ev->error.message()));
          return;
        default:
          break;
      }
    }
  };
  return resp;
}

HttpResponse ApiServer::CountTokens(const HttpRequest& http) {
  WorkBudget budget(std::chrono::milliseconds(options_.max_request_cpu_ms), http.server_stopping);
  Expected<Json> body = ParseJsonObject(http.body, &budget);
  if (!body.ok()) {
    return budget.ok() ? Error(Dialect::kAnthropic, body.status())
                       : BudgetError(Dialect::kAnthropic, budget, http.body.size());
  }
  Json b = *body;
  if (!b.contains("max_tokens")) b["max_tokens"] = 1;  // not required for counting
  Expected<ApiRequest> api = ParseAnthropicRequest(b);
  if (!api.ok()) return Error(Dialect::kAnthropic, api.status());
  if (Status s = ValidateAnthropicSchema(b); !s.ok()) return Error(Dialect::kAnthropic, s);
  if (options_.exact_dsml_replay) replay_.ApplyTo(&api->messages);
  PromptOptions po;
  po.thinking = EffectiveThinkingMode(api->thinking, size_t(options_.ctx_size));
  po.tools = api->tools;
  Expected<std::vector<int32_t>> ids =
      tokenizer_.EncodeChatPrompt(RenderPrompt(api->messages, po), budget);
  if (!ids.ok()) return BudgetError(Dialect::kAnthropic, budget, http.body.size());
  return JsonResponse(200, Json{{"input_tokens", ids->size()}});
}

Json ApiServer::ModelJson() const {
  const int64_t ctx = options_.ctx_size;
  return Json{{"id", options_.model_id},
              {"object", "model"},
              {"created", 1767225600},
              {"owned_by", "flashkv"},
              {"name", "DeepSeek V4 Flash"},
              {"context_length", ctx},
              {"top_provider",
               {{"context_length", ctx},
                {"max_completion_tokens", std::min<int64_t>(options_.default_max_tokens, ctx)},
                {"is_moderated", false}}},
              {"supported_parameters",
               {"tools", "tool_choice", "max_tokens", "temperature", "top_p", "top_k", "min_p",
                "stop", "seed", "stream", "reasoning_effort", "logprobs", "top_logprobs",
                "response_format", "structured_outputs"}}};
}

HttpResponse ApiServer::Models(const HttpRequest&) {
  return JsonResponse(200, Json{{"object", "list"}, {"data", Json::array({ModelJson()})}});
}

HttpResponse ApiServer::ModelById(const HttpRequest& http) {
  if (http.path_param != options_.model_id) {
    Json body = ErrorJson(Dialect::kChatCompletions, 404,
                          fmt::format("The model '{}' does not exist", http.path_param));
    body["error"]["code"] = "model_not_found";
    return JsonResponse(404, body);
  }
  return JsonResponse(200, ModelJson());
}

HttpResponse ApiServer::Health(const HttpRequest&) {
  const EngineStats s = metrics_.Snapshot();
  return JsonResponse(200, Json{{"status", "ok"},
                                {"model", options_.model_id},
                                {"ctx", options_.ctx_size},
                                {"queue_depth", s.queue_depth},
                                {"active_requests", s.active_requests},
                                {"live_sessions", s.live_sessions}});
}

HttpResponse ApiServer::Metrics(const HttpRequest&) {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = PrometheusText(metrics_.Snapshot(), http_counters_.Snapshot());
  return r;
}

const std::vector<ApiRoute>& ApiServer::Routes() {
  static const std::vector<ApiRoute> routes = {
      {false, "/v1/models", [](ApiServer& a, const HttpRequest& r) { return a.Models(r); }},
      {false, "/v1/models/{param}",
       [](ApiServer& a, const HttpRequest& r) { return a.ModelById(r); }},
      {false, "/health", [](ApiServer& a, const HttpRequest& r) { return a.Health(r); }},
      {false, "/metrics", [](ApiServer& a, const HttpRequest& r) { return a.Metrics(r); }},
      {true, "/v1/chat/completions",
       [](ApiServer& a, const HttpRequest& r) { return a.Generate(r, Dialect::kChatCompletions); }},
      {true, "/v1/completions",
       [](ApiServer& a, const HttpRequest& r) { return a.Generate(r, Dialect::kCompletions); }},
      {true, "/v1/responses",
       [](ApiServer& a, const HttpRequest& r) { return a.Generate(r, Dialect::kResponses); }},
      {true, "/v1/messages",
       [](ApiServer& a, const HttpRequest& r) { return a.Generate(r, Dialect::kAnthropic); }},
      {true, "/v1/messages/count_tokens",
       [](ApiServer& a, const HttpRequest& r) { return a.CountTokens(r); }},
  };
  return routes;
}

HttpResponse ApiServer::Handle(const ApiRoute& route, const HttpRequest& req) {
  HttpResponse r = route.call(*this, req);
  // Metrics label by route, not by the raw path, so ids cannot grow the label set.
  http_counters_.Count(route.path, r.status);
  return r;
}

void ApiServer::Register(HttpServer& http) {
  for (const ApiRoute& route : Routes()) {
    auto handler = [this, &route](const HttpRequest& req) { return Handle(route, req); };
    if (route.post) {
      http.Post(route.path, handler);
    } else {
      http.Get(route.path, handler);
    }
  }
}

}  // namespace flashkv
