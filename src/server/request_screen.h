// What the transport decides from a request's head alone, before a byte of its body is
// read: framing a server must not guess at (a Content-Length that is not a number, one
// past the body limit, two of them, a Transfer-Encoding other than chunked), methods and
// encodings it does not serve. Refusing these at once keeps a thread from waiting on a body
// that will be refused anyway.
// Must not: read bodies, check the API key (HttpServer does) or know the APIs.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace flashkv {

struct ScreenPolicy {
  size_t max_body_bytes = 0;
};

// The parts of a request head the screen reads (header values as sent; nullopt: absent).
struct RequestHead {
  std::string method;
  int content_length_headers = 0;
  std::optional<std::string> content_length;
  std::optional<std::string> transfer_encoding;
  std::optional<std::string> content_encoding;
  std::optional<std::string> content_type;
};

struct ScreenVerdict {
  int status = 0;  // 0: go on
  std::string message;
  bool refused() const { return status != 0; }
};

// Framing, method and encoding (400, 405, 413, 415, 501).
ScreenVerdict ScreenFraming(const ScreenPolicy& policy, const RequestHead& head);
}  // namespace flashkv
