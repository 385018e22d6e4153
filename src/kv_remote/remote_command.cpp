#include "kv_remote/remote_command.h"

#include <hiredis/hiredis.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <mutex>

namespace flashkv {
namespace {

// What one command's reply may hold; the reader's tasks carry a pointer to it.
struct ReplyGuard {
  RemoteReplyLimits limits;
  bool refused = false;
};

// hiredis's own reply functions (one static table, the same for every reader).
const redisReplyObjectFunctions* g_base = nullptr;
redisReplyObjectFunctions g_bounded;
std::once_flag g_once;

ReplyGuard* GuardOf(const redisReadTask* task) {
  return static_cast<ReplyGuard*>(task->privdata);
}

void* BoundedString(const redisReadTask* task, char* str, size_t len) {
  if (ReplyGuard* g = GuardOf(task); g != nullptr && len > g->limits.max_bytes) {
    g->refused = true;
    return nullptr;  // the reader fails the reply ("out of memory")
  }
  return g_base->createString(task, str, len);
}

// The element count is the one a reply announces: checked before hiredis allocates it.
template <typename N>
void* BoundedArray(const redisReadTask* task, N elements) {
  ReplyGuard* g = GuardOf(task);
  if (elements < 0 || (g != nullptr && (uint64_t(elements) > uint64_t(g->limits.max_elements)))) {
    if (g != nullptr) g->refused = true;
    return nullptr;
  }
  return g_base->createArray(task, elements);
}

template <typename N>
void SetBoundedArray(void* (*&slot)(const redisReadTask*, N)) {
  slot = &BoundedArray<N>;
}

void SetSocketTimeout(int fd, int64_t ms) {
  timeval tv;
  ms = std::max<int64_t>(ms, 1);
  tv.tv_sec = time_t(ms / 1000);
  tv.tv_usec = suseconds_t((ms % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// The type of the item the reader is in the middle of (its type byte is consumed), or -1.
int PendingType(const redisReader* r) {
  if (r->ridx < 0) return -1;
#if HIREDIS_MAJOR >= 1
  return r->task[r->ridx]->type;
#else
  return r->rstack[r->ridx].type;
#endif
}

int64_t MsLeft(RemoteClock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - RemoteClock::now())
      .count();
}

}  // namespace

void BoundRemoteReader(redisContext* ctx) {
  if (ctx == nullptr || ctx->reader == nullptr) return;
  std::call_once(g_once, [&] {
    g_base = ctx->reader->fn;
    g_bounded = *g_base;
    g_bounded.createString = &BoundedString;
    SetBoundedArray(g_bounded.createArray);
  });
  // Only a reader on hiredis's default functions is wrapped (that is what g_base calls).
  if (ctx->reader->fn == g_base) ctx->reader->fn = &g_bounded;
}

Expected<redisReply*> RunRemoteCommand(redisContext* ctx, const std::vector<std::string_view>& args,
                                       RemoteClock::time_point deadline,
                                       const RemoteReplyLimits& limits) {
  if (args.empty()) return Internal("an empty remote command");
  const std::string_view name = args[0];
  ReplyGuard guard{limits};
  ctx->reader->privdata = &guard;
  struct ClearGuard {
    redisContext* c;
    ~ClearGuard() {
      if (c->reader != nullptr) c->reader->privdata = nullptr;
    }
  } clear{ctx};

  std::vector<const char*> argv;
  std::vector<size_t> argl;
  for (std::string_view a : args) {
    argv.push_back(a.data());
    argl.push_back(a.size());
  }
  if (redisAppendCommandArgv(ctx, int(argv.size()), argv.data(), argl.data()) != REDIS_OK) {
    return IoError("{}: cannot queue the command: {}", name, ctx->errstr);
  }
  const auto timed_out = [&] { return IoError("{} timed out", name); };
  for (int done = 0; done == 0;) {
    const int64_t left = MsLeft(deadline);
    if (left <= 0) return timed_out();
    SetSocketTimeout(ctx->fd, left);
    if (redisBufferWrite(ctx, &done) != REDIS_OK) {
      return MsLeft(deadline) <= 0 ? timed_out() : IoError("{}: {}", name, ctx->errstr);
    }
  }
  while (true) {
    void* reply = nullptr;
    if (redisGetReplyFromReader(ctx, &reply) != REDIS_OK) {
      if (guard.refused) {
        return Corrupt("{}: the reply is larger than the {} bytes / {} elements allowed", name,
                       limits.max_bytes, limits.max_elements);
      }
      return IoError("{}: {}", name, ctx->errstr);
    }
    if (reply != nullptr) return static_cast<redisReply*>(reply);
    // A reply still arriving may not grow past its bound. A string value that long is a
    // bad value; a status, error or number line that never ends is a bad server.
    if (ctx->reader->len - ctx->reader->pos > limits.max_bytes) {
      if (PendingType(ctx->reader) == REDIS_REPLY_STRING) {
        return Corrupt("{}: the reply is larger than the {} bytes allowed", name, limits.max_bytes);
      }
      return IoError("{}: a reply line longer than {} bytes", name, limits.max_bytes);
    }
    const int64_t left = MsLeft(deadline);
    if (left <= 0) return timed_out();
    SetSocketTimeout(ctx->fd, left);
    if (redisBufferRead(ctx) != REDIS_OK) {
      return MsLeft(deadline) <= 0 ? timed_out() : IoError("{}: {}", name, ctx->errstr);
    }
  }
}

}  // namespace flashkv
