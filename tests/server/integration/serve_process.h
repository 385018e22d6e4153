// The real `flashkv serve` as a child process on a free loopback port, for end-to-end
// tests in C++ (the binary and the tiny model come from the build: FLASHKV_TEST_BIN,
// FLASHKV_TEST_MODEL, or the environment variables FLASHKV_BIN / FLASHKV_MODEL). It is
// started with stdout on a pipe (read until "listening on http://HOST:PORT") and stderr in
// a log file, stopped by a signal, and killed if a test leaves it running. Also: small
// HTTP helpers (a chat completion, /metrics samples) on cpp-httplib, a temporary directory
// and a poll-until for the tests that start it.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

namespace flashkv::testing {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A fresh directory under the system's temporary one for a server's cache or log.
inline std::string TempDir(const std::string& name) {
  std::string path = (std::filesystem::temp_directory_path() / ("flashkv-" + name + "-XXXXXX"));
  EXPECT_NE(::mkdtemp(path.data()), nullptr);
  return path;
}

// Polls `fn` every 50 ms until it holds or `limit` passes; its last answer then.
template <typename F>
bool Until(F fn, std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  const Clock::time_point end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (fn()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return fn();
}

inline std::string EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

inline std::string FlashkvBinary() {
  return EnvOr("FLASHKV_BIN", FLASHKV_TEST_BIN);
}
inline std::string TinyModel() {
  return EnvOr("FLASHKV_MODEL", FLASHKV_TEST_MODEL);
}

class ServeProcess {
 public:
  ServeProcess() = default;
  ~ServeProcess() { Kill(); }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  // Starts `flashkv serve --model <tiny> --port 0 --threads 2 <args>` and waits (at most
  // 120 s) for its "listening on" line; `log` receives its stderr.
  ::testing::AssertionResult Start(const std::vector<std::string>& args, const std::string& log) {
    log_ = log;
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return ::testing::AssertionFailure() << "pipe failed";
    std::vector<std::string> argv = {FlashkvBinary(), "serve", "--model",   TinyModel(),
                                     "--port",        "0",     "--threads", "2"};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      const int err = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (err >= 0) ::dup2(err, 2);
      std::vector<char*> cargv;
      for (std::string& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      ::execv(cargv[0], cargv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    stdout_ = out[0];
    const Clock::time_point end = Clock::now() + std::chrono::seconds(120);
    std::string got;
    while (Clock::now() < end) {
      pollfd p{stdout_, POLLIN, 0};
      if (::poll(&p, 1, 100) > 0) {
        char buf[4096];
        const ssize_t n = ::read(stdout_, buf, sizeof buf);
        if (n <= 0) break;
        got.append(buf, size_t(n));
        const size_t at = got.find("listening on http://");
        const size_t nl = at == std::string::npos ? at : got.find('\n', at);
        if (nl != std::string::npos) {
          const std::string url = got.substr(at + 13, nl - at - 13);
          port_ = std::atoi(url.substr(url.rfind(':') + 1).c_str());
          return ::testing::AssertionSuccess();
        }
      }
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return ::testing::AssertionFailure()
               << "flashkv serve exited before listening; see " << log;
      }
    }
    return ::testing::AssertionFailure() << "flashkv serve did not listen in 120 s; see " << log;
  }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      exit_status_ = status;
      return false;
    }
    return true;
  }
  std::unique_ptr<httplib::Client> Client(int read_timeout_s = 300) const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_read_timeout(read_timeout_s, 0);
    c->set_write_timeout(300, 0);
    c->set_connection_timeout(30, 0);
    return c;
  }

  // Sends `sig` and waits up to `limit` for the exit; the raw wait status, or nullopt when
  // it is still running then (it is killed afterwards by the destructor).
  std::optional<int> Stop(int sig = SIGTERM,
                          std::chrono::milliseconds limit = std::chrono::seconds(120)) {
    if (pid_ <= 0) return exit_status_;
    ::kill(pid_, sig);
    const Clock::time_point end = Clock::now() + limit;
    while (Clock::now() < end) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        exit_status_ = status;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return std::nullopt;
  }

  std::string LogText() const {
    std::ifstream in(log_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  void Kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    if (stdout_ >= 0) ::close(stdout_);
    stdout_ = -1;
  }

  pid_t pid_ = -1;
  int stdout_ = -1;
  int port_ = 0;
  std::string log_;
  std::optional<int> exit_status_;
};

// One sample of a Prometheus metric (labels as written, e.g. `kind="damaged"`); nullopt
// when /metrics has no such line.
inline std::optional<double> Metric(const ServeProcess& s, const std::string& name,
                                    const std::string& labels = "") {
  auto r = s.Client(30)->Get("/metrics");
  if (!r || r->status != 200) return std::nullopt;
  const std::string key = labels.empty() ? name + " " : name + "{" + labels + "} ";
  std::istringstream lines(r->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(key, 0) == 0) return std::atof(line.c_str() + key.size());
  }
  return std::nullopt;
}

// A greedy chat completion and what a test compares: the text, the token counts, the
// cache header, the status and how long it took.
struct ChatAnswer {
  int status = 0;
  std::string content;
  int completion_tokens = -1;
  int prompt_tokens = -1;
  std::string cache;  // x-flashkv-cache
  std::string body;
  double seconds = 0;
};

inline std::string ChatBody(const std::string& system, const std::string& question,
                            int max_tokens = 16) {
  nlohmann::json j = {
      {"model", "m"},
      {"messages",
       {{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", question}}}},
      {"thinking", false},
      {"temperature", 0},
      {"max_tokens", max_tokens}};
  return j.dump();
}

inline ChatAnswer Chat(const ServeProcess& s, const std::string& body) {
  ChatAnswer a;
  const Clock::time_point t0 = Clock::now();
  auto r = s.Client()->Post("/v1/chat/completions", body, "application/json");
  a.seconds = SecondsSince(t0);
  if (!r) return a;
  a.status = r->status;
  a.body = r->body;
  a.cache = r->get_header_value("x-flashkv-cache");
  if (r->status != 200) return a;
  const nlohmann::json j = nlohmann::json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return a;
  const nlohmann::json& m = j["choices"][0]["message"];
  a.content = m["content"].is_string() ? m["content"].get<std::string>() : "";
  a.completion_tokens = j["usage"]["completion_tokens"].get<int>();
  a.prompt_tokens = j["usage"]["prompt_tokens"].get<int>();
  return a;
}

inline int HealthStatus(const ServeProcess& s) {
  auto r = s.Client(30)->Get("/health");
  return r ? r->status : -1;
}

}  // namespace flashkv::testing
