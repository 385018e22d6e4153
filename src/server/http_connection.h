// The connection loop under HttpServer (internal to the transport; only http_server.cpp
// includes it). cpp-httplib parses requests and runs the routes, but the sockets are read
// and written here, with deadlines its own loop lacks: the request line and headers must
// arrive within a time limit from their first byte, and a ConnectionGate keeps the number
// of open connections capped, dropping the one that waited longest on its client to make
// room. Every connection gets its own thread (up to a cap), so connections that trickle
// bytes never queue /health or a real request behind them.
// Must not: know routes, the API or its JSON.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "server/connection_gate.h"

namespace flashkv {

struct ConnectionTimeouts {
  std::chrono::milliseconds header{10000};  // first byte of a request → end of its headers
  std::chrono::milliseconds idle{5000};     // keep-alive: waiting for the next request
  std::chrono::milliseconds read{30000};    // body: longest wait for more bytes
  std::chrono::milliseconds write{10000};   // longest wait for the client to take bytes
  int max_requests = 100;                   // per connection
};

// What the handlers of the request this thread serves can tell the connection loop.
class ConnectionContext {
 public:
  // The connection of the calling thread's request; nullptr outside one.
  static ConnectionContext* Current();
  // The request is read; the server works on the answer (the gate never drops it now).
  void Answering();
  // Close the connection after this response (its body was not read to the end).
  void CloseAfterResponse() { close_after_ = true; }
  bool close_after() const { return close_after_; }

 private:
  friend class GuardedHttpServer;
  ConnectionGate* gate_ = nullptr;
  uint64_t id_ = 0;
  bool close_after_ = false;
};

// One thread per connection, started on demand up to `max_threads`; more wait in order.
class ConnectionThreads : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(size_t max_threads);
  ~ConnectionThreads() override;
  void enqueue(std::function<void()> fn) override;
  // Runs what is queued, then joins every thread.
  void shutdown() override;

 private:
  void Worker();

  const size_t max_threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

class GuardedHttpServer : public httplib::Server {
 public:
  // `refusal`: the response bytes for a connection refused at the cap.
  GuardedHttpServer(ConnectionLimits limits, ConnectionTimeouts timeouts, std::string refusal);

  // After binding: a listen backlog for bursts of connections (cpp-httplib's is 5, so a
  // burst of connects would wait out SYN retransmits, seconds each, before being seen).
  void WidenBacklog();
  // Shuts down the connections that wait on their clients (the server is stopping).
  void ShutdownWaiting() { gate_.ShutdownWaiting(); }
  const ConnectionGate& gate() const { return gate_; }

 private:
  bool process_and_close_socket(socket_t sock) override;

  ConnectionGate gate_;
  const ConnectionTimeouts timeouts_;
  const std::string refusal_;
};

}  // namespace flashkv
