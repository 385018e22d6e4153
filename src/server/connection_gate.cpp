#include "server/connection_gate.h"

#include <sys/socket.h>

#include <algorithm>
#include <string_view>
#include <utility>

namespace flashkv {

int DefaultClientConnections(int max_connections) {
  if (max_connections <= 1) return 1;
  return max_connections - std::max(1, max_connections / 4);
}

ConnectionGate::ConnectionGate(ConnectionLimits limits) : limits_(limits) {}

int ConnectionGate::Counted(const std::string* peer) const {
  int n = 0;
  for (const auto& [id, c] : connections_) {
    if (!c.dropped && (peer == nullptr || c.peer == *peer)) ++n;
  }
  return n;
}

bool ConnectionGate::MakeRoom(const std::string* peer, int limit) {
  for (int open = Counted(peer); open >= limit; --open) {
    // For the total cap, the address holding the most connections gives one up: a client
    // flooding connections then churns through its own, whoever has waited longest.
    std::map<std::string_view, int> held;
    if (peer == nullptr) {
      for (const auto& [id, c] : connections_) {
        if (!c.dropped) ++held[c.peer];
      }
    }
    Connection* victim = nullptr;
    int victim_held = 0;
    for (auto& [id, c] : connections_) {
      if (c.dropped || !c.Waiting()) continue;
      if (peer != nullptr && c.peer != *peer) continue;
      const int h = peer == nullptr ? held[c.peer] : 0;
      if (victim == nullptr || h > victim_held ||
          (h == victim_held && c.WaitingSince() < victim->WaitingSince())) {
        victim = &c;
        victim_held = h;
      }
    }
    if (victim == nullptr) return false;
    // Its thread wakes from poll/recv, sees the connection closed and releases it.
    shutdown(victim->fd, SHUT_RDWR);
    victim->dropped = true;
    ++dropped_;
  }
  return true;
}

bool ConnectionGate::Admit(int fd, const std::string& peer, uint64_t* id) {
  const int max_total = std::max(1, limits_.max_connections);
  const int max_client =
      limits_.max_client_connections > 0 ? limits_.max_client_connections : max_total;
  std::lock_guard<std::mutex> lock(mu_);
  if (!MakeRoom(&peer, max_client) || !MakeRoom(nullptr, max_total)) return false;
  *id = next_id_++;
  Connection c;
  c.fd = fd;
  c.peer = peer;
  c.since = Clock::now();
  connections_[*id] = std::move(c);
  return true;
}

void ConnectionGate::SetPhase(uint64_t id, Phase phase) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  it->second.phase = phase;
  it->second.since = Clock::now();
}

void ConnectionGate::SetStalled(uint64_t id, bool stalled) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = connections_.find(id);
  if (it == connections_.end() || it->second.stalled == stalled) return;
  it->second.stalled = stalled;
  it->second.stalled_since = Clock::now();
}

void ConnectionGate::Release(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  connections_.erase(id);
}

void ConnectionGate::ShutdownWaiting() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, c] : connections_) {
    if (c.phase != Phase::kAnswering && !c.dropped) {
      shutdown(c.fd, SHUT_RDWR);
      c.dropped = true;
    }
  }
}

int ConnectionGate::open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Counted(nullptr);
}

uint64_t ConnectionGate::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

}  // namespace flashkv
