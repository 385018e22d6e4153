#include "chat/dsml_syntax_tracker.h"

#include <algorithm>
#include <initializer_list>
#include <optional>

#include "chat/dsml.h"
#include "chat/dsml_lex.h"

namespace flashkv {
namespace {

using dsml_lex::Cat;
using dsml_lex::IsSpace;
using dsml_lex::kMaxTagBytes;
using dsml_lex::RawAttribute;
using dsml_lex::TagEnd;

constexpr std::string_view kThinkClose = "</think>";

// Whether `rest` is shorter than `lit` and could still grow into it.
bool ProperPrefixOf(std::string_view rest, std::string_view lit) {
  return rest.size() < lit.size() && lit.starts_with(rest);
}

}  // namespace

DsmlSyntaxTracker::DsmlSyntaxTracker(bool thinking)
    : mode_(thinking ? Mode::kThink : Mode::kSearch) {}

void DsmlSyntaxTracker::Feed(std::string_view text) {
  buf_.append(text);
  bool again = true;
  while (again) {
    switch (mode_) {
      case Mode::kThink:
        again = StepThink();
        break;
      case Mode::kSearch:
        again = StepSearch();
        break;
      case Mode::kStructure:
        again = StepStructure();
        break;
      case Mode::kStringBody:
        again = StepStringBody();
        break;
      case Mode::kJson:
        again = StepJson();
        break;
    }
  }
}

void DsmlSyntaxTracker::Trim(size_t keep) {
  if (pos_ <= keep) return;
  buf_.erase(0, pos_ - keep);
  pos_ = keep;
}

bool DsmlSyntaxTracker::StepThink() {
  const size_t close = buf_.find(kThinkClose, pos_);
  if (close != std::string::npos) {
    pos_ = close + kThinkClose.size();
    mode_ = Mode::kSearch;
    return true;
  }
  // Only a split "</think>" can reach back into text already looked at.
  pos_ = std::max(pos_, buf_.size() - std::min(buf_.size(), kThinkClose.size() - 1));
  Trim(0);
  state_ = DsmlSyntaxState::kOutside;
  return false;
}

bool DsmlSyntaxTracker::StepSearch() {
  size_t best = std::string::npos;
  size_t best_end = 0;
  size_t hold = 0;
  for (std::string_view prefix : kDsmlPrefixes) {
    const std::string marker = Cat({"<", prefix, "tool_calls>"});
    hold = std::max(hold, marker.size() - 1);
    const size_t at = buf_.find(marker, pos_);
    if (at < best) {
      best = at;
      best_end = at + marker.size();
      prefix_ = std::string(prefix);
    }
  }
  if (best != std::string::npos) {
    pos_ = best_end;
    mode_ = Mode::kStructure;
    return true;
  }
  pos_ = std::max(pos_, buf_.size() - std::min(buf_.size(), hold));
  Trim(0);
  state_ = DsmlSyntaxState::kOutside;
  return false;
}

bool DsmlSyntaxTracker::StepStructure() {
  const std::string calls_close = Cat({"</", prefix_, "tool_calls>"});
  const std::string invoke_open = Cat({"<", prefix_, "invoke"});
  const std::string invoke_close = Cat({"</", prefix_, "invoke>"});
  const std::string param_open = Cat({"<", prefix_, "parameter"});
  const std::string param_close = Cat({"</", prefix_, "parameter>"});
  while (true) {
    while (pos_ < buf_.size() && IsSpace(buf_[pos_])) ++pos_;
    Trim(0);
    state_ = DsmlSyntaxState::kStructure;
    std::string_view rest(buf_);
    if (rest.empty()) return false;
    if (rest.starts_with(calls_close)) {
      pos_ += calls_close.size();
      mode_ = Mode::kSearch;  // what follows a block is content again
      return true;
    }
    // A closing parameter tag between elements ends a "loose XML" nested parameter.
    if (rest.starts_with(invoke_close) || rest.starts_with(param_close)) {
      pos_ += rest.starts_with(invoke_close) ? invoke_close.size() : param_close.size();
      continue;
    }
    for (const std::string* open : {&invoke_open, &param_open}) {
      if (!rest.starts_with(*open)) continue;
      if (rest.size() == open->size()) return false;  // the name may still continue
      const char after = rest[open->size()];
      if (!IsSpace(after) && after != '>') break;  // another element: not DSML
      const size_t end = TagEnd(rest, 0, std::string_view::npos);
      if (end == std::string_view::npos) {
        if (rest.size() < kMaxTagBytes) return false;
        mode_ = Mode::kSearch;  // the parser gives such a block up
        return true;
      }
      pos_ += end + 1;
      if (open == &invoke_open) break;
      // Bodies without a string attribute are strings (or loose XML), as in the parser.
      std::optional<std::string_view> is_string = RawAttribute(rest.substr(0, end + 1), "string");
      if (is_string && *is_string == "false") {
        mode_ = Mode::kJson;
        json_in_string_ = false;
        json_escaped_ = false;
      } else {
        mode_ = Mode::kStringBody;
      }
      return true;
    }
    if (pos_ > 0) continue;  // an invoke tag was consumed
    for (const std::string* lit :
         {&calls_close, &invoke_open, &invoke_close, &param_open, &param_close}) {
      if (ProperPrefixOf(rest, *lit)) return false;
    }
    // Not an element of this block: the parser returns the block as content and scans on
    // from here, so blocks are looked for again from this byte.
    mode_ = Mode::kSearch;
    return true;
  }
}

bool DsmlSyntaxTracker::StepStringBody() {
  const std::string param_close = Cat({"</", prefix_, "parameter>"});
  const size_t close = buf_.find(param_close, pos_);
  if (close != std::string::npos) {
    pos_ = close + param_close.size();
    mode_ = Mode::kStructure;
    return true;
  }
  pos_ = std::max(pos_, buf_.size() - std::min(buf_.size(), param_close.size() - 1));
  Trim(0);
  state_ = DsmlSyntaxState::kStringBody;
  // A body ending in "</" (or more of the closing tag) is most likely closing: finish the
  // tag greedily.
  for (size_t at = 0; at + 2 <= buf_.size(); ++at) {
    if (ProperPrefixOf(std::string_view(buf_).substr(at), param_close)) {
      state_ = DsmlSyntaxState::kStructure;
      break;
    }
  }
  return false;
}

bool DsmlSyntaxTracker::StepJson() {
  const std::string param_close = Cat({"</", prefix_, "parameter>"});
  while (pos_ < buf_.size()) {
    if (!json_in_string_) {
      std::string_view rest = std::string_view(buf_).substr(pos_);
      if (rest.starts_with(param_close)) {
        pos_ += param_close.size();
        mode_ = Mode::kStructure;
        return true;
      }
      if (ProperPrefixOf(rest, param_close)) {
        // Kept unconsumed: the closing tag may be arriving. "</" or more is finished
        // greedily; a lone "<" could still be JSON (inside a string it would be).
        Trim(0);
        state_ = rest.size() >= 2 ? DsmlSyntaxState::kStructure : DsmlSyntaxState::kJsonValue;
        return false;
      }
    }
    const char c = buf_[pos_++];
    if (json_in_string_) {
      if (json_escaped_) {
        json_escaped_ = false;
      } else if (c == '\\') {
        json_escaped_ = true;
      } else if (c == '"') {
        json_in_string_ = false;
      }
    } else if (c == '"') {
      json_in_string_ = true;
    }
  }
  Trim(0);
  state_ = json_in_string_ ? DsmlSyntaxState::kJsonString : DsmlSyntaxState::kJsonValue;
  return false;
}

}  // namespace flashkv
