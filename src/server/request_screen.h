// What the transport decides from a request's head alone, before a byte of its body is
// read: framing a server must not guess at (a Content-Length that is not a number, one
// past the body limit, two of them, a Transfer-Encoding other than chunked), methods and
// encodings it does not serve, and — when no API key protects the server — the browser
// rules: a POST must declare a JSON body (a page can send text/plain or a form to any
// address without asking), and Host must be a loopback name, an address the server listens
// on or an allowed name (a DNS-rebinding page sends its own name). Refusing these at once
// keeps a thread from waiting on a body that will be refused anyway.
// Must not: read bodies, check the API key (HttpServer does) or know the APIs.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashkv {

struct ScreenPolicy {
  size_t max_body_bytes = 0;
  bool browser_rules = false;               // no API key: the Host and Content-Type rules
  std::vector<std::string> allowed_hosts;   // extra Host names; "*" accepts any
  std::vector<std::string> listened_hosts;  // numeric addresses the server listens on
};

// The parts of a request head the screen reads (header values as sent; nullopt: absent).
struct RequestHead {
  std::string method;
  int content_length_headers = 0;
  std::optional<std::string> content_length;
  std::optional<std::string> transfer_encoding;
  std::optional<std::string> content_encoding;
  std::optional<std::string> content_type;
  std::optional<std::string> host;
  // A header name or value holding a control byte (NUL, CR, LF, ... — tab excepted) or
  // DEL: refused (400), as RFC 9110 §5.5 allows, before anything reads it.
  bool control_bytes = false;
};

// Whether `s` holds such a byte.
bool HasControlBytes(std::string_view s);

struct ScreenVerdict {
  int status = 0;  // 0: go on
  std::string message;
  bool refused() const { return status != 0; }
};

// Framing, method and encoding (400, 405, 413, 415, 501).
ScreenVerdict ScreenFraming(const ScreenPolicy& policy, const RequestHead& head);
// The browser rules (403 Host, 415 Content-Type); a pass when policy.browser_rules is off.
ScreenVerdict ScreenBrowser(const ScreenPolicy& policy, const RequestHead& head);

// The numeric addresses a socket bound to `host` listens on: every interface address for
// the wildcards 0.0.0.0 and ::, else `host` itself.
std::vector<std::string> ListenedHosts(const std::string& host);

// localhost (and *.localhost), 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104, in any case.
bool IsLoopbackHost(std::string_view host);

// The host part of a Host header value: "[::1]:8000" → "::1", "Example.COM:80" →
// "example.com".
std::string HostName(std::string_view host_header);

}  // namespace flashkv
