#include "kv_remote/remote_address.h"

#include <charconv>

#include <fmt/format.h>

namespace flashkv {
namespace {

constexpr std::string_view kScheme = "redis://";

bool ParseNumber(std::string_view s, int lo, int hi, int* out) {
  if (s.empty() || s.size() > 9) return false;
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool HostNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

bool Ipv6Char(char c) {
  return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || (c >= '0' && c <= '9') || c == ':' ||
         c == '.';
}

}  // namespace

std::string RemoteAddress::ToString() const {
  const bool v6 = host.find(':') != std::string::npos;
  return fmt::format("redis://{}{}{}:{}/{}", v6 ? "[" : "", host, v6 ? "]" : "", port, db);
}

Expected<RemoteAddress> ParseRemoteAddress(std::string_view url) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument("--kv-remote '{}': {} (expected redis://HOST:PORT[/DB])", url, why);
  };
  if (!url.starts_with(kScheme)) return bad("only the redis:// scheme is supported");
  std::string_view rest = url.substr(kScheme.size());
  if (rest.find_first_of("@?#") != std::string_view::npos) {
    return bad("user, password, query and fragment are not supported");
  }
  std::string_view authority = rest;
  std::string_view db_part;
  bool has_db = false;
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    authority = rest.substr(0, slash);
    db_part = rest.substr(slash + 1);
    has_db = true;
  }
  RemoteAddress a;
  std::string_view port_part;
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("unclosed '[' in the host");
    a.host = std::string(authority.substr(1, close - 1));
    for (char c : a.host) {
      if (!Ipv6Char(c)) return bad("not an IPv6 address inside [ ]");
    }
    if (authority.substr(close + 1).size() < 1 || authority[close + 1] != ':') {
      return bad("missing :PORT");
    }
    port_part = authority.substr(close + 2);
  } else {
    const size_t colon = authority.rfind(':');
    if (colon == std::string_view::npos) return bad("missing :PORT");
    a.host = std::string(authority.substr(0, colon));
    for (char c : a.host) {
      if (!HostNameChar(c)) return bad("the host may hold letters, digits, '.', '-' and '_'");
    }
    port_part = authority.substr(colon + 1);
  }
  if (a.host.empty()) return bad("empty host");
  if (a.host.size() > 253) return bad("host name too long");
  if (!ParseNumber(port_part, 1, 65535, &a.port)) return bad("the port must be 1-65535");
  if (has_db && !ParseNumber(db_part, 0, 1 << 20, &a.db)) {
    return bad("the database must be a number");
  }
  return a;
}

}  // namespace flashkv
