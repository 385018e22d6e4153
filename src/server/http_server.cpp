#include "server/http_server.h"

#include <dirent.h>
#include <malloc.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <regex>

#include <httplib.h>
#include <spdlog/spdlog.h>

#include "server/body_inflater.h"
#include "server/http_connection.h"
#include "server/request_screen.h"

namespace flashkv {
namespace {

// Set by the pre-routing screen on a request whose gzip / deflate body WrapPost decodes.
constexpr const char* kInflateMarker = "X-Flashkv-Internal-Inflate";

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Compares without an early exit, so response timing does not reveal how much of a
// guessed key was right.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

std::string RegexEscape(const std::string& s) {
  static const std::string kSpecial = R"(\^$.|?*+()[]{})";
  std::string out;
  for (char c : s) {
    if (kSpecial.find(c) != std::string::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// The routing rule of PatternFor without a regex: exact, or "prefix{param}" with one
// non-empty segment after the prefix.
bool PathMatches(std::string_view route, std::string_view path) {
  static constexpr std::string_view kParam = "{param}";
  if (!route.ends_with(kParam)) return route == path;
  const std::string_view prefix = route.substr(0, route.size() - kParam.size());
  return path.size() > prefix.size() && path.starts_with(prefix) &&
         path.substr(prefix.size()).find('/') == std::string_view::npos;
}

// "numeric host, port" of a socket address, as cpp-httplib reports the peer.
bool AddressOf(const sockaddr_storage& addr, socklen_t len, std::string* host, int* port) {
  char h[NI_MAXHOST];
  char p[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, h, sizeof(h), p, sizeof(p),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  *host = h;
  *port = std::atoi(p);
  return true;
}

// The connection of a request, found by its address pair among this process's sockets.
// cpp-httplib does not hand the socket to handlers; the (peer, local port) pair of a live
// TCP connection is unique, so the match is exact while the handler runs (the connection
// cannot close and its descriptor be reused before the handler returns).
int FindConnectionSocket(const httplib::Request& req) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const int fd = std::atoi(e->d_name);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof(peer);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) continue;
    std::string host;
    int port = -1;
    if (!AddressOf(peer, peer_len, &host, &port) || port != req.remote_port ||
        host != req.remote_addr) {
      continue;
    }
    sockaddr_storage local{};
    socklen_t local_len = sizeof(local);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) continue;
    if (!AddressOf(local, local_len, &host, &port) || port != req.local_port) continue;
    found = fd;
    break;
  }
  closedir(dir);
  return found;
}

// False once the peer closed or reset the connection. A readable socket with data is a
// pipelined next request, so the client is still there.
bool PeerOpen(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return true;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return false;
  if (p.revents & POLLIN) {
    char c;
    const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
  }
  return true;
}

// Probes one request's connection; the socket is looked up on first use.
class ConnectionProbe {
 public:
  explicit ConnectionProbe(const httplib::Request& req) : req_(&req) {}
  bool Connected() {
    if (!looked_up_) {
      fd_ = FindConnectionSocket(*req_);
      looked_up_ = true;
      req_ = nullptr;  // only valid while the handler runs; not needed any more
    }
    return fd_ < 0 || PeerOpen(fd_);
  }

 private:
  const httplib::Request* req_;
  bool looked_up_ = false;
  int fd_ = -1;
};

class SinkWriter : public StreamWriter {
 public:
  SinkWriter(httplib::DataSink& sink, std::shared_ptr<ConnectionProbe> probe)
      : sink_(sink), probe_(std::move(probe)) {}
  bool Write(std::string_view data) override {
    if (!ok_) return false;
    if (!data.empty() && !sink_.write(data.data(), data.size())) ok_ = false;
    return ok_;
  }
  bool ClientConnected() override {
    if (ok_ && !probe_->Connected()) ok_ = false;
    return ok_;
  }
  bool ok() const { return ok_; }

 private:
  httplib::DataSink& sink_;
  std::shared_ptr<ConnectionProbe> probe_;
  bool ok_ = true;
};

}  // namespace

std::string HttpRequest::Header(std::string_view name) const {
  auto it = headers.find(Lower(name));
  return it == headers.end() ? std::string() : it->second;
}

struct HttpServer::Impl {
  explicit Impl(HttpServerOptions o)
      : options(std::move(o)), server(Limits(options), Timeouts(options), Refusal(options)) {}

  static ConnectionLimits Limits(const HttpServerOptions& o) {
    ConnectionLimits l;
    l.max_connections = std::max(1, o.threads);
    l.max_client_connections = o.max_client_connections < 0
                                   ? DefaultClientConnections(l.max_connections)
                                   : o.max_client_connections;
    return l;
  }

  static ConnectionTimeouts Timeouts(const HttpServerOptions& o) {
    ConnectionTimeouts t;
    t.header = std::chrono::milliseconds(std::max(1, o.header_timeout_ms));
    t.idle = std::chrono::milliseconds(std::max(1, o.idle_timeout_ms));
    t.read = std::chrono::milliseconds(std::max(1, o.read_timeout_ms));
    t.write = std::chrono::milliseconds(std::max(1, o.write_timeout_ms));
    return t;
  }

  // The whole response for a connection refused at the cap.
  static std::string Refusal(const HttpServerOptions& o) {
    const std::string body =
        o.error_body ? o.error_body("", 503, "too many open connections; retry later") : "";
    return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
           "Connection: close\r\nRetry-After: 1\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  }

  HttpServerOptions options;
  GuardedHttpServer server;
  std::atomic<bool> stopping{false};  // HttpRequest::server_stopping
  ScreenPolicy screen;
  std::vector<std::string> post_paths;  // as registered ("{param}" for one segment)
  int port = -1;

  void ToHttplib(const HttpResponse& r, const httplib::Request& req, httplib::Response& res,
                 std::shared_ptr<ConnectionProbe> probe) {
    res.status = r.status;
    for (const auto& [k, v] : r.headers) res.set_header(k, v);
    if (!r.stream) {
      res.set_content(r.body, r.content_type);
      return;
    }
    auto fn = r.stream;
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(r.content_type,
                                     [fn, probe](size_t /*offset*/, httplib::DataSink& sink) {
                                       SinkWriter writer(sink, probe);
                                       try {
                                         fn(writer);
                                       } catch (const std::exception& e) {
                                         spdlog::error("stream handler threw: {}", e.what());
                                         return false;
                                       }
                                       if (!writer.ok()) return false;  // closes the connection
                                       sink.done();
                                       return true;
                                     });
  }

  void Serve(const HttpHandler& handler, const httplib::Request& req, std::string body,
             httplib::Response& res) {
    if (ConnectionContext* c = ConnectionContext::Current()) c->Answering();
    HttpRequest hr;
    hr.method = req.method;
    hr.path = req.path;
    hr.body = std::move(body);
    for (const auto& [k, v] : req.headers) hr.headers.emplace(Lower(k), v);
    if (!req.matches.empty() && req.matches.size() > 1) hr.path_param = req.matches[1];
    auto probe = std::make_shared<ConnectionProbe>(req);
    hr.client_connected = [probe] { return probe->Connected(); };
    hr.server_stopping = &stopping;
    HttpResponse r;
    try {
      r = handler(hr);
    } catch (const std::exception& e) {
      spdlog::error("handler for {} threw: {}", req.path, e.what());
      r = HttpResponse{};
      r.status = 500;
      r.body = options.error_body ? options.error_body(req.path, 500, "internal error") : "";
    }
    ToHttplib(r, req, res, probe);
  }

  httplib::Server::Handler Wrap(HttpHandler handler) {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      Serve(handler, req, std::string(), res);
    };
  }

  // POST bodies are read here, decoded (gzip, deflate, br) as they stream in, and refused
  // as soon as the decoded bytes pass the limit — so a small compressed body cannot expand
  // into memory, and a chunked one is bounded like one with a Content-Length.
  httplib::Server::HandlerWithContentReader WrapPost(HttpHandler handler) {
    return [this, handler](const httplib::Request& req, httplib::Response& res,
                           const httplib::ContentReader& reader) {
      const size_t limit = options.max_body_bytes;
      std::string body;
      bool too_big = false;
      // gzip / deflate are decoded here (Refuse took the coding off the request).
      std::unique_ptr<BodyInflater> inflater;
      if (req.has_header(kInflateMarker)) inflater = std::make_unique<BodyInflater>();
      bool read = reader([&](const char* data, size_t n) {
        if (inflater) {
          const Status st = inflater->Feed(std::string_view(data, n), &body, limit);
          too_big = st.code() == StatusCode::kResourceExhausted;
          return st.ok();
        }
        if (n > limit - body.size()) {
          too_big = true;
          return false;
        }
        body.append(data, n);
        return true;
      });
      if (read && inflater && !inflater->Finish().ok()) read = false;
      if (!read) {
        // The rest of the body is still on the socket: the connection cannot carry on.
        if (ConnectionContext* c = ConnectionContext::Current()) c->CloseAfterResponse();
        res.set_header("Connection", "close");
        res.status = too_big ? 413 : 400;
        const bool encoded =
            !req.get_header_value("Content-Encoding").empty() || req.has_header(kInflateMarker);
        const std::string message =
            too_big
                ? "request body exceeds the limit of " + std::to_string(limit) + " bytes" +
                      (encoded ? " once decompressed" : "")
                : "request body could not be read" + std::string(encoded ? " or decompressed" : "");
        if (options.error_body) {
          res.set_content(options.error_body(req.path, res.status, message), "application/json");
        }
        return;
      }
      const size_t body_bytes = body.size();
      Serve(handler, req, std::move(body), res);
      // A large body's parse freed many small blocks that glibc keeps in its arenas (four
      // 63 MiB bodies at once left 3 GB held): hand them back to the system.
      if (body_bytes >= (size_t(8) << 20)) malloc_trim(0);
    };
  }

  std::string PatternFor(const std::string& path) {
    const std::string param = "{param}";
    if (path.size() > param.size() && path.ends_with(param)) {
      return RegexEscape(path.substr(0, path.size() - param.size())) + "([^/]+)";
    }
    return RegexEscape(path);
  }

  bool Authorized(const httplib::Request& req) {
    if (options.api_key.empty() || req.method == "OPTIONS") return true;
    for (const std::string& p : options.public_paths) {
      if (req.path == p) return true;
    }
    const std::string auth = req.get_header_value("Authorization");
    static constexpr std::string_view kBearer = "Bearer ";
    if (auth.size() > kBearer.size() && auth.compare(0, kBearer.size(), kBearer) == 0 &&
        ConstantTimeEquals(std::string_view(auth).substr(kBearer.size()), options.api_key)) {
      return true;
    }
    const std::string x = req.get_header_value("x-api-key");
    return !x.empty() && ConstantTimeEquals(x, options.api_key);
  }

  RequestHead HeadOf(const httplib::Request& req) const {
    auto value = [&](const char* name) -> std::optional<std::string> {
      if (!req.has_header(name)) return std::nullopt;
      return req.get_header_value(name);
    };
    RequestHead head;
    head.method = req.method;
    head.content_length_headers = int(req.get_header_value_count("Content-Length"));
    head.content_length = value("Content-Length");
    head.transfer_encoding = value("Transfer-Encoding");
    head.content_encoding = value("Content-Encoding");
    head.content_type = value("Content-Type");
    head.host = value("Host");
    for (const auto& [name, v] : req.headers) {
      head.control_bytes |= HasControlBytes(name) || HasControlBytes(v);
    }
    return head;
  }

  // A body's gzip / deflate coding (any case) is decoded by WrapPost, every member of it:
  // the header is taken off so that cpp-httplib passes the bytes through, and the marker
  // (never a client's: removed first) says to inflate them. Other codings are lower-cased
  // for cpp-httplib's case-sensitive match. The request is the server's own object, handed
  // to the pre-routing handler as const.
  static void TakeContentCoding(const httplib::Request& req) {
    auto& headers = const_cast<httplib::Headers&>(req.headers);
    headers.erase(kInflateMarker);
    auto it = headers.find("Content-Encoding");
    if (it == headers.end()) return;
    if (InflatableCoding(it->second)) {
      headers.erase("Content-Encoding");
      headers.emplace(kInflateMarker, "1");
      return;
    }
    std::string v = it->second;
    for (char& c : v) c = char(std::tolower(static_cast<unsigned char>(c)));
    const size_t b = v.find_first_not_of(" \t"), e = v.find_last_not_of(" \t");
    it->second = b == std::string::npos ? std::string() : v.substr(b, e - b + 1);
  }

  // Before any body byte is read: framing, method, key, browser rules, route.
  bool Refuse(const httplib::Request& req, httplib::Response& res) {
    const RequestHead head = HeadOf(req);
    bool post_route = false;
    for (const std::string& p : post_paths) post_route |= PathMatches(p, req.path);
    ScreenVerdict v = ScreenFraming(screen, head);
    if (!v.refused() && !Authorized(req)) v = {401, "missing or invalid API key"};
    if (!v.refused()) v = ScreenBrowser(screen, head);
    // The error handler writes the 404 body (it names the endpoint).
    if (!v.refused() && head.method == "POST" && !post_route) v = {404, ""};
    if (!v.refused()) {
      TakeContentCoding(req);
      return false;
    }
    // Whatever body follows stays unread, so the connection ends with this answer.
    if (ConnectionContext* c = ConnectionContext::Current()) c->CloseAfterResponse();
    res.set_header("Connection", "close");
    res.status = v.status;
    if (!v.message.empty() && options.error_body) {
      res.set_content(options.error_body(req.path, v.status, v.message), "application/json");
    }
    return true;
  }
};

HttpServer::HttpServer(HttpServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  Impl* impl = impl_.get();
  httplib::Server& s = impl->server;
  impl->screen.max_body_bytes = impl->options.max_body_bytes;
  impl->screen.browser_rules = impl->options.api_key.empty();
  impl->screen.allowed_hosts = impl->options.allowed_hosts;
  s.set_payload_max_length(impl->options.max_body_bytes);
  // cpp-httplib's default sets SO_REUSEPORT, with which a second server of the same user
  // binds a port already in use and silently shares it; SO_REUSEADDR alone still allows a
  // restart while old connections linger in TIME_WAIT.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // Only the Keep-Alive response header reads these; the connection loop enforces them.
  s.set_keep_alive_timeout(std::max(1, impl->options.idle_timeout_ms / 1000));
  s.set_keep_alive_max_count(100);
  if (impl->options.cors) {
    s.set_default_headers({{"Access-Control-Allow-Origin", "*"},
                           {"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                           {"Access-Control-Allow-Headers", "*"}});
  }
  s.Options(".*", [](const httplib::Request&, httplib::Response& res) { res.status = 204; });
  s.set_pre_routing_handler([impl](const httplib::Request& req, httplib::Response& res) {
    return impl->Refuse(req, res) ? httplib::Server::HandlerResponse::Handled
                                  : httplib::Server::HandlerResponse::Unhandled;
  });
  // Called for every status >= 400; fills in a body only where none was written (404 for
  // unknown paths, 413 for oversized bodies, 400 for unreadable requests).
  s.set_error_handler(httplib::Server::HandlerWithResponse([impl](const httplib::Request& req,
                                                                  httplib::Response& res) {
    if (!res.body.empty() || !impl->options.error_body) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    std::string message;
    switch (res.status) {
      case 404:
        message = "unknown endpoint " + req.method + " " + req.path;
        break;
      case 413:
        message = "request body exceeds the limit of " +
                  std::to_string(impl->options.max_body_bytes) + " bytes";
        break;
      case 405:
        message = "method not allowed";
        break;
      default:
        message = "bad HTTP request";
    }
    res.set_content(impl->options.error_body(req.path, res.status, message), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler(
      [impl](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
        res.status = 500;
        res.set_content(impl->options.error_body
                            ? impl->options.error_body(req.path, 500, "internal error")
                            : std::string(),
                        "application/json");
      });
}

HttpServer::~HttpServer() {
  Stop();
}

void HttpServer::Get(const std::string& path, HttpHandler handler) {
  impl_->server.Get(impl_->PatternFor(path), impl_->Wrap(std::move(handler)));
}

void HttpServer::Post(const std::string& path, HttpHandler handler) {
  const std::string pattern = impl_->PatternFor(path);
  impl_->post_paths.push_back(path);
  impl_->server.Post(pattern, impl_->WrapPost(std::move(handler)));
}

Status HttpServer::Bind() {
  const std::string& host =
      impl_->options.host == "localhost" ? std::string("127.0.0.1") : impl_->options.host;
  if (impl_->options.port == 0) {
    const int port = impl_->server.bind_to_any_port(host);
    if (port <= 0) return IoError("cannot bind {} (any port)", host);
    impl_->port = port;
  } else {
    if (!impl_->server.bind_to_port(host, impl_->options.port)) {
      return IoError("cannot bind {}:{} (in use, or not a local address)", host,
                     impl_->options.port);
    }
    impl_->port = impl_->options.port;
  }
  impl_->server.WidenBacklog();
  impl_->screen.listened_hosts = ListenedHosts(host);
  return Status::Ok();
}

int HttpServer::port() const {
  return impl_->port;
}

Status HttpServer::Serve() {
  if (impl_->port < 0) return FailedPrecondition("Serve() before Bind()");
  if (!impl_->server.listen_after_bind())
    return IoError("listening on port {} failed", impl_->port);
  return Status::Ok();
}

void HttpServer::Stop() {
  impl_->stopping = true;
  if (impl_->server.is_running()) impl_->server.stop();
  // In-flight answers finish; connections waiting on their clients end now.
  impl_->server.ShutdownWaiting();
}

}  // namespace flashkv
