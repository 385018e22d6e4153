// StopMatcher: the client's stop sequences over streamed text. Text is released as soon as
// it can no longer be the start of a stop sequence; when one appears, the text before it
// is released and the rest (the stop sequence included) is dropped, as the OpenAI and
// Anthropic APIs specify. Must not: decide other finish reasons.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace flashkv {

class StopMatcher {
 public:
  // Empty strings in `stops` are ignored.
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends `text`; returns what may be emitted now.
  std::string Feed(std::string_view text);
  // End of generation: the held-back text (empty after a stop).
  std::string Flush();

  bool stopped() const { return stopped_; }
  // The stop sequence that matched ("" when none did).
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  size_t max_len_ = 0;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace flashkv
