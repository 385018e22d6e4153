#include "chat/output_parser.h"

#include <initializer_list>
#include <optional>

#include <nlohmann/json.hpp>

#include "chat/dsml.h"
#include "chat/dsml_lex.h"
#include "util/json_depth.h"

namespace flashkv {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
using dsml_lex::Cat;
using dsml_lex::IsSpace;
using dsml_lex::kMaxTagBytes;

std::string StartMarker(std::string_view prefix) {
  return Cat({"<", prefix, "tool_calls>"});
}

// Length of the longest proper prefix of `marker` that `text` ends with.
size_t PartialSuffix(std::string_view text, std::string_view marker) {
  size_t max = std::min(text.size(), marker.size() - 1);
  for (size_t n = max; n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

size_t TagEnd(std::string_view raw, size_t pos) {
  return dsml_lex::TagEnd(raw, pos, kMaxTagBytes);
}

// The entity-decoded value of attribute `key` in an opening tag, if present.
std::optional<std::string> Attribute(std::string_view tag, std::string_view key) {
  std::optional<std::string_view> raw = dsml_lex::RawAttribute(tag, key);
  if (!raw) return std::nullopt;
  return DecodeXmlEntities(*raw);
}

// Whether `tag` is "<{name}" followed by whitespace or '>'.
bool OpensElement(std::string_view tag, std::string_view name) {
  return tag.size() > name.size() + 1 && tag[0] == '<' && tag.substr(1, name.size()) == name &&
         (IsSpace(tag[name.size() + 1]) || tag[name.size() + 1] == '>');
}

// Finds the end of a parameter body (the position of its closing tag), honouring nested
// parameter elements when `nested` (no string attribute). Resumable: `from` and `depth`
// carry the scan state between calls. npos when the closing tag has not arrived.
size_t FindBodyEnd(std::string_view raw, std::string_view open, std::string_view close, bool nested,
                   size_t* from, int* depth) {
  // The next open and close at or after *from, each searched again only once passed, so
  // deep nesting costs one scan, not one per level.
  constexpr size_t kUnknown = std::string_view::npos - 1;
  size_t c = kUnknown;
  size_t o = nested ? kUnknown : std::string_view::npos;
  while (true) {
    if (c == kUnknown || (c != std::string_view::npos && c < *from)) c = raw.find(close, *from);
    if (o == kUnknown || (o != std::string_view::npos && o < *from)) o = raw.find(open, *from);
    if (o != std::string_view::npos && (c == std::string_view::npos || o < c)) {
      ++*depth;
      *from = o + open.size();
      continue;
    }
    if (c == std::string_view::npos) {
      // Resume where a marker split across the end could start.
      size_t keep = std::max(open.size(), close.size());
      *from = std::max(*from, raw.size() > keep ? raw.size() - keep : size_t{0});
      return std::string_view::npos;
    }
    if (*depth == 0) return c;
    --*depth;
    *from = c + close.size();
  }
}

std::optional<nlohmann::ordered_json> ParseParameterRun(std::string_view body,
                                                        std::string_view prefix, int nesting);

// One parameter's value. `string_attr` is the attribute if present; `nesting` counts the
// loose-XML objects around it.
nlohmann::ordered_json ParameterValue(std::string_view body,
                                      const std::optional<std::string>& string_attr,
                                      std::string_view prefix, int nesting = 0) {
  if (!string_attr) {
    // "Loose XML" recovery: a body made of parameter elements is a nested object — down to
    // kMaxJsonDepth levels (parsing and dumping recurse per level); deeper stays text.
    size_t first = 0;
    while (first < body.size() && IsSpace(body[first])) ++first;
    if (nesting < kMaxJsonDepth && OpensElement(body.substr(first), Cat({prefix, "parameter"}))) {
      if (auto nested = ParseParameterRun(body, prefix, nesting + 1)) return *nested;
    }
    return DsmlParameterValue(body, /*is_string=*/true);
  }
  return DsmlParameterValue(body, *string_attr != "false");
}

// A whole run of `<P parameter …>…</P parameter>` elements separated by whitespace.
std::optional<nlohmann::ordered_json> ParseParameterRun(std::string_view body,
                                                        std::string_view prefix, int nesting) {
  const std::string open = Cat({"<", prefix, "parameter"});
  const std::string close = Cat({"</", prefix, "parameter>"});
  nlohmann::ordered_json object = nlohmann::ordered_json::object();
  size_t pos = 0;
  while (true) {
    while (pos < body.size() && IsSpace(body[pos])) ++pos;
    if (pos == body.size()) return object;
    size_t end = body[pos] == '<' ? TagEnd(body, pos) : std::string_view::npos;
    if (end == std::string_view::npos) return std::nullopt;
    std::string_view tag = body.substr(pos, end + 1 - pos);
    if (!OpensElement(tag, open.substr(1))) return std::nullopt;
    std::optional<std::string> name = Attribute(tag, "name");
    if (!name) return std::nullopt;
    std::optional<std::string> string_attr = Attribute(tag, "string");
    size_t from = end + 1;
    int depth = 0;
    size_t body_end = FindBodyEnd(body, open, close, !string_attr, &from, &depth);
    if (body_end == std::string_view::npos) return std::nullopt;
    object[*name] =
        ParameterValue(body.substr(end + 1, body_end - end - 1), string_attr, prefix, nesting);
    pos = body_end + close.size();
  }
}

std::string Dump(const nlohmann::ordered_json& v) {
  return v.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace

OutputParser::OutputParser(bool thinking, bool tools_active)
    : tools_active_(tools_active), state_(thinking ? State::kThinkStart : State::kContent) {}

void OutputParser::EmitContent(std::string_view text, std::vector<ChatEvent>* ev) {
  if (text.empty()) return;
  result_.content.append(text);
  if (!ev->empty() && ev->back().kind == ChatEvent::Kind::kContent) {
    ev->back().text.append(text);
  } else {
    ev->push_back({ChatEvent::Kind::kContent, std::string(text)});
  }
}

void OutputParser::EmitReasoning(std::string_view text, std::vector<ChatEvent>* ev) {
  if (text.empty()) return;
  result_.reasoning.append(text);
  if (!ev->empty() && ev->back().kind == ChatEvent::Kind::kReasoning) {
    ev->back().text.append(text);
  } else {
    ev->push_back({ChatEvent::Kind::kReasoning, std::string(text)});
  }
}

bool OutputParser::StepThinkStart(bool final, std::vector<ChatEvent>* ev) {
  // A model may repeat the <think> its prompt ended with; it is not reasoning text.
  if (buf_.starts_with(kThinkOpen)) {
    buf_.erase(0, kThinkOpen.size());
  } else if (!final && kThinkOpen.starts_with(buf_)) {
    return false;  // could still become <think>
  }
  state_ = State::kReasoning;
  return true;
}

bool OutputParser::StepReasoning(bool final, std::vector<ChatEvent>* ev) {
  size_t close = buf_.find(kThinkClose);
  if (close != std::string::npos) {
    EmitReasoning(std::string_view(buf_).substr(0, close), ev);
    buf_.erase(0, close + kThinkClose.size());
    state_ = State::kContent;
    return true;
  }
  size_t hold = final ? 0 : PartialSuffix(buf_, kThinkClose);
  EmitReasoning(std::string_view(buf_).substr(0, buf_.size() - hold), ev);
  buf_.erase(0, buf_.size() - hold);
  return false;
}

bool OutputParser::StepContent(bool final, std::vector<ChatEvent>* ev) {
  // The earliest block start among the variants.
  size_t best = std::string::npos;
  std::string_view best_prefix;
  std::string marker;
  for (std::string_view prefix : kDsmlPrefixes) {
    std::string m = StartMarker(prefix);
    size_t at = buf_.find(m);
    if (at < best) {
      best = at;
      best_prefix = prefix;
      marker = m;
    }
  }
  if (best != std::string::npos) {
    size_t start = best;
    if (start >= 2 && buf_.compare(start - 2, 2, "\n\n") == 0) start -= 2;
    size_t content_end = start;
    while (content_end > 0 && IsSpace(buf_[content_end - 1])) --content_end;
    EmitContent(std::string_view(buf_).substr(0, content_end), ev);
    block_ = Block{};
    block_.prefix = std::string(best_prefix);
    block_.lead_ws = buf_.substr(content_end, start - content_end);
    block_.raw = buf_.substr(start, best + marker.size() - start);
    block_.pos = block_.raw.size();
    block_.first_call = result_.tool_calls.size();
    buf_.erase(0, best + marker.size());
    state_ = State::kBlock;
    return true;
  }
  size_t safe = buf_.size();
  if (!final) {
    size_t hold = 0;
    for (std::string_view prefix : kDsmlPrefixes) {
      hold = std::max(hold, PartialSuffix(buf_, StartMarker(prefix)));
    }
    safe -= hold;
    // Whitespace right before a block is trimmed from content, so hold it until
    // something other than a block follows.
    while (safe > 0 && IsSpace(buf_[safe - 1])) --safe;
  }
  EmitContent(std::string_view(buf_).substr(0, safe), ev);
  buf_.erase(0, safe);
  return false;
}

void OutputParser::AbandonBlock(size_t fail_pos, std::vector<ChatEvent>* ev) {
  result_.tool_calls.resize(block_.first_call);
  result_.dsml_error = true;
  ev->push_back({ChatEvent::Kind::kToolCallsInvalid, ""});
  EmitContent(block_.lead_ws, ev);
  EmitContent(std::string_view(block_.raw).substr(0, fail_pos), ev);
  // The text from the offending element on is scanned again as content, so where a block
  // is given up never depends on how the text was split into pieces.
  buf_ = block_.raw.substr(fail_pos) + buf_;
  block_ = Block{};
  state_ = State::kContent;
}

bool OutputParser::StepBlock(std::vector<ChatEvent>* ev) {
  block_.raw += buf_;
  buf_.clear();
  const std::string& p = block_.prefix;
  const std::string param_open = Cat({"<", p, "parameter"});
  const std::string param_close = Cat({"</", p, "parameter>"});
  std::string_view raw = block_.raw;
  while (true) {
    if (block_.pending_param) {
      // Waiting for the closing tag of a parameter whose opening tag starts at pos.
      size_t tag_end = block_.body_start - 1;
      std::string_view tag = raw.substr(block_.pos, tag_end + 1 - block_.pos);
      std::optional<std::string> name = Attribute(tag, "name");
      std::optional<std::string> string_attr = Attribute(tag, "string");
      size_t body_end =
          FindBodyEnd(raw, param_open, param_close, !string_attr, &block_.scan_from, &block_.depth);
      if (body_end == std::string_view::npos) return false;
      nlohmann::ordered_json value = ParameterValue(
          raw.substr(block_.body_start, body_end - block_.body_start), string_attr, p);
      std::string fragment = block_.params_in_call == 0 ? "{" : ",";
      fragment += Cat({Dump(*name), ":", Dump(value)});
      ParsedToolCall& call = result_.tool_calls.back();
      call.arguments += fragment;
      ev->push_back({ChatEvent::Kind::kToolCallArguments, std::move(fragment),
                     static_cast<int>(result_.tool_calls.size() - 1)});
      ++block_.params_in_call;
      block_.pending_param = false;
      block_.pos = body_end + param_close.size();
      continue;
    }
    while (block_.pos < raw.size() && IsSpace(raw[block_.pos])) ++block_.pos;
    if (block_.pos == raw.size()) return false;
    if (raw[block_.pos] != '<') {
      AbandonBlock(block_.pos, ev);
      return true;
    }
    size_t end = TagEnd(raw, block_.pos);
    if (end == std::string_view::npos) {
      if (raw.size() - block_.pos >= kMaxTagBytes) {
        AbandonBlock(block_.pos, ev);
        return true;
      }
      return false;
    }
    std::string_view tag = raw.substr(block_.pos, end + 1 - block_.pos);
    const int index = static_cast<int>(result_.tool_calls.size()) - 1;
    if (tag == Cat({"</", p, "tool_calls>"})) {
      if (block_.in_invoke) {
        AbandonBlock(block_.pos, ev);
        return true;
      }
      result_.raw_dsml += raw.substr(0, end + 1);
      result_.tool_block_complete = true;
      buf_ = std::string(raw.substr(end + 1));  // anything after the block is content again
      block_ = Block{};
      state_ = State::kContent;
      return true;
    }
    if (OpensElement(tag, Cat({p, "invoke"}))) {
      std::optional<std::string> name = Attribute(tag, "name");
      if (block_.in_invoke || !name || name->empty()) {
        AbandonBlock(block_.pos, ev);
        return true;
      }
      result_.tool_calls.push_back({*name, ""});
      ev->push_back({ChatEvent::Kind::kToolCallBegin, *name, index + 1});
      block_.in_invoke = true;
      block_.params_in_call = 0;
      block_.pos = end + 1;
      continue;
    }
    if (tag == Cat({"</", p, "invoke>"})) {
      if (!block_.in_invoke) {
        AbandonBlock(block_.pos, ev);
        return true;
      }
      std::string fragment = block_.params_in_call == 0 ? "{}" : "}";
      result_.tool_calls.back().arguments += fragment;
      ev->push_back({ChatEvent::Kind::kToolCallArguments, std::move(fragment), index});
      ev->push_back({ChatEvent::Kind::kToolCallEnd, "", index});
      block_.in_invoke = false;
      block_.pos = end + 1;
      continue;
    }
    if (OpensElement(tag, Cat({p, "parameter"}))) {
      if (!block_.in_invoke || !Attribute(tag, "name")) {
        AbandonBlock(block_.pos, ev);
        return true;
      }
      block_.pending_param = true;
      block_.body_start = end + 1;
      block_.scan_from = end + 1;
      block_.depth = 0;
      continue;
    }
    AbandonBlock(block_.pos, ev);
    return true;
  }
}

void OutputParser::Run(bool final, std::vector<ChatEvent>* ev) {
  bool again = true;
  while (again) {
    switch (state_) {
      case State::kThinkStart:
        again = StepThinkStart(final, ev);
        break;
      case State::kReasoning:
        again = StepReasoning(final, ev);
        break;
      case State::kContent:
        again = StepContent(final, ev);
        break;
      case State::kBlock:
        again = StepBlock(ev);
        break;
    }
  }
}

std::vector<ChatEvent> OutputParser::Feed(std::string_view text) {
  std::vector<ChatEvent> ev;
  if (finished_) return ev;
  buf_.append(text);
  Run(/*final=*/false, &ev);
  return ev;
}

std::vector<ChatEvent> OutputParser::Finish() {
  std::vector<ChatEvent> ev;
  if (finished_) return ev;
  Run(/*final=*/true, &ev);
  if (state_ == State::kBlock) {
    // Everything from the block start is content; nothing is scanned again.
    result_.unterminated_tool_block = true;
    block_.lead_ws += block_.raw;
    block_.raw.clear();
    AbandonBlock(0, &ev);
  }
  finished_ = true;
  ev.push_back({ChatEvent::Kind::kDone, ""});
  return ev;
}

}  // namespace flashkv
