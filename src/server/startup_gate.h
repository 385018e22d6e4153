// StartupGate: the API's routes from the moment the port is bound, before the model has
// loaded. Until Open(), GET /health answers 503 {"status":"loading","phase",...,"progress"}
// and every other route a 503 in its API's error shape with Retry-After; after Open() each
// route goes to the ApiServer. Exists so a taken port is reported before a long load and a
// load balancer or a user can watch the load. Must not: answer an API request itself.
//
// Threading: SetProgress and Open run on the loading thread while handlers run on the HTTP
// threads; the ApiServer passed to Open must outlive every handler (stop the HttpServer
// before destroying it).
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

#include "server/api_server.h"
#include "server/http_server.h"

namespace flashkv {

class StartupGate {
 public:
  StartupGate();

  // Registers every ApiServer::Routes() entry on `http`; call before HttpServer::Serve.
  void Register(HttpServer& http);
  // What the load is doing and how far it is, 0..1 (clamped; never goes backwards).
  void SetProgress(const std::string& phase, double fraction);
  // From now on requests go to `api`.
  void Open(ApiServer& api);
  bool open() const { return api_.load(std::memory_order_acquire) != nullptr; }

  // The 503 a route answers while loading (public for tests).
  HttpResponse LoadingResponse(const std::string& path) const;

 private:
  std::atomic<ApiServer*> api_{nullptr};
  mutable std::mutex mu_;
  std::string phase_ = "starting";
  double fraction_ = 0;
  const std::chrono::steady_clock::time_point start_;
};

}  // namespace flashkv
