#include "engine/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace flashkv {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (s.empty()) continue;
    max_len_ = std::max(max_len_, s.size());
    stops_.push_back(std::move(s));
  }
}

std::string StopMatcher::Feed(std::string_view text) {
  if (stopped_) return {};
  held_.append(text);
  if (stops_.empty()) return std::exchange(held_, {});

  // The earliest occurrence of any stop sequence wins.
  size_t first = std::string::npos;
  for (const std::string& s : stops_) {
    const size_t at = held_.find(s);
    if (at < first) {
      first = at;
      matched_ = s;
    }
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Keep the longest tail that is a proper prefix of some stop sequence.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    const size_t limit = std::min(s.size() - 1, held_.size());
    for (size_t n = limit; n > keep; --n) {
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::Flush() {
  if (stopped_) return {};
  return std::exchange(held_, {});
}

}  // namespace flashkv
