// A TCP proxy on a free loopback port in front of a real server, for tests that need a
// slow store without depending on speed: while paused it forwards what the client sends
// but holds every byte the server answers, so a request in flight cannot complete until
// Resume(). It counts the bytes clients sent while paused (a request is waiting).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace flashkv::testing {

class PausableProxy {
 public:
  explicit PausableProxy(int target_port) : target_port_(target_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::listen(listen_fd_, 16) == 0 &&
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port_ = ntohs(a.sin_port);
    }
    accept_ = std::thread([this] { AcceptLoop(); });
  }

  ~PausableProxy() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      paused_ = false;
    }
    cv_.notify_all();
    ::shutdown(listen_fd_, SHUT_RDWR);
    accept_.join();
    std::vector<int> fds;
    {
      std::lock_guard<std::mutex> lock(mu_);
      fds = fds_;
    }
    for (int fd : fds) ::shutdown(fd, SHUT_RDWR);
    for (std::thread& t : pumps_) t.join();
    for (int fd : fds) ::close(fd);
    ::close(listen_fd_);
  }

  int port() const { return port_; }

  void Pause() {
    std::lock_guard<std::mutex> lock(mu_);
    paused_ = true;
    sent_while_paused_ = 0;
  }
  void Resume() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      paused_ = false;
    }
    cv_.notify_all();
  }
  // Waits until a client sent something while paused; false after `timeout`.
  bool WaitForRequestWhilePaused(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return sent_while_paused_ > 0; });
  }

 private:
  void AcceptLoop() {
    while (true) {
      const int client = ::accept(listen_fd_, nullptr, nullptr);
      if (client < 0) return;
      const int server = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(uint16_t(target_port_));
      if (::connect(server, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(server);
        ::close(client);
        continue;
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) {
        ::close(server);
        ::close(client);
        return;
      }
      fds_.push_back(client);
      fds_.push_back(server);
      pumps_.emplace_back([this, client, server] { Pump(client, server, /*hold=*/false); });
      pumps_.emplace_back([this, client, server] { Pump(server, client, /*hold=*/true); });
    }
  }

  // Copies from -> to until either side closes; `hold`: the server's direction, held
  // while paused.
  void Pump(int from, int to, bool hold) {
    char buf[65536];
    while (true) {
      const ssize_t n = ::read(from, buf, sizeof buf);
      if (n <= 0) break;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (hold) {
          cv_.wait(lock, [&] { return !paused_ || stop_; });
        } else if (paused_) {
          sent_while_paused_ += uint64_t(n);
          cv_.notify_all();
        }
      }
      ssize_t off = 0;
      while (off < n) {
        const ssize_t w = ::send(to, buf + off, size_t(n - off), MSG_NOSIGNAL);
        if (w <= 0) break;
        off += w;
      }
      if (off < n) break;
    }
    ::shutdown(to, SHUT_WR);
  }

  const int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool paused_ = false;
  bool stop_ = false;
  uint64_t sent_while_paused_ = 0;
  std::vector<int> fds_;
  std::vector<std::thread> pumps_;
  std::thread accept_;
};

}  // namespace flashkv::testing
