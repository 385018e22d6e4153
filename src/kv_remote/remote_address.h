// The address of the shared KV tier: `--kv-remote redis://HOST:PORT[/DB]`, parsed once
// with a clear error for anything else (no other scheme, no user or password, no query,
// no path but the database number). The address only ever comes from the command line:
// a request never names a store. Must not: connect (kv_remote/remote_store.h does).
#pragma once

#include <string>
#include <string_view>

#include "util/status.h"

namespace flashkv {

struct RemoteAddress {
  std::string host;  // a name, an IPv4 address or a bracketed IPv6 address's inside
  int port = 6379;
  int db = 0;  // SELECTed after connecting when not 0 (a Redis Cluster has only 0)

  std::string ToString() const;  // "redis://host:port/db"
};

// kInvalidArgument naming what is wrong.
Expected<RemoteAddress> ParseRemoteAddress(std::string_view url);

}  // namespace flashkv
