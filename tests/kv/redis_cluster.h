// A real three-master Redis Cluster for the remote tier's tests: three redis-server
// processes with --cluster-enabled on free loopback ports (each with its own temp dir,
// nodes.conf and cluster bus port), joined by `redis-cli --cluster create`, then waited
// for until every node reports cluster_state:ok. No replicas: a killed node's slots are
// gone. redis-cli is $FLASHKV_REDIS_CLI or the one next to redis-server (Debian's
// redis-tools, scripts/deps.sh).
#pragma once

#include <fcntl.h>

#include <memory>
#include <string>
#include <vector>

#include "redis_server.h"

namespace flashkv::testing {

class RedisCluster {
 public:
  static constexpr int kNodes = 3;

  RedisCluster() {
    for (int i = 0; i < kNodes; ++i) nodes_.push_back(std::make_unique<RedisServer>());
  }

  RedisServer& node(int i) { return *nodes_[size_t(i)]; }
  // The seed a client is given (any node would do).
  std::string url() const { return nodes_[0]->url(); }

  ::testing::AssertionResult Start() {
    std::vector<std::string> create = {RedisCli(), "--cluster", "create"};
    for (auto& n : nodes_) {
      // The bus port must be free and <= 65535 (the default, port + 10000, may be neither);
      // one another test took meanwhile (tests run in parallel) is picked again.
      ::testing::AssertionResult up = ::testing::AssertionFailure();
      for (int attempt = 0; attempt < 3 && !up; ++attempt) {
        up = n->Start({"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                       "--cluster-port", std::to_string(FreeLoopbackPort()),
                       "--cluster-node-timeout", "5000"});
      }
      if (!up) return up;
      create.push_back("127.0.0.1:" + std::to_string(n->port()));
    }
    create.push_back("--cluster-yes");
    if (::access(create[0].c_str(), X_OK) != 0) {
      return ::testing::AssertionFailure()
             << "redis-cli not found: install redis-tools (bash scripts/deps.sh) or set "
                "FLASHKV_REDIS_CLI";
    }
    const std::string log = MakeTempDir("redis-cluster") + "/create.log";
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      std::vector<char*> argv;
      for (std::string& a : create) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      return ::testing::AssertionFailure() << "redis-cli --cluster create failed; see " << log;
    }
    for (int i = 0; i < 400; ++i) {
      bool ok = true;
      for (auto& n : nodes_) {
        ok = ok && n->Command({"CLUSTER", "INFO"}).find("cluster_state:ok") != std::string::npos;
      }
      if (ok) return ::testing::AssertionSuccess();
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return ::testing::AssertionFailure() << "the cluster did not reach cluster_state:ok in 10 s";
  }

  // The node serving `key`'s slot (the others answer MOVED), or -1.
  int OwnerOf(const std::string& key) {
    for (int i = 0; i < kNodes; ++i) {
      const std::string r = node(i).Command({"EXISTS", key});
      if (r == "0" || r == "1") return i;
    }
    return -1;
  }

  std::string NodeId(int i) { return node(i).Command({"CLUSTER", "MYID"}); }

 private:
  static std::string RedisCli() {
    if (const char* env = std::getenv("FLASHKV_REDIS_CLI"); env != nullptr && *env != '\0') {
      return env;
    }
    std::string server = RedisServerBinary();
    const size_t slash = server.find_last_of('/');
    return (slash == std::string::npos ? std::string(".") : server.substr(0, slash)) + "/redis-cli";
  }

  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace flashkv::testing
