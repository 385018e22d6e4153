// Server-sent events framing: data lines, named events, comments (keepalives) and the
// OpenAI end marker. Must not: know any API's event payloads.
#pragma once

#include <string>
#include <string_view>

#include "server/json_util.h"

namespace flashkv {

// "data: <json>\n\n"
std::string SseData(const Json& payload);
// "event: <name>\ndata: <json>\n\n"
std::string SseEvent(std::string_view name, const Json& payload);
// "data: [DONE]\n\n"
std::string SseDone();
// ": <text>\n\n" — ignored by clients; keeps proxies and client timeouts from closing an
// idle stream. `text` must not contain a newline.
std::string SseComment(std::string_view text);

}  // namespace flashkv
