#include "server/request_screen.h"

#include <cctype>

namespace flashkv {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// "application/json; charset=utf-8" → "application/json".
std::string MediaType(std::string_view content_type) {
  return Lower(Trim(content_type.substr(0, content_type.find(';'))));
}

}  // namespace

ScreenVerdict ScreenFraming(const ScreenPolicy& policy, const RequestHead& head) {
  const bool post = head.method == "POST";
  if (!post && head.method != "GET" && head.method != "HEAD" && head.method != "OPTIONS") {
    return {405, "method " + head.method + " is not allowed"};
  }
  if (head.content_length_headers > 1) return {400, "more than one Content-Length header"};
  if (head.transfer_encoding) {
    if (Lower(Trim(*head.transfer_encoding)) != "chunked") {
      return {501, "Transfer-Encoding '" + *head.transfer_encoding + "' is not supported"};
    }
    if (head.content_length) return {400, "both Content-Length and Transfer-Encoding are set"};
  }
  if (head.content_length) {
    const std::string_view v = Trim(*head.content_length);
    bool digits = !v.empty() && v.size() <= 19;
    for (char c : v) digits &= c >= '0' && c <= '9';
    if (!digits) return {400, "Content-Length '" + *head.content_length + "' is not a byte count"};
    const unsigned long long n = std::stoull(std::string(v));
    if (n > policy.max_body_bytes) {
      return {413, "request body exceeds the limit of " + std::to_string(policy.max_body_bytes) +
                       " bytes"};
    }
    if (!post && n > 0) return {400, head.method + " requests have no body"};
  }
  if (!post && head.transfer_encoding) return {400, head.method + " requests have no body"};
  if (!post) return {};
  if (head.content_encoding) {
    const std::string enc = Lower(Trim(*head.content_encoding));
    if (!enc.empty() && enc != "identity" && enc != "gzip" && enc != "deflate" && enc != "br") {
      return {415, "Content-Encoding '" + *head.content_encoding +
                       "' is not supported (gzip, deflate, br or none)"};
    }
  }
  // Form bodies are never read: multipart needs a parser this server does not run.
  if (head.content_type && MediaType(*head.content_type).starts_with("multipart/")) {
    return {415, "multipart bodies are not accepted; send application/json"};
  }
  return {};
}

}  // namespace flashkv
