// The gate's decisions on real socket pairs: a dropped connection is shut down (its peer
// reads end-of-file), connections being answered are never dropped, and the longest wait
// goes first.
#include "server/connection_gate.h"

#include <sys/socket.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace flashkv {
namespace {

struct Pair {
  int server = -1;
  int client = -1;
  Pair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    server = fds[0];
    client = fds[1];
  }
  ~Pair() {
    close(server);
    close(client);
  }
  // True once the server side was shut down (the client reads end-of-file).
  bool Dropped() const {
    char c;
    return recv(client, &c, 1, MSG_DONTWAIT) == 0;
  }
};

using Phase = ConnectionGate::Phase;

TEST(ConnectionGateTest, DropsTheLongestWaitingToMakeRoom) {
  ConnectionGate gate({3, 0});
  Pair p[4];
  uint64_t id[4];
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(gate.Admit(p[i].server, "a", &id[i]));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // distinct wait starts
  }
  gate.SetPhase(id[0], Phase::kReadingRequest);  // its wait starts again: now the newest
  ASSERT_TRUE(gate.Admit(p[3].server, "b", &id[3]));
  EXPECT_FALSE(p[0].Dropped());
  EXPECT_TRUE(p[1].Dropped());
  EXPECT_FALSE(p[2].Dropped());
  EXPECT_EQ(gate.open(), 3);
  EXPECT_EQ(gate.dropped(), 1u);
  // The dropped one's thread releases it later; it no longer counts meanwhile.
  gate.Release(id[1]);
  EXPECT_EQ(gate.open(), 3);
}

TEST(ConnectionGateTest, NeverDropsAnAnswerAndRefusesWhenAllAreAnswering) {
  ConnectionGate gate({2, 0});
  Pair p[3];
  uint64_t id[3];
  ASSERT_TRUE(gate.Admit(p[0].server, "a", &id[0]));
  ASSERT_TRUE(gate.Admit(p[1].server, "a", &id[1]));
  gate.SetPhase(id[0], Phase::kAnswering);
  gate.SetPhase(id[1], Phase::kAnswering);
  EXPECT_FALSE(gate.Admit(p[2].server, "a", &id[2]));
  EXPECT_FALSE(p[0].Dropped());
  EXPECT_FALSE(p[1].Dropped());
  gate.Release(id[1]);
  EXPECT_TRUE(gate.Admit(p[2].server, "a", &id[2]));
}

TEST(ConnectionGateTest, ThePerClientCapDropsThatClientsConnection) {
  ConnectionGate gate({10, 2});
  Pair a0, a1, b0, a2;
  uint64_t id;
  ASSERT_TRUE(gate.Admit(a0.server, "10.0.0.1", &id));
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_TRUE(gate.Admit(b0.server, "10.0.0.2", &id));
  ASSERT_TRUE(gate.Admit(a1.server, "10.0.0.1", &id));
  ASSERT_TRUE(gate.Admit(a2.server, "10.0.0.1", &id));
  EXPECT_TRUE(a0.Dropped());
  EXPECT_FALSE(b0.Dropped());  // older than a1, but another client's
  EXPECT_FALSE(a1.Dropped());
  EXPECT_EQ(gate.open(), 3);
}

// Issue 34: for the total cap the connection dropped is the longest-waiting one of the
// address holding the most, not another address's older one.
TEST(ConnectionGateTest, TheTotalCapDropsFromTheAddressHoldingTheMost) {
  ConnectionGate gate({4, 0});
  Pair b0, a0, a1, a2, a3, c0;
  uint64_t id;
  ASSERT_TRUE(gate.Admit(b0.server, "10.0.0.2", &id));  // waits longest
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  for (Pair* p : {&a0, &a1, &a2}) {
    ASSERT_TRUE(gate.Admit(p->server, "10.0.0.1", &id));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(gate.Admit(a3.server, "10.0.0.1", &id));
  EXPECT_FALSE(b0.Dropped());
  EXPECT_TRUE(a0.Dropped());
  // A third address's newcomer also takes from the biggest holder.
  ASSERT_TRUE(gate.Admit(c0.server, "10.0.0.3", &id));
  EXPECT_FALSE(b0.Dropped());
  EXPECT_TRUE(a1.Dropped());
  EXPECT_EQ(gate.open(), 4);
}

TEST(ConnectionGateTest, TheDefaultPerAddressCapLeavesAQuarterToOthers) {
  EXPECT_EQ(DefaultClientConnections(1), 1);
  EXPECT_EQ(DefaultClientConnections(2), 1);
  EXPECT_EQ(DefaultClientConnections(4), 3);
  EXPECT_EQ(DefaultClientConnections(7), 6);
  EXPECT_EQ(DefaultClientConnections(64), 48);
}

TEST(ConnectionGateTest, StoppingShutsDownOnlyTheWaiting) {
  ConnectionGate gate({10, 0});
  Pair idle, answering;
  uint64_t id;
  ASSERT_TRUE(gate.Admit(idle.server, "a", &id));
  ASSERT_TRUE(gate.Admit(answering.server, "a", &id));
  gate.SetPhase(id, Phase::kAnswering);
  gate.ShutdownWaiting();
  EXPECT_TRUE(idle.Dropped());
  EXPECT_FALSE(answering.Dropped());
}

}  // namespace
}  // namespace flashkv
