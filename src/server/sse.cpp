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

}  // namespace flashkv
