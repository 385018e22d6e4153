// A fault-injecting RESP server for the remote tier's tests: it listens on a loopback port
// and answers every command it receives in one hostile way — trickling a reply one byte at
// a time, an endless status line, a truncated reply, WRONGTYPE, an array announcing 2^31
// elements, or bytes that are not RESP. It serves one connection at a time and stops (every
// connection closed) when destroyed; nothing it sends depends on what was asked.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace flashkv::testing {

enum class RespFault { kTrickle, kEndlessLine, kTruncated, kWrongType, kHugeArray, kGarbage };

class FakeRespServer {
 public:
  explicit FakeRespServer(RespFault fault) : fault_(fault) {
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(listen_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::listen(listen_, 16) == 0 &&
        ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port_ = ntohs(a.sin_port);
    }
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeRespServer() {
    stop_ = true;
    thread_.join();
    ::close(listen_);
  }
  FakeRespServer(const FakeRespServer&) = delete;
  FakeRespServer& operator=(const FakeRespServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  // Bytes sent to clients so far.
  uint64_t sent() const { return sent_.load(); }

 private:
  // Waits up to `ms` for `fd` to be readable; false when stopping.
  bool WaitReadable(int fd, int ms) {
    pollfd p{fd, POLLIN, 0};
    for (int waited = 0; waited < ms && !stop_; waited += 50) {
      if (::poll(&p, 1, 50) > 0) return true;
    }
    return false;
  }

  // Sends all of `s` unless the client left or the server stops; false then.
  bool Send(int fd, const std::string& s) {
    size_t at = 0;
    while (at < s.size() && !stop_) {
      const ssize_t n = ::send(fd, s.data() + at, s.size() - at, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        at += size_t(n);
        sent_ += uint64_t(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, 50);
      } else {
        return false;
      }
    }
    return at == s.size();
  }

  // Idles until the client closes or the server stops.
  void Hold(int fd) {
    char buf[4096];
    while (!stop_) {
      if (!WaitReadable(fd, 100)) continue;
      if (::recv(fd, buf, sizeof buf, 0) <= 0) return;
    }
  }

  void Answer(int fd) {
    switch (fault_) {
      case RespFault::kTrickle:
        // 20 s of it, then the connection closes (a client with no deadline of its own
        // fails the test's clock rather than hanging it).
        if (!Send(fd, "+")) return;
        for (int i = 0; i < 200 && !stop_; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          if (!Send(fd, "A")) return;
        }
        return;
      case RespFault::kEndlessLine: {
        // Never a line end; stops at 256 MiB so that a client with no bound is not run
        // out of memory by the test itself, then holds the connection.
        if (!Send(fd, "+")) return;
        const std::string block(64 << 10, 'A');
        for (int i = 0; i < 4096 && !stop_; ++i) {
          if (!Send(fd, block)) return;
        }
        Hold(fd);
        return;
      }
      case RespFault::kTruncated:
        Send(fd, "*1\r\n$100\r\nabc");
        return;  // closed by the caller
      case RespFault::kWrongType:
        Send(fd, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
        return;
      case RespFault::kHugeArray:
        if (Send(fd, "*2147483647\r\n")) Hold(fd);
        return;
      case RespFault::kGarbage:
        Send(fd, "?this is not RESP\r\n");
        return;
    }
  }

  void Serve() {
    while (!stop_) {
      if (!WaitReadable(listen_, 100)) continue;
      const int fd = ::accept(listen_, nullptr, nullptr);
      if (fd < 0) continue;
      char buf[65536];
      // Every command read is answered; WRONGTYPE and the like keep the connection.
      while (!stop_) {
        if (!WaitReadable(fd, 100)) continue;
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        Answer(fd);
        if (fault_ != RespFault::kWrongType) break;
      }
      ::close(fd);
    }
  }

  const RespFault fault_;
  int listen_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> sent_{0};
  std::thread thread_;
};

}  // namespace flashkv::testing
