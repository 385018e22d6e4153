// HttpServer: the HTTP transport behind a pimpl, so no other file sees cpp-httplib.
// Routes map a request to an HttpResponse — a whole body, or a stream function that
// writes chunks (SSE) until it is done or the client is gone. Also owns the transport
// rules every endpoint shares: the request-body limit (on the decoded body, checked while
// it streams in), the connection cap and read deadlines (http_connection.h), the optional
// API key, the browser rules without one (JSON bodies only, Host a loopback name or an
// address the server listens on), CORS, and telling a handler whether its client is still
// connected. A request is refused before its body is read whenever its headers already
// decide it (an oversized Content-Length, an unknown path, a wrong method or key).
// Must not: know the APIs' JSON (the error bodies it writes come from a function the API
// layer supplies) or reach the filesystem (no static file serving; paths are matched,
// never opened).
//
// Threading: handlers run on the server's connection threads, many at once; they must be
// thread-safe and must not throw (a throw becomes a 500).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/status.h"

namespace flashkv {

struct HttpRequest {
  std::string method;
  std::string path;  // without the query string
  std::string body;
  std::multimap<std::string, std::string> headers;  // names lower-cased
  // Captured path segment for routes registered with a trailing "{param}".
  std::string path_param;
  // False once the client has closed its connection (polls the socket; cheap).
  std::function<bool()> client_connected;
  // True once the server is stopping (Stop(): SIGTERM/SIGINT): a handler doing long work
  // on the request (parsing a huge body) ends it instead of holding the shutdown.
  const std::atomic<bool>* server_stopping = nullptr;

  // The first value of a header (name in any case), or "".
  std::string Header(std::string_view name) const;
};

// What a stream function writes through.
class StreamWriter {
 public:
  virtual ~StreamWriter() = default;
  // Sends bytes as one chunk; false when the client is gone (stop writing then).
  virtual bool Write(std::string_view data) = 0;
  virtual bool ClientConnected() = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // When set, the response is streamed with chunked encoding: called once, it writes
  // until done. `body` is ignored then.
  std::function<void(StreamWriter&)> stream;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                           // 0: any free port (see HttpServer::port)
  size_t max_body_bytes = size_t(64) << 20;  // after Content-Encoding is undone
  // Connections open at once, each on its own thread (streams, queued requests, idle
  // keep-alive ones); at the cap the one waiting longest on its client (of the address
  // holding the most) is dropped for a newcomer, and when all are being answered the
  // newcomer gets a 503.
  int threads = 64;
  // Per client address: -1 three quarters of `threads` (connection_gate.h
  // DefaultClientConnections), 0 no cap of its own (clients behind one proxy), N at most N.
  int max_client_connections = -1;
  int header_timeout_ms = 10000;  // from a request's first byte to the end of its headers
  int idle_timeout_ms = 5000;     // keep-alive wait for the next request
  int read_timeout_ms = 30000;    // longest wait for more body bytes
  int write_timeout_ms = 10000;   // longest wait for the client to take bytes
  bool cors = false;
  std::string api_key;  // non-empty: required as "Authorization: Bearer" or "x-api-key"
  // Without an API key, Host names accepted besides loopback names and the addresses the
  // server listens on (a DNS-rebinding page sends its own name); "*" accepts any.
  std::vector<std::string> allowed_hosts;
  // Paths that never need the API key (health checks).
  std::vector<std::string> public_paths = {"/health"};
  // The JSON body for an error the transport produces itself (401, 404, 413, ...).
  std::function<std::string(const std::string& path, int status, const std::string& message)>
      error_body;
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // `path` is exact, or ends in "{param}" to capture one trailing path segment.
  void Get(const std::string& path, HttpHandler handler);
  void Post(const std::string& path, HttpHandler handler);

  // Binds the listening socket; the port is known after this.
  Status Bind();
  int port() const;
  // Serves until Stop(); returns after the listener closed.
  Status Serve();
  // Closes the listener and sets every request's server_stopping; in-flight requests
  // finish on their threads. Thread-safe.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashkv
