// ConnectionGate: which connections the HTTP transport keeps open. Caps how many are open
// at once (and per client address), and makes room for a newcomer by dropping the
// connection that has waited longest on its own client — idle between requests, or still
// sending its request line, headers or body — so clients that trickle bytes (slowloris)
// can never keep /health or a real request out. Connections whose request is being
// answered are never dropped — unless the answer is stalled on a client that stopped
// reading it (SetStalled: a write waits for the client to take bytes), which is waiting on
// the client like any other; when only answers in progress fill the cap, the newcomer is
// refused. Fairness between addresses: one address may hold at most
// `max_client_connections` (by default three quarters of the cap, so a quarter always stays
// for the others), and the connection dropped for a newcomer is taken from the address
// holding the most — a client that floods connections pushes out its own, not the one
// connection another address is still sending its request on.
// Must not: read or write sockets (it only shuts down the ones it drops) or know HTTP.
//
// Threading: thread-safe. A registered descriptor stays valid until Release (its owner
// closes it only after), so shutting one down under the gate's lock cannot hit a reused
// descriptor.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace flashkv {

struct ConnectionLimits {
  int max_connections = 64;        // open at once
  int max_client_connections = 0;  // per peer address; 0: max_connections (no own cap)
};

// The per-address cap when none is configured: three quarters of `max_connections` (48 of
// 64), at least one connection kept for other addresses once there are two or more.
int DefaultClientConnections(int max_connections);

class ConnectionGate {
 public:
  using Clock = std::chrono::steady_clock;

  // What a connection is doing; all but kAnswering wait on the client.
  enum class Phase { kIdle, kReadingRequest, kAnswering };

  explicit ConnectionGate(ConnectionLimits limits);

  // Registers connection `fd` from `peer` in phase kIdle. When a cap is reached, a
  // connection waiting on its client is shut down to make room: for the per-client cap the
  // peer's own longest-waiting one, for the total cap the longest-waiting one of the address
  // holding the most connections. False (not registered) when every connection in the way
  // is kAnswering.
  bool Admit(int fd, const std::string& peer, uint64_t* id);
  // The connection's phase changed (the wait starts now).
  void SetPhase(uint64_t id, Phase phase);
  // A write of its answer waits on the client (true) or went through (false); while
  // stalled, the connection may be dropped for a newcomer, longest stalled first.
  void SetStalled(uint64_t id, bool stalled);
  // Unregisters; the caller closes the descriptor afterwards.
  void Release(uint64_t id);
  // Shuts down every connection that waits on its client (server stopping).
  void ShutdownWaiting();

  int open() const;
  uint64_t dropped() const;  // connections shut down to make room

 private:
  struct Connection {
    int fd = -1;
    std::string peer;
    Phase phase = Phase::kIdle;
    Clock::time_point since;
    bool dropped = false;  // shut down; counts for no cap until its thread releases it
    bool stalled = false;  // its answer waits for the client to read
    Clock::time_point stalled_since;
    bool Waiting() const { return phase != Phase::kAnswering || stalled; }
    Clock::time_point WaitingSince() const {
      return phase != Phase::kAnswering ? since : stalled_since;
    }
  };
  // Shuts down connections waiting on their client until fewer than `limit` count: with
  // `peer`, only that peer's, longest-waiting first; without, the longest-waiting of the
  // address holding the most connections. False when not enough can go.
  bool MakeRoom(const std::string* peer, int limit);
  int Counted(const std::string* peer) const;

  const ConnectionLimits limits_;
  mutable std::mutex mu_;
  std::map<uint64_t, Connection> connections_;
  uint64_t next_id_ = 1;
  uint64_t dropped_ = 0;
};

}  // namespace flashkv
