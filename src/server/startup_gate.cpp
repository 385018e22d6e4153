#include "server/startup_gate.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "server/api_errors.h"
#include "server/json_util.h"

namespace flashkv {

StartupGate::StartupGate() : start_(std::chrono::steady_clock::now()) {}

void StartupGate::Register(HttpServer& http) {
  for (const ApiRoute& route : ApiServer::Routes()) {
    auto handler = [this, &route](const HttpRequest& req) {
      ApiServer* api = api_.load(std::memory_order_acquire);
      if (api != nullptr) return api->Handle(route, req);
      return LoadingResponse(route.path);
    };
    if (route.post) {
      http.Post(route.path, handler);
    } else {
      http.Get(route.path, handler);
    }
  }
}

void StartupGate::SetProgress(const std::string& phase, double fraction) {
  std::lock_guard<std::mutex> lock(mu_);
  phase_ = phase;
  if (std::isfinite(fraction)) fraction_ = std::max(fraction_, std::clamp(fraction, 0.0, 1.0));
}

void StartupGate::Open(ApiServer& api) {
  api_.store(&api, std::memory_order_release);
}

HttpResponse StartupGate::LoadingResponse(const std::string& path) const {
  std::string phase;
  double fraction = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    phase = phase_;
    fraction = fraction_;
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  HttpResponse r;
  r.status = 503;
  r.headers.emplace_back("Retry-After", "1");
  if (path == "/health") {
    // Rounded so the body stays short and stable between polls.
    r.body = Json{{"status", "loading"},
                  {"phase", phase},
                  {"progress", std::round(fraction * 1000) / 1000},
                  {"elapsed_s", std::round(elapsed * 10) / 10}}
                 .dump();
    return r;
  }
  r.body = ErrorJson(DialectForPath(path), 503,
                     fmt::format("the model is still loading ({}, {:.0f}%); retry shortly, or "
                                 "poll GET /health until it answers 200",
                                 phase, fraction * 100))
               .dump();
  return r;
}

}  // namespace flashkv
