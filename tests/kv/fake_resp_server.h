// Fault-injecting RESP servers for the remote tier's tests, on loopback ports.
// FakeRespServer answers every command it receives in one hostile way — trickling a reply
// one byte at a time, an endless status line, a truncated reply, WRONGTYPE, an array
// announcing 2^31 elements, or bytes that are not RESP. It serves one connection at a time
// and stops (every connection closed) when destroyed; nothing it sends depends on what was
// asked. FaultProxy sits in front of a real store (tests/kv/redis_server.h) and passes
// bytes both ways until a test turns it hostile (a trickle, an endless line), so a real
// `flashkv serve` can be warmed up against a working store first.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace flashkv::testing {

enum class RespFault { kTrickle, kEndlessLine, kTruncated, kWrongType, kHugeArray, kGarbage };

// A listening socket on 127.0.0.1 and a port the kernel picks; *port stays 0 when it fails.
inline int ListenOnLoopback(int backlog, int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd, backlog) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    *port = ntohs(a.sin_port);
  }
  return fd;
}

// Sends all of `n` bytes unless the peer left or `stop` is set; counts them in *sent.
inline bool SendAllUnlessStopped(int fd, const char* data, size_t n, const std::atomic<bool>& stop,
                                 std::atomic<uint64_t>* sent = nullptr) {
  size_t at = 0;
  while (at < n && !stop) {
    const ssize_t k = ::send(fd, data + at, n - at, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      at += size_t(k);
      if (sent != nullptr) *sent += uint64_t(k);
    } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 50);
    } else {
      return false;
    }
  }
  return at == n;
}

class FakeRespServer {
 public:
  explicit FakeRespServer(RespFault fault) : fault_(fault) {
    listen_ = ListenOnLoopback(16, &port_);
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
    return SendAllUnlessStopped(fd, s.data(), s.size(), stop_, &sent_);
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

// A RESP proxy on a loopback port in front of a real store on `upstream_port`. In kPass it
// forwards bytes both ways. Once Set() to a fault, every command a client sends (on a
// connection old or new) is answered with that fault instead of being forwarded:
// kTrickle sends "+" and then one byte every `trickle_every` until the client closes;
// kEndlessLine sends "+" and then 64 KiB blocks without a line end (at most 256 MiB, then
// holds). Each connection has its own thread; all end when the proxy is destroyed.
class FaultProxy {
 public:
  enum class Mode { kPass, kTrickle, kEndlessLine };

  explicit FaultProxy(int upstream_port,
                      std::chrono::milliseconds trickle_every = std::chrono::milliseconds(500))
      : upstream_port_(upstream_port), trickle_every_(trickle_every) {
    listen_ = ListenOnLoopback(64, &port_);
    accept_ = std::thread([this] { Accept(); });
  }
  ~FaultProxy() {
    stop_ = true;
    accept_.join();
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
    ::close(listen_);
  }
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  void Set(Mode mode) { mode_ = mode; }
  // Commands answered with a fault so far.
  uint64_t faulted() const { return faulted_.load(); }

 private:
  static bool Readable(int fd, int ms) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, ms) > 0;
  }
  // All of `s` unless the peer left or the proxy stops.
  bool SendAll(int fd, const char* data, size_t n) {
    return SendAllUnlessStopped(fd, data, n, stop_);
  }
  // True once the client closed (what it sends meanwhile is read and dropped).
  bool ClientGone(int fd, int ms) {
    if (!Readable(fd, ms)) return false;
    char buf[4096];
    return ::recv(fd, buf, sizeof buf, MSG_DONTWAIT) == 0;
  }

  void Fault(int client, Mode mode) {
    ++faulted_;
    if (!SendAll(client, "+", 1)) return;
    if (mode == Mode::kTrickle) {
      // Until the client gives up: it is the client's own deadline that must end this.
      while (!stop_) {
        const auto until = std::chrono::steady_clock::now() + trickle_every_;
        while (!stop_ && std::chrono::steady_clock::now() < until) {
          if (ClientGone(client, 20)) return;
        }
        if (!SendAll(client, "A", 1)) return;
      }
      return;
    }
    const std::string block(64 << 10, 'A');
    for (int i = 0; i < 4096 && !stop_; ++i) {
      if (!SendAll(client, block.data(), block.size())) return;
    }
    while (!stop_ && !ClientGone(client, 50)) {
    }
  }

  void Serve(int client) {
    const int up = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(uint16_t(upstream_port_));
    if (::connect(up, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(up);
      ::close(client);
      return;
    }
    char buf[65536];
    while (!stop_) {
      pollfd p[2] = {{client, POLLIN, 0}, {up, POLLIN, 0}};
      if (::poll(p, 2, 50) <= 0) continue;
      if (p[0].revents != 0) {
        const ssize_t n = ::recv(client, buf, sizeof buf, 0);
        if (n <= 0) break;
        const Mode mode = mode_.load();
        if (mode != Mode::kPass) {
          Fault(client, mode);
          break;  // the connection is spent: what follows would be out of step
        }
        if (!SendAll(up, buf, size_t(n))) break;
      }
      if (p[1].revents != 0) {
        const ssize_t n = ::recv(up, buf, sizeof buf, 0);
        if (n <= 0 || !SendAll(client, buf, size_t(n))) break;
      }
    }
    ::close(up);
    ::close(client);
  }

  void Accept() {
    while (!stop_) {
      if (!Readable(listen_, 50)) continue;
      const int fd = ::accept(listen_, nullptr, nullptr);
      if (fd < 0) continue;
      std::lock_guard<std::mutex> lock(mu_);
      threads_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  const int upstream_port_;
  const std::chrono::milliseconds trickle_every_;
  int listen_ = -1;
  int port_ = 0;
  std::atomic<Mode> mode_{Mode::kPass};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> faulted_{0};
  std::mutex mu_;
  std::vector<std::thread> threads_;
  std::thread accept_;
};

}  // namespace flashkv::testing
