// Test helpers for the dialect encoders: SSE text parsed back into events, and engine
// events produced by the real OutputStream from exact model text (the tool-call path
// cannot be reached with a random-weight model).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "engine/output_stream.h"
#include "server/json_util.h"
#include "server/stream_encoder.h"
#include "tokenizer/utf8.h"

namespace flashkv::testing {

struct SseEvent {
  std::string event;    // "" when the block had no event: line
  std::string data;     // raw data line
  std::string comment;  // a ": …" block
  Json json;            // data parsed (null for [DONE] and comments)
};

inline std::vector<SseEvent> ParseSse(std::string_view text) {
  std::vector<SseEvent> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find("\n\n", pos);
    EXPECT_NE(end, std::string_view::npos) << "unterminated SSE block at " << pos;
    if (end == std::string_view::npos) break;
    std::string_view block = text.substr(pos, end - pos);
    pos = end + 2;
    SseEvent ev;
    size_t lpos = 0;
    while (lpos <= block.size()) {
      size_t lend = block.find('\n', lpos);
      if (lend == std::string_view::npos) lend = block.size();
      std::string_view line = block.substr(lpos, lend - lpos);
      if (line.starts_with("event: ")) ev.event = line.substr(7);
      if (line.starts_with("data: ")) ev.data = line.substr(6);
      if (line.starts_with(": ")) ev.comment = line.substr(2);
      lpos = lend + 1;
    }
    if (!ev.data.empty() && ev.data != "[DONE]") ev.json = Json::parse(ev.data);
    out.push_back(std::move(ev));
  }
  return out;
}

// Splits text into pieces of at most `n` characters, never inside a UTF-8 character (as
// the engine's StreamDecoder delivers it).
inline std::vector<std::string> Pieces(std::string_view text, size_t n) {
  std::vector<std::string> out;
  std::string cur;
  size_t chars = 0;
  for (size_t i = 0; i < text.size();) {
    size_t len = utf8::ValidSequenceLength(text.substr(i));
    if (len == 0) len = 1;
    cur.append(text.substr(i, len));
    i += len;
    if (++chars == n) {
      out.push_back(std::move(cur));
      cur.clear();
      chars = 0;
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

// What a generation of `text` streams and ends with.
struct Generated {
  std::vector<GenerationEvent> events;
  GenerationResult result;
};

inline Generated Generate(const GenerationRequest& req, std::string_view text, FinishReason finish,
                          size_t piece_chars = 3) {
  Generated g;
  OutputStream os(req);
  for (const std::string& p : Pieces(text, piece_chars)) {
    for (auto& ev : os.Feed(p)) g.events.push_back(std::move(ev));
  }
  for (auto& ev : os.Finish()) g.events.push_back(std::move(ev));
  g.result.cache.prompt_tokens = 100;
  g.result.cache.cached_tokens = 60;
  g.result.completion_tokens = 20;
  os.Complete(finish, &g.result);
  return g;
}

// The whole SSE body an encoder writes for a generation.
inline std::string Encode(StreamEncoder& enc, const Generated& g) {
  std::string out = enc.Start(g.result.cache);
  for (const auto& ev : g.events) out += enc.Delta(ev);
  return out + enc.Finish(g.result);
}

inline GenerationRequest ToolRequest(bool thinking, const char* id_prefix) {
  GenerationRequest r;
  r.output = OutputMode::kChat;
  r.thinking = thinking;
  r.tools_active = true;
  r.tool_id_prefix = id_prefix;
  return r;
}

// A reply with a tool call in DS4's DSML (docs/TOKENIZER.md "DSML tool calls"), as the model would
// sample it.
inline const std::string kToolCallText =
    "Let me look.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"read_file\">\n"
    "<｜DSML｜parameter name=\"path\" string=\"true\">/etc/hosts</｜DSML｜parameter>\n"
    "<｜DSML｜parameter name=\"limit\" string=\"false\">10</｜DSML｜parameter>\n"
    "</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
inline const std::string kToolCallArgs = R"({"path":"/etc/hosts","limit":10})";

}  // namespace flashkv::testing
