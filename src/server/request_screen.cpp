#include "server/request_screen.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>

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

bool IsJsonMediaType(const std::string& media) {
  return media == "application/json" ||
         (media.starts_with("application/") && media.ends_with("+json"));
}

}  // namespace

bool IsLoopbackHost(std::string_view host) {
  const std::string h = Lower(host);
  if (h == "localhost" || h.ends_with(".localhost")) return true;
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, h.c_str(), &v6) != 1) return false;
  if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

std::string HostName(std::string_view host_header) {
  std::string_view h = Trim(host_header);
  if (h.starts_with('[')) {
    const size_t close = h.find(']');
    return Lower(h.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1));
  }
  // One colon: name:port. More: a bare IPv6 address (not valid in Host, but unambiguous).
  const size_t colon = h.find(':');
  if (colon != std::string_view::npos && h.find(':', colon + 1) == std::string_view::npos) {
    h = h.substr(0, colon);
  }
  return Lower(h);
}

bool HasControlBytes(std::string_view s) {
  for (unsigned char c : s) {
    if ((c < 0x20 && c != '\t') || c == 0x7f) return true;
  }
  return false;
}

ScreenVerdict ScreenFraming(const ScreenPolicy& policy, const RequestHead& head) {
  if (head.control_bytes) return {400, "a request header holds a control byte"};
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

ScreenVerdict ScreenBrowser(const ScreenPolicy& policy, const RequestHead& head) {
  if (!policy.browser_rules) return {};
  if (head.host) {
    const std::string name = HostName(*head.host);
    bool allowed = IsLoopbackHost(name);
    for (const std::string& h : policy.listened_hosts) allowed |= Lower(h) == name;
    for (const std::string& h : policy.allowed_hosts) allowed |= h == "*" || Lower(h) == name;
    if (!allowed) {
      return {403, "Host '" + *head.host +
                       "' is not this server's; without --api-key only loopback names, the "
                       "addresses it listens on and --allowed-hosts are accepted"};
    }
  }
  if (head.method == "POST" &&
      (!head.content_type || !IsJsonMediaType(MediaType(*head.content_type)))) {
    return {415,
            "Content-Type must be application/json, not '" + head.content_type.value_or("") + "'"};
  }
  return {};
}

std::vector<std::string> ListenedHosts(const std::string& host) {
  if (host != "0.0.0.0" && host != "::" && host != "[::]") return {HostName(host)};
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    const int family = a->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    char h[NI_MAXHOST];
    const socklen_t len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (getnameinfo(a->ifa_addr, len, h, sizeof(h), nullptr, 0, NI_NUMERICHOST) != 0) continue;
    std::string name = h;
    if (const size_t zone = name.find('%'); zone != std::string::npos) name.resize(zone);
    out.push_back(Lower(name));
  }
  freeifaddrs(list);
  return out;
}

}  // namespace flashkv
