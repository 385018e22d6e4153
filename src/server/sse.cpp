#include "server/sse.h"

namespace flashkv {

std::string SseData(const Json& payload) {
  return "data: " + DumpJson(payload) + "\n\n";
}

std::string SseEvent(std::string_view name, const Json& payload) {
  std::string out = "event: ";
  out += name;
  out += "\ndata: ";
  out += DumpJson(payload);
  out += "\n\n";
  return out;
}

std::string SseDone() {
  return "data: [DONE]\n\n";
}

std::string SseComment(std::string_view text) {
  std::string out = ": ";
  out += text;
  out += "\n\n";
  return out;
}

std::string SsePrefillProgress(int64_t total, int64_t cache, int64_t processed, int64_t time_ms) {
  Json numbers = {
      {"total", total}, {"cache", cache}, {"processed", processed}, {"time_ms", time_ms}};
  return SseComment("prefill " + DumpJson(numbers));
}

}  // namespace flashkv
