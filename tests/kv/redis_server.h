// A real redis-server for the remote tier's tests, started on a free loopback port in a
// temp directory (no persistence) and stopped by pid. The binary is $FLASHKV_REDIS_SERVER
// or redis-server on PATH; without one the test fails (CI installs it through
// scripts/deps.sh), saying how to install it.
#pragma once

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "kv_test_util.h"

namespace flashkv::testing {

inline std::string RedisServerBinary() {
  if (const char* env = std::getenv("FLASHKV_REDIS_SERVER"); env != nullptr && *env != '\0') {
    return env;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/usr/sbin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string cand = dirs.substr(start, end - start) + "/redis-server";
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    start = end + 1;
  }
  return "";
}

inline int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

class RedisServer {
 public:
  RedisServer() : port_(FreeLoopbackPort()), dir_(MakeTempDir("redis")) {}
  ~RedisServer() { Stop(); }

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

  // Starts (again, on the same port) and waits until it answers PING. A first start whose
  // port another test took meanwhile (tests run in parallel) moves to a new free port.
  ::testing::AssertionResult Start(std::vector<std::string> extra = {}) {
    ::testing::AssertionResult r = StartOnce(extra);
    for (int i = 0; i < 3 && !r && !started_; ++i) {
      port_ = FreeLoopbackPort();
      r = StartOnce(extra);
    }
    if (r) started_ = true;
    return r;
  }

 private:
  ::testing::AssertionResult StartOnce(const std::vector<std::string>& extra) {
    const std::string bin = RedisServerBinary();
    if (bin.empty()) {
      return ::testing::AssertionFailure()
             << "redis-server not found: install it with `bash scripts/deps.sh` (Debian: "
                "apt-get install redis-server) or set FLASHKV_REDIS_SERVER";
    }
    std::vector<std::string> args = {
        bin,      "--port",    std::to_string(port_), "--bind", "127.0.0.1",
        "--save", "",          "--appendonly",        "no",     "--dir",
        dir_,     "--logfile", dir_ + "/redis.log"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    for (int i = 0; i < 200; ++i) {
      if (Ping()) return ::testing::AssertionSuccess();
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return ::testing::AssertionFailure() << "redis-server exited; see " << dir_ << "/redis.log";
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return ::testing::AssertionFailure() << "redis-server did not answer in 10 s";
  }

 public:
  // SIGKILL: the store vanishes mid-conversation.
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  // One command on a fresh connection (tests reach values directly); the reply's string
  // or integer as text, "" on error.
  std::string Command(const std::vector<std::string>& args) const {
    timeval tv{2, 0};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
    if (c == nullptr || c->err != 0) {
      if (c != nullptr) redisFree(c);
      return "";
    }
    std::vector<const char*> argv;
    std::vector<size_t> argl;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      argl.push_back(a.size());
    }
    auto* r =
        static_cast<redisReply*>(redisCommandArgv(c, int(argv.size()), argv.data(), argl.data()));
    std::string out;
    if (r != nullptr) {
      if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
        out.assign(r->str, r->len);
      } else if (r->type == REDIS_REPLY_INTEGER) {
        out = std::to_string(r->integer);
      } else if (r->type == REDIS_REPLY_ERROR) {
        out = "ERR:" + std::string(r->str, r->len);
      }
      freeReplyObject(r);
    }
    redisFree(c);
    return out;
  }

  // The keys matching `pattern` (KEYS: a test's small store only).
  std::vector<std::string> Keys(const std::string& pattern) const {
    timeval tv{2, 0};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
    std::vector<std::string> out;
    if (c == nullptr || c->err != 0) {
      if (c != nullptr) redisFree(c);
      return out;
    }
    auto* r = static_cast<redisReply*>(redisCommand(c, "KEYS %b", pattern.data(), pattern.size()));
    if (r != nullptr && r->type == REDIS_REPLY_ARRAY) {
      for (size_t i = 0; i < r->elements; ++i) {
        out.emplace_back(r->element[i]->str, r->element[i]->len);
      }
    }
    if (r != nullptr) freeReplyObject(r);
    redisFree(c);
    return out;
  }

 private:
  bool Ping() const { return Command({"PING"}) == "PONG"; }

  int port_;
  std::string dir_;
  pid_t pid_ = -1;
  bool started_ = false;  // once up, restarts keep the port (clients know it)
};

}  // namespace flashkv::testing
