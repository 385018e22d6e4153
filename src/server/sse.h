// Server-sent events framing: data lines, named events, comments (keepalives) and the
// OpenAI end marker. Must not: know any API's event payloads.
#pragma once

#include <cstdint>
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
// The keepalive comment of a stream still reading its prompt, with llama.cpp's
// prompt_progress numbers (its return_progress): ": prefill {"total":…,"cache":…,
// "processed":…,"time_ms":…}" — prompt tokens, those reused from a cache, those done
// (reused included) and the milliseconds since the stream began. Still a comment, so
// clients that ignore comments are unaffected.
std::string SsePrefillProgress(int64_t total, int64_t cache, int64_t processed, int64_t time_ms);

}  // namespace flashkv
