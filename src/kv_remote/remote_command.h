// One RESP command on a hiredis connection with a hard deadline and a bounded reply, for
// kv_remote/remote_store.h. hiredis's own timeouts are per read() (SO_RCVTIMEO): a server that
// trickles one byte every half second, or sends an endless status line, never trips them
// and holds the caller for good. Here the command is written and its reply read in a loop
// that checks one clock (every socket wait is cut to what is left of the deadline), the
// bytes the reply may buffer are capped, and the reader refuses arrays and strings larger
// than the caller allows before anything is allocated for them (hiredis 0.14 would calloc
// whatever element count a reply announces).
//
// Errors: kIoError for a timeout, a broken connection or a protocol error (the store is
// misbehaving: the caller drops the connection and backs off like for one that is down);
// kCorrupt for a reply over the caller's bound (a hostile or wrong value: the connection
// is dropped too, since the rest of that reply is still on the wire, but it is the value's
// fault, not the link's). Must not: know keys, frames or the cluster (RemoteStore does).
#pragma once

#include <chrono>
#include <cstddef>
#include <string_view>
#include <vector>

#include "util/status.h"

struct redisContext;
struct redisReply;

namespace flashkv {

using RemoteClock = std::chrono::steady_clock;

struct RemoteReplyLimits {
  size_t max_bytes = size_t(4) << 20;  // bytes one reply may buffer, framing included
  int max_elements = 1 << 16;          // elements of one array (CLUSTER SLOTS stays under)
};

// Installs the bounded reply functions on a fresh connection's reader (once per context).
void BoundRemoteReader(redisContext* ctx);

// Sends `args` and reads its reply before `deadline`; the reply is the caller's to free.
Expected<redisReply*> RunRemoteCommand(redisContext* ctx, const std::vector<std::string_view>& args,
                                       RemoteClock::time_point deadline,
                                       const RemoteReplyLimits& limits);

}  // namespace flashkv
