// LogCapture: everything the default spdlog logger writes while it lives, for tests that
// check a log line (tests/cli/load_progress_test.cpp, tests/kv/disk_cache_edges_test.cpp).
#pragma once

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

namespace flashkv::testing {

class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)) {
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  int Count(std::string_view needle) const {
    const std::string text = out_.str();
    int n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
      ++n;
    }
    return n;
  }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

}  // namespace flashkv::testing
